import { afterEach, describe, expect, it } from 'vitest';
import { ProviderError } from '../../../src/engine/model/errors.js';
import type { AgentIdentity, Message, ModelRequest, StreamSink } from '../../../src/engine/types.js';
import { AnthropicProvider, messagesBody, type AnthropicProviderOptions } from '../../../src/providers/anthropic.js';
import {
  httpError,
  responseEvents,
  scriptedHandler,
  startAnthropicServer,
  type AnthropicTestServer,
  type ServerPlan,
  type SseEvent,
} from '../../support/anthropicServer.js';

/**
 * The Anthropic provider's own reading of the wire, one request at a time: the body it sends, what
 * each stream event tells the sink, the message it assembles (and refuses), and the one-line fault
 * each way of failing becomes. The real SDK against the loopback server; expected values are the
 * literal strings and numbers a host sees.
 */

let server: AnthropicTestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

const ROOT: AgentIdentity = { name: 'root', path: ['root'], depth: 0, id: 'root' };
const HISTORY: Message[] = [{ role: 'user', content: [{ type: 'text', text: 'go' }] }];

/** Every sink call, as one line each. */
function recordingSink(): { sink: StreamSink; calls: string[] } {
  const calls: string[] = [];
  return {
    calls,
    sink: {
      text: (delta) => void calls.push(`text ${delta}`),
      toolUseStart: (id, name) => void calls.push(`start ${id} ${name}`),
      toolInputDelta: (id, json) => void calls.push(`input ${id} ${json}`),
      heartbeat: () => void calls.push('heartbeat'),
      usage: (u) => void calls.push(`usage ${u.inputTokens} ${u.outputTokens} ${u.cacheCreationInputTokens} ${u.cacheReadInputTokens}`),
    },
  };
}

/** Whatever a promise settles with, as a value. */
async function settled(promise: Promise<unknown>): Promise<unknown> {
  try {
    return { resolved: await promise };
  } catch (error) {
    return error;
  }
}

/** One `provider.stream` call against a server answering with `plans` in turn. */
async function streamOnce(plans: ServerPlan[], options: AnthropicProviderOptions = {}, request: Partial<ModelRequest> = {}) {
  server = await startAnthropicServer(scriptedHandler({ root: plans }));
  const provider = new AnthropicProvider({ apiKey: 'test-key', baseURL: server.url, sdkMaxRetries: 0, ...options });
  const { sink, calls } = recordingSink();
  const result = await settled(
    provider.stream({ agent: ROOT, system: 'be brief', messages: HISTORY, tools: [], signal: new AbortController().signal, ...request }, sink),
  );
  return { result, calls, requests: server.requests };
}

const sse = (data: { type: string; [field: string]: unknown }): SseEvent => ({ event: data.type, data });
const messageStart = (usage: Record<string, number | null>): SseEvent =>
  sse({
    type: 'message_start',
    message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null, stop_sequence: null, usage },
  });
const blockStart = (index: number, block: Record<string, unknown>): SseEvent => sse({ type: 'content_block_start', index, content_block: block });
const delta = (index: number, d: Record<string, unknown>): SseEvent => sse({ type: 'content_block_delta', index, delta: d });
const blockStop = (index: number): SseEvent => sse({ type: 'content_block_stop', index });
const messageDelta = (stopReason: string | null, usage: Record<string, number | null>): SseEvent =>
  sse({ type: 'message_delta', delta: { stop_reason: stopReason, stop_sequence: null }, usage });
const MESSAGE_STOP = sse({ type: 'message_stop' });
const streamOf = (...events: SseEvent[]): ServerPlan => ({ kind: 'stream', events });

describe('the request body', () => {
  const tool = (name: string) => ({ name, description: `${name} things`, input_schema: { type: 'object' } });
  const history: Message[] = [
    { role: 'user', content: [{ type: 'text', text: 'go' }] },
    { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'a', input: {} }] },
    {
      role: 'user',
      content: [
        { type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' },
        { type: 'text', text: 'and then' },
      ],
    },
  ];

  it('with caching: breakpoints on the last tool, the system prompt and the last block, on copies', () => {
    const before = JSON.stringify(history);
    const body = messagesBody(
      { agent: ROOT, system: 'sys', messages: history, tools: [tool('a'), tool('b')], model: 'claude-other' },
      { model: 'claude-default', maxTokens: 77, promptCaching: true },
    );
    expect(body).toEqual({
      model: 'claude-other',
      max_tokens: 77,
      stream: true,
      system: [{ type: 'text', text: 'sys', cache_control: { type: 'ephemeral' } }],
      tools: [
        { name: 'a', description: 'a things', input_schema: { type: 'object' } },
        { name: 'b', description: 'b things', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } },
      ],
      messages: [
        history[0],
        history[1],
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'toolu_1', content: 'ok' },
            { type: 'text', text: 'and then', cache_control: { type: 'ephemeral' } },
          ],
        },
      ],
    });
    expect(JSON.stringify(history)).toBe(before);
  });

  it('without caching: no breakpoint anywhere; without a system prompt, tools or history: no such keys', () => {
    const body = messagesBody(
      { agent: ROOT, system: 'sys', messages: history, tools: [tool('a')] },
      { model: 'claude-default', maxTokens: 5, promptCaching: false },
    );
    expect(JSON.stringify(body)).not.toContain('cache_control');
    expect(body).toMatchObject({ model: 'claude-default', system: [{ type: 'text', text: 'sys' }], messages: history });
    expect(body.messages).not.toBe(history);
    const bare = messagesBody({ agent: ROOT, system: '', messages: [], tools: [] }, { model: 'm', maxTokens: 1, promptCaching: true });
    expect(bare).toEqual({ model: 'm', max_tokens: 1, stream: true, messages: [] });
  });

  it('a provider built with no options asks for claude-sonnet-5-5 and 8,192 output tokens, with caching', async () => {
    const { requests } = await streamOnce([streamOf(...responseEvents({ text: 'hi' }))]);
    expect(requests[0]?.body).toMatchObject({
      model: 'claude-sonnet-5-5',
      max_tokens: 8192,
      system: [{ type: 'text', text: 'be brief', cache_control: { type: 'ephemeral' } }],
    });
    const provider = new AnthropicProvider({ apiKey: 'k' });
    expect([provider.name, provider.model, provider.maxTokens]).toEqual(['anthropic', 'claude-sonnet-5-5', 8192]);
  });

  it('options set the model, the output tokens and caching', async () => {
    const { requests } = await streamOnce([streamOf(...responseEvents({ text: 'hi' }))], { model: 'claude-x', maxTokens: 99, promptCaching: false });
    expect(requests[0]?.body).toMatchObject({ model: 'claude-x', max_tokens: 99, system: [{ type: 'text', text: 'be brief' }] });
    expect(JSON.stringify(requests[0]?.body)).not.toContain('cache_control');
  });
});

describe('what each stream event tells the sink, and the message assembled from them', () => {
  it('usage from message_start, text given in a block start, deltas, calls, and usage kept where message_delta is silent', async () => {
    const { result, calls } = await streamOnce([
      streamOf(
        messageStart({ input_tokens: 12, output_tokens: 1, cache_creation_input_tokens: 7, cache_read_input_tokens: 8 }),
        blockStart(0, { type: 'text', text: 'Hel' }),
        delta(0, { type: 'text_delta', text: 'lo' }),
        blockStop(0),
        blockStart(1, { type: 'tool_use', id: 'toolu_9', name: 'read_file', input: {} }),
        delta(1, { type: 'input_json_delta', partial_json: '{"path":' }),
        delta(1, { type: 'input_json_delta', partial_json: '"a"}' }),
        blockStop(1),
        messageDelta('tool_use', { output_tokens: 30 }),
        MESSAGE_STOP,
      ),
    ]);
    expect(calls).toEqual([
      'usage 12 1 7 8',
      'text Hel',
      'text lo',
      'heartbeat',
      'start toolu_9 read_file',
      'input toolu_9 {"path":',
      'input toolu_9 "a"}',
      'heartbeat',
      'usage 12 30 7 8',
      'heartbeat',
    ]);
    expect(result).toEqual({
      resolved: {
        content: [
          { type: 'text', text: 'Hello' },
          { type: 'tool_use', id: 'toolu_9', name: 'read_file', input: { path: 'a' } },
        ],
        stopReason: 'tool_use',
        usage: { inputTokens: 12, outputTokens: 30, cacheCreationInputTokens: 7, cacheReadInputTokens: 8 },
        incompleteToolUseIds: [],
      },
    });
  });

  it('a start without usage counts 0; a message_delta carrying every kind replaces each; one without a stop reason keeps the earlier one', async () => {
    const { result, calls } = await streamOnce([
      streamOf(
        messageStart({}),
        blockStart(0, { type: 'text', text: '' }),
        delta(0, { type: 'text_delta', text: 'x' }),
        blockStop(0),
        messageDelta('end_turn', { input_tokens: 3, output_tokens: 4, cache_creation_input_tokens: 5, cache_read_input_tokens: 6 }),
        messageDelta(null, { output_tokens: 9 }),
        MESSAGE_STOP,
      ),
    ]);
    expect(calls).toEqual(['usage 0 0 0 0', 'text x', 'heartbeat', 'usage 3 4 5 6', 'usage 3 9 5 6', 'heartbeat']);
    expect(result).toMatchObject({
      resolved: { stopReason: 'end_turn', usage: { inputTokens: 3, outputTokens: 9, cacheCreationInputTokens: 5, cacheReadInputTokens: 6 } },
    });
  });

  it('a sink without a usage callback (one made by hand) still gets the message', async () => {
    server = await startAnthropicServer(scriptedHandler({ root: [streamOf(...responseEvents({ text: 'no usage wanted' }))] }));
    const provider = new AnthropicProvider({ apiKey: 'k', baseURL: server.url, sdkMaxRetries: 0 });
    const texts: string[] = [];
    const sink: StreamSink = { text: (d) => void texts.push(d), toolUseStart: () => undefined, toolInputDelta: () => undefined, heartbeat: () => undefined };
    const answer = await provider.stream({ agent: ROOT, system: '', messages: HISTORY, tools: [], signal: new AbortController().signal }, sink);
    expect(answer.content).toEqual([{ type: 'text', text: 'no usage wanted' }]);
    expect(texts.join('')).toBe('no usage wanted');
  });

  it('blocks are kept by their index, gaps and all; a text delta sent to a call is a sign of life and leaves its input alone', async () => {
    const { result, calls } = await streamOnce([
      streamOf(
        messageStart({ input_tokens: 1 }),
        blockStart(1, { type: 'text', text: 'second' }),
        blockStop(1),
        blockStart(3, { type: 'tool_use', id: 'toolu_4', name: 'list', input: {} }),
        delta(3, { type: 'input_json_delta', partial_json: '{"a":1}' }),
        delta(3, { type: 'text_delta', text: 'stray' }),
        blockStop(3),
        messageDelta('tool_use', { output_tokens: 2 }),
        MESSAGE_STOP,
      ),
    ]);
    expect(calls).toEqual([
      'usage 1 0 0 0',
      'text second',
      'heartbeat',
      'start toolu_4 list',
      'input toolu_4 {"a":1}',
      'heartbeat',
      'heartbeat',
      'usage 1 2 0 0',
      'heartbeat',
    ]);
    expect(result).toMatchObject({
      resolved: {
        content: [
          { type: 'text', text: 'second' },
          { type: 'tool_use', id: 'toolu_4', name: 'list', input: { a: 1 } },
        ],
      },
    });
  });

  it('a thinking block is dropped, its deltas are signs of life only; an empty text block is left out; a mismatched delta is a sign of life', async () => {
    const { result, calls } = await streamOnce([
      streamOf(
        messageStart({ input_tokens: 1, output_tokens: 1 }),
        blockStart(0, { type: 'thinking', thinking: '', signature: '' }),
        delta(0, { type: 'thinking_delta', thinking: 'hmm' }),
        blockStop(0),
        blockStart(1, { type: 'text', text: '' }),
        blockStop(1),
        blockStart(2, { type: 'text', text: '' }),
        delta(2, { type: 'input_json_delta', partial_json: '{}' }),
        delta(2, { type: 'text_delta', text: 'answer' }),
        blockStop(2),
        messageDelta('end_turn', { output_tokens: 2 }),
        MESSAGE_STOP,
      ),
    ]);
    expect(calls).toEqual([
      'usage 1 1 0 0',
      'heartbeat',
      'heartbeat',
      'heartbeat',
      'heartbeat',
      'heartbeat',
      'text answer',
      'heartbeat',
      'usage 1 2 0 0',
      'heartbeat',
    ]);
    expect(result).toMatchObject({ resolved: { content: [{ type: 'text', text: 'answer' }], stopReason: 'end_turn' } });
  });

  it('a call cut off before its block stops enters with {} and its id listed; a complete call with no input gets {}', async () => {
    const { result } = await streamOnce([
      streamOf(
        messageStart({ input_tokens: 1 }),
        blockStart(0, { type: 'tool_use', id: 'toolu_empty', name: 'list', input: {} }),
        delta(0, { type: 'input_json_delta', partial_json: '  ' }),
        blockStop(0),
        blockStart(1, { type: 'tool_use', id: 'toolu_cut', name: 'write_file', input: {} }),
        delta(1, { type: 'input_json_delta', partial_json: '{"path": "a", "te' }),
        messageDelta('max_tokens', { output_tokens: 2 }),
        MESSAGE_STOP,
      ),
    ]);
    expect(result).toMatchObject({
      resolved: {
        content: [
          { type: 'tool_use', id: 'toolu_empty', name: 'list', input: {} },
          { type: 'tool_use', id: 'toolu_cut', name: 'write_file', input: {} },
        ],
        stopReason: 'max_tokens',
        incompleteToolUseIds: ['toolu_cut'],
      },
    });
    expect((result as { resolved: object }).resolved).not.toHaveProperty('invalidToolInputs');
  });

  it('complete calls whose input no tool can take enter with {} and the reason: not JSON, not an object, nested past 64 levels', async () => {
    const call = (index: number, id: string, json: string): SseEvent[] => [
      blockStart(index, { type: 'tool_use', id, name: 'read_file', input: {} }),
      delta(index, { type: 'input_json_delta', partial_json: json }),
      blockStop(index),
    ];
    const { result } = await streamOnce([
      streamOf(
        messageStart({ input_tokens: 1 }),
        ...call(0, 'toolu_json', '{"path": '),
        ...call(1, 'toolu_array', '["a"]'),
        ...call(2, 'toolu_null', 'null'),
        ...call(3, 'toolu_text', '"a"'),
        ...call(4, 'toolu_deep', `{"a":${'['.repeat(70)}${']'.repeat(70)}}`),
        ...call(5, 'toolu_fine', `{"a":${'['.repeat(60)}${']'.repeat(60)}}`),
        messageDelta('tool_use', { output_tokens: 2 }),
        MESSAGE_STOP,
      ),
    ]);
    const resolved = (result as { resolved: { content: { id: string; input: unknown }[]; invalidToolInputs: Record<string, string> } }).resolved;
    expect(resolved.content.map((b) => [b.id, JSON.stringify(b.input).length])).toEqual([
      ['toolu_json', 2],
      ['toolu_array', 2],
      ['toolu_null', 2],
      ['toolu_text', 2],
      ['toolu_deep', 2],
      ['toolu_fine', '{"a":'.length + 120 + '}'.length],
    ]);
    expect(resolved.invalidToolInputs).toStrictEqual({
      toolu_json: expect.stringMatching(/^its input was not valid JSON \(.+\)$/),
      toolu_array: 'its input was not a JSON object',
      toolu_null: 'its input was not a JSON object',
      toolu_text: 'its input was not a JSON object',
      toolu_deep: 'its input is nested more than 64 levels deep',
    });
  });

  it('a stream that ends without message_stop is a broken stream, retried, never a complete message', async () => {
    const events = responseEvents({ text: 'almost' });
    const { result } = await streamOnce([streamOf(...events.slice(0, -1))]);
    expect(result).toBeInstanceOf(ProviderError);
    expect(result).toMatchObject({ message: 'the stream ended before message_stop', retryable: true, kind: 'stream' });
  });

  it('no stop reason, or one exarch does not know, is refused by name and not retried', async () => {
    const missing = await streamOnce([streamOf(messageStart({ input_tokens: 1 }), messageDelta(null, { output_tokens: 1 }), MESSAGE_STOP)]);
    expect(missing.result).toMatchObject({ message: 'unsupported stop reason: null', retryable: false });
    await server?.close();
    const unknown = await streamOnce([streamOf(...responseEvents({ text: 'x', stopReason: 'compaction' }))]);
    expect(unknown.result).toMatchObject({ message: 'unsupported stop reason: compaction', retryable: false });
  });

  it('a delta or a stop for a block that never started breaks the protocol, said with the block index', async () => {
    const deltaFirst = await streamOnce([streamOf(messageStart({ input_tokens: 1 }), delta(0, { type: 'text_delta', text: 'x' }))]);
    expect(deltaFirst.result).toMatchObject({
      message: "the server's stream broke the protocol: a content_block_delta for block 0, which never started",
      retryable: true,
      kind: 'stream',
    });
    await server?.close();
    const stopFirst = await streamOnce([streamOf(messageStart({ input_tokens: 1 }), blockStop(0))]);
    expect(stopFirst.result).toMatchObject({
      message: "the server's stream broke the protocol: a content_block_stop for block 0, which never started",
      retryable: true,
      kind: 'stream',
    });
  });
});

describe('each way a request fails, as one line', () => {
  it('an HTTP error names its type, message and status, with the status kept and no retry', async () => {
    const { result } = await streamOnce([httpError(400, 'invalid_request_error', 'messages: too long')]);
    expect(result).toBeInstanceOf(ProviderError);
    expect(result).toMatchObject({ message: 'invalid_request_error: messages: too long (HTTP 400)', status: 400, kind: 'http', retryable: false });
  });

  it('an SSE error event after the stream began is retried, named by its type and message', async () => {
    const { result } = await streamOnce([
      { kind: 'sse_error', after: responseEvents({ text: 'partial' }).slice(0, 3), errorType: 'overloaded_error', message: 'Overloaded' },
    ]);
    expect(result).toMatchObject({ message: 'overloaded_error: Overloaded', retryable: true, kind: 'stream' });
    expect((result as ProviderError).status).toBeUndefined();
  });

  it('a connection dropped after events arrived is retried as a lost connection', async () => {
    const { result } = await streamOnce([{ kind: 'stream', events: responseEvents({ text: 'dropped halfway' }), dropAfter: 3 }]);
    expect(result).toMatchObject({ message: expect.stringMatching(/^connection lost mid-stream: ./), retryable: true, kind: 'stream' });
  });

  it('a server that cannot be reached is a connection fault, not retried', async () => {
    const gone = await startAnthropicServer(scriptedHandler({}));
    const url = gone.url;
    await gone.close();
    const provider = new AnthropicProvider({ apiKey: 'k', baseURL: url, sdkMaxRetries: 0 });
    const { sink } = recordingSink();
    const result = await settled(provider.stream({ agent: ROOT, system: '', messages: HISTORY, tools: [], signal: new AbortController().signal }, sink));
    expect(result).toMatchObject({ message: 'cannot reach the Anthropic API: fetch failed', retryable: false, kind: 'connection' });
  });

  it('a request whose signal is already aborted ends with the SDK’s abort as it is, not wrapped as a fault', async () => {
    server = await startAnthropicServer(scriptedHandler({ root: [streamOf(...responseEvents({ text: 'never sent' }))] }));
    const provider = new AnthropicProvider({ apiKey: 'k', baseURL: server.url, sdkMaxRetries: 0 });
    const { sink, calls } = recordingSink();
    const result = await settled(
      provider.stream({ agent: ROOT, system: '', messages: HISTORY, tools: [], signal: AbortSignal.abort(new Error('the user cancelled')) }, sink),
    );
    expect(result).not.toBeInstanceOf(ProviderError);
    expect((result as Error).name).toBe('APIUserAbortError');
    expect(calls).toEqual([]);
  });
});

describe('a retry-after longer than the run waits', () => {
  it('a wait past the cap is said as a rate limit even when the SDK may not retry at all (fails fast, where an uncapped wait would hang)', async () => {
    const asked = { 'retry-after-ms': '', 'retry-after': '3600' };
    for (const status of [429, 500, 529]) {
      const { result } = await streamOnce([httpError(status, undefined, undefined, asked)]);
      expect(result).toMatchObject({ message: `rate limited: the server asked to wait 3600 s (HTTP ${status}), longer than this run waits`, status });
      await server?.close();
      server = undefined;
    }
    const inMs = await streamOnce([httpError(429, undefined, undefined, { 'retry-after-ms': '120000' })]);
    expect(inMs.result).toMatchObject({ message: 'rate limited: the server asked to wait 120 s (HTTP 429), longer than this run waits' });
  });

  it('retry-after in seconds past the cap ends the request at once, saying how long was asked', async () => {
    const { result, requests } = await streamOnce(
      [httpError(429, undefined, undefined, { 'retry-after-ms': '', 'retry-after': '3600' }), streamOf(...responseEvents({ text: 'never' }))],
      {
        sdkMaxRetries: 2,
      },
    );
    expect(result).toMatchObject({
      message: 'rate limited: the server asked to wait 3600 s (HTTP 429), longer than this run waits',
      status: 429,
      kind: 'http',
      retryable: false,
    });
    expect(requests).toHaveLength(1);
  });

  it('retry-after-ms and an HTTP date are read too; maxRetryWaitMs sets the cap; a 5xx is capped like a 429', async () => {
    const inMs = await streamOnce([httpError(529, undefined, undefined, { 'retry-after-ms': '120000' })], { sdkMaxRetries: 2 });
    expect(inMs.result).toMatchObject({ message: 'rate limited: the server asked to wait 120 s (HTTP 529), longer than this run waits' });
    await server?.close();
    const date = new Date(Date.now() + 3_600_000).toUTCString();
    const asDate = await streamOnce([httpError(503, undefined, undefined, { 'retry-after-ms': '', 'retry-after': date })], { sdkMaxRetries: 2 });
    expect(asDate.result).toMatchObject({ message: expect.stringMatching(/^rate limited: the server asked to wait 3[56]\d\d s \(HTTP 503\)/) });
    await server?.close();
    const fallback = await streamOnce([httpError(429, undefined, undefined, { 'retry-after-ms': '0', 'retry-after': '3600' })], { sdkMaxRetries: 2 });
    expect(fallback.result).toMatchObject({ message: 'rate limited: the server asked to wait 3600 s (HTTP 429), longer than this run waits' });
    await server?.close();
    const plain500 = await streamOnce([httpError(500, undefined, undefined, { 'retry-after-ms': '', 'retry-after': '3600' })], { sdkMaxRetries: 2 });
    expect(plain500.result).toMatchObject({ message: 'rate limited: the server asked to wait 3600 s (HTTP 500), longer than this run waits', status: 500 });
    await server?.close();
    const lowered = await streamOnce([httpError(429, undefined, undefined, { 'retry-after-ms': '', 'retry-after': '2' })], {
      sdkMaxRetries: 2,
      maxRetryWaitMs: 1000,
    });
    expect(lowered.result).toMatchObject({ message: 'rate limited: the server asked to wait 2 s (HTTP 429), longer than this run waits' });
  });

  it('a 400 that asks for a wait is still the 400 it is', async () => {
    const { result } = await streamOnce([httpError(400, 'invalid_request_error', 'bad', { 'retry-after': '3600' })], { sdkMaxRetries: 2 });
    expect(result).toMatchObject({ message: 'invalid_request_error: bad (HTTP 400)', status: 400 });
  });

  it('a wait within the cap (or exactly it), none at all, one in the past or one that is no time is the SDK’s to honour: it retries and the stream succeeds', async () => {
    const past = new Date(Date.now() - 60_000).toUTCString();
    const cases: Record<string, Record<string, string>[]> = {
      'within and at the cap': [
        { 'retry-after-ms': '', 'retry-after': '0.001' },
        { 'retry-after-ms': '', 'retry-after': '0.5' },
      ],
      'no time': [{ 'retry-after-ms': '', 'retry-after': 'soon' }],
      'in the past': [{ 'retry-after-ms': '', 'retry-after': past }],
      zero: [{ 'retry-after-ms': '0', 'retry-after': '0' }],
    };
    for (const [what, waits] of Object.entries(cases)) {
      const { result, requests } = await streamOnce(
        [...waits.map((headers) => httpError(429, undefined, undefined, headers)), streamOf(...responseEvents({ text: 'made it' }))],
        { sdkMaxRetries: 2, maxRetryWaitMs: 500 },
      );
      expect(result, what).toMatchObject({ resolved: { content: [{ type: 'text', text: 'made it' }] } });
      expect(requests, what).toHaveLength(waits.length + 1);
      await server?.close();
      server = undefined;
    }
  });
});

/** A plain HTTP server on 127.0.0.1 answering every request with `status`, `body` and `headers`, after `delayMs`. */
async function plainServer(status: number, body: string, headers: Record<string, string> = {}, delayMs = 0): Promise<{ url: string; close(): Promise<void> }> {
  const http = await import('node:http');
  const timers = new Set<NodeJS.Timeout>();
  const plain = http.createServer((_req, res) => {
    const timer = setTimeout(() => {
      timers.delete(timer);
      res.writeHead(status, { 'content-type': 'text/plain', ...headers }).end(body);
    }, delayMs);
    timers.add(timer);
  });
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', resolve));
  const address = plain.address();
  if (address === null || typeof address === 'string') throw new Error('the plain server has no port');
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () => {
      for (const timer of timers) clearTimeout(timer);
      plain.closeAllConnections();
      return new Promise((resolve) => plain.close(() => resolve()));
    },
  };
}

describe('error bodies the SDK cannot read as an API error, and clients of a host’s own', () => {
  const failWith = async (status: number, body: string, options: AnthropicProviderOptions = {}, delayMs = 0) => {
    const plain = await plainServer(status, body, { 'x-should-retry': 'false' }, delayMs);
    try {
      const provider = new AnthropicProvider({ apiKey: 'k', baseURL: plain.url, sdkMaxRetries: 0, ...options });
      return await settled(
        provider.stream({ agent: ROOT, system: '', messages: HISTORY, tools: [], signal: new AbortController().signal }, recordingSink().sink),
      );
    } finally {
      await plain.close();
    }
  };

  it('a body that is not JSON is said as the SDK says it, with the status', async () => {
    expect(await failWith(502, 'upstream exploded')).toMatchObject({
      message: '502 upstream exploded (HTTP 502)',
      status: 502,
      kind: 'http',
      retryable: false,
    });
  });

  it('a JSON body without an error object, or with a type and no message, or a type that is no string', async () => {
    expect(await failWith(500, '{"type":"error"}')).toMatchObject({ message: '500 {"type":"error"} (HTTP 500)' });
    expect(await failWith(500, '{"type":"error","error":{"type":"overloaded_error"}}')).toMatchObject({ message: 'overloaded_error (HTTP 500)' });
    expect(await failWith(500, '{"type":"error","error":{"type":42,"message":"odd"}}')).toMatchObject({ message: 'odd (HTTP 500)' });
  });

  it('timeoutMs bounds the wait for the answer’s headers: past it the server cannot be reached', async () => {
    expect(await failWith(200, 'late', { timeoutMs: 100 }, 5_000)).toMatchObject({
      message: 'cannot reach the Anthropic API: Request timed out.',
      kind: 'connection',
      retryable: false,
    });
  });

  it('a client of the host’s own that fails with a plain error: its one line, not retried', async () => {
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    const client = new Anthropic({ apiKey: 'k', baseURL: 'http://127.0.0.1:9' });
    // A proxy client that refuses before any request leaves (the `client` option is for such clients).
    client.messages.create = (() => Promise.reject(new Error('proxy refused:\n  no route'))) as unknown as typeof client.messages.create;
    const provider = new AnthropicProvider({ client });
    const result = await settled(
      provider.stream({ agent: ROOT, system: '', messages: HISTORY, tools: [], signal: new AbortController().signal }, recordingSink().sink),
    );
    expect(result).toBeInstanceOf(ProviderError);
    expect(result).toMatchObject({ message: 'proxy refused: no route', retryable: false, kind: 'fatal' });
  });
});

describe('recording', () => {
  it('record as a file name writes the exchange there, with the API key redacted wherever it appears', async () => {
    const { mkdtempSync, readFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const file = join(mkdtempSync(join(tmpdir(), 'exarch-wire-')), 'run.recording.jsonl');
    const key = 'sk-exarch-wire-test-key-0001';
    const { result } = await streamOnce(
      [streamOf(...responseEvents({ text: 'recorded answer' }))],
      { apiKey: key, record: file },
      {
        messages: [{ role: 'user', content: [{ type: 'text', text: `my key is ${key}` }] }],
      },
    );
    expect(result).toMatchObject({ resolved: { content: [{ type: 'text', text: 'recorded answer' }] } });
    const recording = readFileSync(file, 'utf8');
    expect(recording).toContain('"kind":"exchange"');
    expect(recording).toContain('my key is [redacted]');
    expect(recording).not.toContain(key);
  });

  it('record with a client of the host’s own and no apiKey option: the exchange is still written', async () => {
    const { mkdtempSync, readFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { default: Anthropic } = await import('@anthropic-ai/sdk');
    const file = join(mkdtempSync(join(tmpdir(), 'exarch-wire-')), 'own.recording.jsonl');
    server = await startAnthropicServer(scriptedHandler({ root: [streamOf(...responseEvents({ text: 'through my client' }))] }));
    const provider = new AnthropicProvider({ client: new Anthropic({ apiKey: 'k', baseURL: server.url, maxRetries: 0 }), record: { file } });
    const answer = await provider.stream({ agent: ROOT, system: '', messages: HISTORY, tools: [], signal: new AbortController().signal }, recordingSink().sink);
    expect(answer.content).toEqual([{ type: 'text', text: 'through my client' }]);
    expect(readFileSync(file, 'utf8')).toContain('"kind":"exchange"');
  });
});
