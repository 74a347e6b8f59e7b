import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionActor, defineTool, MemoryLogSink, type AgentIdentity, type SessionInput } from '../../../src/index.js';
import { AnthropicProvider } from '../../../src/providers/anthropic.js';
import { httpError, responseEvents, scriptedHandler, startAnthropicServer, type AnthropicTestServer, type ServerPlan } from '../../support/anthropicServer.js';
import { untilSettled, toolResults, userTexts } from '../../support/helpers.js';

/** The real SDK against a local server speaking the real wire format: CONTRACT §5 row by row. */

let server: AnthropicTestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const fixture = (name: string): string => readFileSync(new URL(`../../fixtures/anthropic-sse/${name}`, import.meta.url), 'utf8');
const stream = (spec: Parameters<typeof responseEvents>[0], extra: Partial<Extract<ServerPlan, { kind: 'stream' }>> = {}): ServerPlan => ({
  kind: 'stream',
  events: responseEvents(spec),
  ...extra,
});

async function run(scripts: Parameters<typeof scriptedHandler>[0], input: Omit<SessionInput, 'provider'> = {}) {
  server = await startAnthropicServer(scriptedHandler(scripts));
  const provider = new AnthropicProvider({ apiKey: 'test-key', baseURL: server.url, model: 'claude-test', sdkMaxRetries: 2 });
  const logs = new MemoryLogSink();
  const actor = createSessionActor({ provider, logs, retry: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 5 }, ...input });
  actor.start();
  const snapshot = await untilSettled(actor);
  actor.stop();
  expect(server.pairingViolations).toEqual([]);
  return { snapshot, logs, server };
}

describe('the Anthropic provider over the real SDK', () => {
  it('streams text deltas to the listener and commits the message at end_turn, with usage', async () => {
    const deltas: string[] = [];
    const { snapshot, logs } = await run(
      {
        root: [
          stream({
            text: 'Hello from Claude.',
            chunkSize: 5,
            usage: { input_tokens: 120, output_tokens: 7, cache_read_input_tokens: 100, cache_creation_input_tokens: 20 },
          }),
        ],
      },
      { task: 'hi', listener: { onTextDelta: (_a: AgentIdentity, d: string) => void deltas.push(d) } },
    );
    expect(snapshot.value).toBe('readyForUser');
    expect(deltas.join('')).toBe('Hello from Claude.');
    expect(deltas.length).toBeGreaterThan(1);
    expect(snapshot.context.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'Hello from Claude.' }] });
    expect(logs.records('root').find((r) => r.type === 'usage')).toMatchObject({
      request: { inputTokens: 120, outputTokens: 7, cacheReadInputTokens: 100, cacheCreationInputTokens: 20 },
    });
  });

  it('replays the recorded basic response', async () => {
    const { snapshot } = await run({ root: [{ kind: 'raw', body: fixture('basic_response.txt') }] }, { task: 'hi' });
    expect(snapshot.value).toBe('readyForUser');
    expect(userTexts(snapshot.context.messages)).toEqual(['hi']);
    expect(snapshot.context.messages[1]?.role).toBe('assistant');
  });

  it('replays the recorded tool_use response: the call runs and its result goes back', async () => {
    const weather = defineTool({
      name: 'get_weather',
      description: 'weather',
      input: z.object({ location: z.string() }),
      run: ({ location }) => `sunny in ${location}`,
    });
    const { snapshot, server } = await run(
      { root: [{ kind: 'raw', body: fixture('tool_use_response.txt') }, stream({ text: 'It is sunny.' })] },
      { task: 'weather?', tools: [weather] },
    );
    expect(toolResults(snapshot.context.messages)[0]?.content).toMatch(/^sunny in /);
    expect(server.requests).toHaveLength(2);
  });

  it('replays the recorded cut-off call: it is not executed, although the SDK would have repaired its input', async () => {
    const ran: unknown[] = [];
    const makeFile = defineTool({ name: 'make_file', description: 'f', input: z.object({}).passthrough(), run: (i) => void ran.push(i) });
    const { snapshot } = await run(
      { root: [{ kind: 'raw', body: fixture('incomplete_partial_json_response.txt') }, stream({ text: 'Retrying later.' })] },
      { task: 'make it', tools: [makeFile] },
    );
    expect(ran).toEqual([]);
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({ is_error: true, content: expect.stringMatching(/cut off at max_tokens/) });
    expect(snapshot.value).toBe('readyForUser');
  });

  it('replays the recorded refusal: the session fails with that reason', async () => {
    const { snapshot } = await run({ root: [{ kind: 'raw', body: fixture('stream-a-refusal.sse') }] }, { task: 'x' });
    expect(snapshot.output).toMatchObject({ outcome: 'failed', reason: expect.stringMatching(/refus/) });
  });

  it('a cut-off tool_use at max_tokens is answered with an error and the model is reminded', async () => {
    const { snapshot } = await run(
      {
        root: [
          stream({ text: 'Writing.', toolCalls: [{ name: 'echo', input: { text: 'a long text that never completes' } }], cutOffLastCall: true }),
          stream({ text: 'ok' }),
        ],
      },
      { task: 'x', tools: [defineTool({ name: 'echo', description: 'e', input: z.object({ text: z.string() }), run: ({ text }) => text })] },
    );
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({ is_error: true });
    expect(userTexts(snapshot.context.messages).at(-1)).toMatch(/cut off/);
  });

  it('HTTP 429 and 529 before the stream are retried by the SDK', async () => {
    const { snapshot, server } = await run({ root: [httpError(429), httpError(529), stream({ text: 'made it' })] }, { task: 'x' });
    expect(snapshot.value).toBe('readyForUser');
    expect(server.requests).toHaveLength(3);
  });

  it('HTTP 401 fails the session at once with a one-line reason', async () => {
    const { snapshot, server } = await run({ root: [httpError(401, 'authentication_error', 'invalid x-api-key')] }, { task: 'x' });
    expect(snapshot.output).toMatchObject({ outcome: 'failed', reason: 'authentication_error: invalid x-api-key (HTTP 401)' });
    expect(server.requests).toHaveLength(1);
  });

  it('exhausted SDK retries fail the session', async () => {
    const { snapshot } = await run({ root: [httpError(529), httpError(529), httpError(529)] }, { task: 'x' });
    expect(snapshot.output).toMatchObject({ outcome: 'failed', reason: expect.stringMatching(/overloaded_error.*\(HTTP 529\)/) });
  });

  it('an SSE error event mid-stream discards the partial message and the step is retried', async () => {
    const partial = responseEvents({ text: 'this partial text must not be committed' }).slice(0, 4);
    const { snapshot, logs } = await run(
      { root: [{ kind: 'sse_error', after: partial, errorType: 'overloaded_error', message: 'Overloaded' }, stream({ text: 'clean answer' })] },
      { task: 'x' },
    );
    expect(snapshot.context.messages.map((m) => m.content)).toEqual([[{ type: 'text', text: 'x' }], [{ type: 'text', text: 'clean answer' }]]);
    expect(logs.records('root').filter((r) => r.type === 'retry')).toEqual([expect.objectContaining({ reason: 'overloaded_error: Overloaded' })]);
  });

  it('a connection dropped mid-stream is retried', async () => {
    const { snapshot, logs } = await run(
      { root: [stream({ text: 'dropped halfway through' }, { dropAfter: 4 }), stream({ text: 'second try' })] },
      { task: 'x' },
    );
    expect(snapshot.context.messages.at(-1)?.content).toEqual([{ type: 'text', text: 'second try' }]);
    expect(logs.records('root').filter((r) => r.type === 'retry')).toHaveLength(1);
  });

  it('a connection dropped after the headers, before the first event, is retried too', async () => {
    const { snapshot, logs } = await run({ root: [stream({ text: 'never sent' }, { dropAfter: 0 }), stream({ text: 'second try' })] }, { task: 'x' });
    expect(snapshot.context.messages.at(-1)?.content).toEqual([{ type: 'text', text: 'second try' }]);
    expect(logs.records('root').filter((r) => r.type === 'retry')).toEqual([
      expect.objectContaining({ reason: expect.stringMatching(/^connection lost mid-stream: /) }),
    ]);
  });

  it('a stream that stalls is aborted by the watchdog and retried', async () => {
    const { snapshot } = await run(
      { root: [stream({ text: 'stalls after the start' }, { stallAfter: 2 }), stream({ text: 'after the stall' })] },
      { task: 'x', stallTimeoutMs: 100 },
    );
    expect(snapshot.context.messages.at(-1)?.content).toEqual([{ type: 'text', text: 'after the stall' }]);
  });

  it('model_context_window_exceeded fails the session', async () => {
    const { snapshot } = await run({ root: [stream({ text: 'partial', stopReason: 'model_context_window_exceeded' })] }, { task: 'x' });
    expect(snapshot.output).toMatchObject({ outcome: 'failed', reason: expect.stringMatching(/context window/) });
  });

  it('pause_turn sends the paused content back unchanged and the model continues it', async () => {
    const { snapshot, server } = await run({ root: [stream({ text: 'Part one. ', stopReason: 'pause_turn' }), stream({ text: 'Part two.' })] }, { task: 'x' });
    const second = server.requests[1]?.body.messages.at(-1);
    expect(second).toMatchObject({ role: 'assistant', content: [{ type: 'text', text: 'Part one. ' }] });
    expect(snapshot.context.messages.at(-1)?.content).toEqual([
      { type: 'text', text: 'Part one. ' },
      { type: 'text', text: 'Part two.' },
    ]);
  });

  it('a sub-agent replies through the real wire format and the parent receives the payload', async () => {
    const { snapshot } = await run(
      {
        root: [
          stream({ toolCalls: [{ name: 'agent', input: { name: 'explorer', task: 'map it' } }] }),
          stream({ text: 'Waiting for explorer.' }),
          stream({ text: 'Explorer says: the map.' }),
        ],
        explorer: [stream({ toolCalls: [{ name: 'reply', input: { result: '# Map\n\n- a\n- b' } }] })],
      },
      { task: 'go' },
    );
    expect(userTexts(snapshot.context.messages)).toContain("[agent 'explorer' replied]\n# Map\n\n- a\n- b");
    expect(snapshot.value).toBe('readyForUser');
  });

  it('marks prompt-cache breakpoints on the tools, the system prompt and the end of the conversation', async () => {
    const echo = defineTool({ name: 'echo', description: 'e', input: z.object({ text: z.string() }), run: ({ text }) => text });
    const { server } = await run(
      { root: [stream({ toolCalls: [{ name: 'echo', input: { text: 'a' } }] }), stream({ text: 'done' })] },
      { task: 'x', tools: [echo] },
    );
    const body = server.requests[1]?.body;
    expect(body?.tools?.at(-1)).toMatchObject({ name: 'echo', cache_control: { type: 'ephemeral' } });
    expect(body?.tools?.[0]).not.toHaveProperty('cache_control');
    expect(body?.system).toEqual([expect.objectContaining({ type: 'text', cache_control: { type: 'ephemeral' } })]);
    const last = body?.messages.at(-1);
    expect(Array.isArray(last?.content) && last.content.at(-1)).toMatchObject({ type: 'tool_result', cache_control: { type: 'ephemeral' } });
    // Only the request carries the breakpoint: the session's own history is untouched.
    expect(JSON.stringify(body?.messages.slice(0, -1))).not.toContain('cache_control');
  });
});
