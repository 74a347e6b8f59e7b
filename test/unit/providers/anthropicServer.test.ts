import { readFileSync } from 'node:fs';
import Anthropic, {
  AnthropicError,
  APIConnectionError,
  APIError,
  APIUserAbortError,
  AuthenticationError,
  BadRequestError,
  InternalServerError,
} from '@anthropic-ai/sdk';
import type { MessageParam, MessageStreamEvent, TextBlockParam } from '@anthropic-ai/sdk/resources/messages/messages';
import { afterEach, describe, expect, it } from 'vitest';
import {
  agentOf,
  httpError,
  responseEvents,
  scriptedHandler,
  startAnthropicServer,
  type AnthropicTestServer,
  type Handler,
  type MessagesBody,
  type ServerPlan,
} from '../../support/anthropicServer.js';

const fixture = (name: string): string => readFileSync(new URL(`../../fixtures/anthropic-sse/${name}`, import.meta.url), 'utf8');

const servers: AnthropicTestServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

async function serve(handler: Handler): Promise<{ server: AnthropicTestServer; client: Anthropic }> {
  const server = await startAnthropicServer(handler);
  servers.push(server);
  return { server, client: new Anthropic({ apiKey: 'test', baseURL: server.url, maxRetries: 2 }) };
}

const always =
  (plan: ServerPlan): Handler =>
  () =>
    plan;

const hello: MessageParam[] = [{ role: 'user', content: 'Hello' }];

function params(messages: MessageParam[] = hello, system?: string | TextBlockParam[]) {
  return { model: 'claude-test', max_tokens: 256, messages, ...(system === undefined ? {} : { system }) };
}

/** Streams one request, collecting the raw events the SDK saw. */
function streamAndCollect(client: Anthropic, messages: MessageParam[] = hello, options: { signal?: AbortSignal } = {}) {
  const events: MessageStreamEvent[] = [];
  const stream = client.messages.stream(params(messages), options);
  stream.on('streamEvent', (event) => events.push(event));
  return { stream, events };
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error('expected the promise to reject');
}

const stoppedIndices = (events: readonly MessageStreamEvent[]): number[] => events.flatMap((e) => (e.type === 'content_block_stop' ? [e.index] : []));

describe('recorded SDK fixtures replay through the real SDK', () => {
  it('basic_response gives its text and end_turn', async () => {
    const { client, server } = await serve(always({ kind: 'raw', body: fixture('basic_response.txt') }));
    const stream = client.messages.stream(params());
    const message = await stream.finalMessage();
    expect(message.content).toEqual([{ type: 'text', text: 'Hello there!' }]);
    expect(message.stop_reason).toBe('end_turn');
    expect(message.usage.output_tokens).toBe(6);
    expect(stream.request_id).toBe('req_test_0001');
    expect(server.requests).toHaveLength(1);
    expect(server.requests[0]?.body.stream).toBe(true);
    // SDK 1.10.0 sends the API key as a bearer token, not as x-api-key.
    expect(server.requests[0]?.headers.authorization).toBe('Bearer test');
  });

  it('tool_use_response gives the tool_use with its input parsed from the JSON deltas', async () => {
    const { client } = await serve(always({ kind: 'raw', body: fixture('tool_use_response.txt') }));
    const { stream, events } = streamAndCollect(client);
    const message = await stream.finalMessage();
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content[1]).toMatchObject({ type: 'tool_use', id: 'toolu_01NRLabsLyVHZPKxbKvkfSMn', name: 'get_weather', input: { location: 'Paris' } });
    expect(stoppedIndices(events)).toEqual([0, 1]);
  });

  it('incomplete_partial_json_response: finalMessage repairs the cut-off input, but that block never got content_block_stop', async () => {
    const { client } = await serve(always({ kind: 'raw', body: fixture('incomplete_partial_json_response.txt') }));
    const { stream, events } = streamAndCollect(client);
    const message = await stream.finalMessage();
    expect(message.stop_reason).toBe('max_tokens');
    const toolUse = message.content[1];
    expect(toolUse).toMatchObject({ type: 'tool_use', id: 'toolu_01EKqbqmZrGRXy18eN7m9kvY', name: 'make_file' });
    // The SDK's partial-JSON parser hands back a plausible-looking but truncated input.
    expect(toolUse?.type === 'tool_use' ? toolUse.input : undefined).toMatchObject({ filename: 'taxes.txt' });
    const started = events.flatMap((e) => (e.type === 'content_block_start' ? [e.index] : []));
    expect(started).toEqual([0, 1]);
    expect(stoppedIndices(events)).toEqual([0]);
  });

  it.each(['stream-a-refusal.sse', 'stream-a-toolrefusal.sse'])('%s ends with stop_reason refusal', async (name) => {
    const { client } = await serve(always({ kind: 'raw', body: fixture(name) }));
    const message = await client.messages.stream(params()).finalMessage();
    expect(message.stop_reason).toBe('refusal');
    expect(message.content.length).toBeGreaterThan(0);
  });
});

describe('responseEvents', () => {
  it('round-trips text, tool calls and usage through the SDK', async () => {
    const events = responseEvents({
      text: 'Let me look that up for you, twice.',
      toolCalls: [
        { id: 'toolu_a', name: 'read', input: { path: 'src/a.ts', lines: [1, 2, 3] } },
        { name: 'agent', input: { name: 'helper', task: 'summarise "b.ts"\nwith care' } },
      ],
      usage: { input_tokens: 120, output_tokens: 42, cache_creation_input_tokens: 7, cache_read_input_tokens: 99 },
      chunkSize: 5,
      model: 'claude-x',
    });
    const { client } = await serve(always({ kind: 'stream', events }));
    const { stream, events: seen } = streamAndCollect(client);
    const message = await stream.finalMessage();
    expect(message.model).toBe('claude-x');
    expect(message.stop_reason).toBe('tool_use');
    expect(message.content[0]).toEqual({ type: 'text', text: 'Let me look that up for you, twice.' });
    expect(message.content[1]).toMatchObject({ type: 'tool_use', id: 'toolu_a', name: 'read', input: { path: 'src/a.ts', lines: [1, 2, 3] } });
    const second = message.content[2];
    expect(second).toMatchObject({ type: 'tool_use', name: 'agent', input: { name: 'helper', task: 'summarise "b.ts"\nwith care' } });
    expect(second?.type === 'tool_use' ? second.id : '').toMatch(/^toolu_test_\d+$/);
    expect(message.usage).toMatchObject({ input_tokens: 120, output_tokens: 42, cache_creation_input_tokens: 7, cache_read_input_tokens: 99 });
    const textDeltas = seen.filter((e) => e.type === 'content_block_delta' && e.delta.type === 'text_delta');
    expect(textDeltas.length).toBe(Math.ceil('Let me look that up for you, twice.'.length / 5));
    expect(stoppedIndices(seen)).toEqual([0, 1, 2]);
  });

  it('cutOffLastCall leaves the last tool_use without content_block_stop and stops at max_tokens', async () => {
    const events = responseEvents({
      toolCalls: [
        { id: 'toolu_done', name: 'read', input: { path: 'a' } },
        { id: 'toolu_cut', name: 'write', input: { path: 'b', content: 'a long body that will not fit' } },
      ],
      cutOffLastCall: true,
    });
    const { client } = await serve(always({ kind: 'stream', events, chunkDelayMs: 1 }));
    const { stream, events: seen } = streamAndCollect(client);
    const message = await stream.finalMessage();
    expect(message.stop_reason).toBe('max_tokens');
    expect(message.content.map((b) => (b.type === 'tool_use' ? b.id : b.type))).toEqual(['toolu_done', 'toolu_cut']);
    expect(stoppedIndices(seen)).toEqual([0]);
  });

  it('a text-only response ends with end_turn', async () => {
    const { client } = await serve(always({ kind: 'stream', events: responseEvents({ text: 'done' }) }));
    const message = await client.messages.stream(params()).finalMessage();
    expect(message.stop_reason).toBe('end_turn');
    expect(message.content).toEqual([{ type: 'text', text: 'done' }]);
  });
});

describe('HTTP faults before the stream', () => {
  it('429 and 529 are retried by the SDK itself, then the stream succeeds', async () => {
    const { client, server } = await serve(
      scriptedHandler({
        root: [
          httpError(429, 'rate_limit_error', 'Rate limited'),
          { kind: 'http_error', status: 529, errorType: 'overloaded_error', message: 'Overloaded', headers: { 'retry-after-ms': '1' } },
          { kind: 'stream', events: responseEvents({ text: 'third time lucky' }) },
        ],
      }),
    );
    const started = Date.now();
    const message = await client.messages.stream(params()).finalMessage();
    expect(message.content).toEqual([{ type: 'text', text: 'third time lucky' }]);
    expect(server.requests.map((r) => r.index)).toEqual([0, 1, 2]);
    expect(server.requests[1]?.headers['x-stainless-retry-count']).toBe('1');
    expect(Date.now() - started).toBeLessThan(1000);
  });

  it('exhausted retries surface the last error with its status and type', async () => {
    const { client, server } = await serve(always(httpError(529, 'overloaded_error', 'Overloaded')));
    const error = await rejection(client.messages.stream(params()).finalMessage());
    expect(error).toBeInstanceOf(InternalServerError);
    expect(error).toMatchObject({ status: 529, type: 'overloaded_error', requestID: 'req_test_0003' });
    expect(server.requests).toHaveLength(3);
  });

  it('401 fails at once, without retries', async () => {
    const { client, server } = await serve(always({ kind: 'http_error', status: 401, errorType: 'authentication_error', message: 'invalid x-api-key' }));
    const error = await rejection(client.messages.stream(params()).finalMessage());
    expect(error).toBeInstanceOf(AuthenticationError);
    expect(error).toMatchObject({ status: 401, type: 'authentication_error' });
    expect((error as Error).message).toContain('invalid x-api-key');
    expect(server.requests).toHaveLength(1);
  });

  it('x-should-retry: false stops the SDK from retrying a 500', async () => {
    const { client, server } = await serve(always(httpError(500, 'api_error', 'boom', { 'x-should-retry': 'false' })));
    expect(await rejection(client.messages.stream(params()).finalMessage())).toBeInstanceOf(InternalServerError);
    expect(server.requests).toHaveLength(1);
  });
});

describe('faults mid-stream', () => {
  it('an SSE error event surfaces as an APIError without status, carrying the error type, and is not retried', async () => {
    const { client, server } = await serve(
      always({ kind: 'sse_error', after: responseEvents({ text: 'partial answer' }).slice(0, 4), errorType: 'overloaded_error', message: 'Overloaded' }),
    );
    const { stream, events } = streamAndCollect(client);
    const error = await rejection(stream.finalMessage());
    expect(error).toBeInstanceOf(APIError);
    expect(error).not.toBeInstanceOf(APIConnectionError);
    expect(error).toMatchObject({
      status: undefined,
      type: 'overloaded_error',
      error: { type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } },
    });
    expect(events.some((e) => e.type === 'content_block_delta')).toBe(true);
    expect(server.requests).toHaveLength(1);
  });

  it('a dropped connection surfaces as an error (a plain AnthropicError wrapping the fetch failure) and is not retried', async () => {
    const { client, server } = await serve(always({ kind: 'stream', events: responseEvents({ text: 'this will be cut short' }), dropAfter: 3 }));
    const { stream, events } = streamAndCollect(client);
    const error = await rejection(stream.finalMessage());
    expect(error).toBeInstanceOf(AnthropicError);
    expect(error).not.toBeInstanceOf(APIError);
    expect((error as Error).message).toBe('terminated');
    expect((error as Error).cause).toBeInstanceOf(TypeError);
    expect(events.length).toBeGreaterThan(0);
    expect(events.some((e) => e.type === 'message_stop')).toBe(false);
    expect(server.requests).toHaveLength(1);
  });

  it('a stalled stream keeps the client waiting until it aborts', async () => {
    const { client } = await serve(always({ kind: 'stream', events: responseEvents({ text: 'never finished' }), stallAfter: 2 }));
    const controller = new AbortController();
    const { stream, events } = streamAndCollect(client, hello, { signal: controller.signal });
    let settled = false;
    const outcome = rejection(stream.finalMessage()).finally(() => {
      settled = true;
    });
    await stream.emitted('connect');
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(settled).toBe(false);
    expect(events.map((e) => e.type)).toEqual(['message_start', 'content_block_start']);
    controller.abort();
    expect(await outcome).toBeInstanceOf(APIUserAbortError);
  });

  it('close() ends stalled connections, and the waiting client sees the drop', async () => {
    const { client, server } = await serve(always({ kind: 'stream', events: responseEvents({ text: 'stuck' }), stallAfter: 1 }));
    const stream = client.messages.stream(params());
    const outcome = rejection(stream.finalMessage());
    await stream.emitted('connect');
    const started = Date.now();
    await server.close();
    expect(Date.now() - started).toBeLessThan(500);
    const error = await outcome;
    expect(error).toBeInstanceOf(AnthropicError);
    expect(error).not.toBeInstanceOf(APIUserAbortError);
  });

  it('chunkDelayMs paces the events', async () => {
    const { client } = await serve(always({ kind: 'stream', events: responseEvents({ text: 'abc', chunkSize: 1 }), chunkDelayMs: 20 }));
    const started = Date.now();
    await client.messages.stream(params()).finalMessage();
    // 9 events → 8 gaps
    expect(Date.now() - started).toBeGreaterThanOrEqual(8 * 20 - 10);
  });
});

describe('the pairing rule', () => {
  const toolUse: MessageParam = { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_x', name: 'read', input: {} }] };

  it('a tool_use without its tool_result gets 400 invalid_request_error and is recorded', async () => {
    let handlerCalls = 0;
    const { client, server } = await serve(() => {
      handlerCalls += 1;
      return { kind: 'stream', events: responseEvents({ text: 'unreachable' }) };
    });
    const messages: MessageParam[] = [...hello, toolUse, { role: 'user', content: 'what did it say?' }];
    const error = await rejection(client.messages.stream(params(messages)).finalMessage());
    expect(error).toBeInstanceOf(BadRequestError);
    expect(error).toMatchObject({ status: 400, type: 'invalid_request_error' });
    expect((error as Error).message).toContain('toolu_x');
    expect(server.pairingViolations).toEqual([{ index: 0, agent: 'root', problems: ['message 1: tool_use toolu_x has no tool_result in message 2'] }]);
    expect(server.requests).toHaveLength(1);
    expect(handlerCalls).toBe(0);
  });

  it('a history ending in an assistant tool_use is a violation too', async () => {
    const { client, server } = await serve(always({ kind: 'stream', events: responseEvents({ text: 'x' }) }));
    const error = await rejection(client.messages.stream(params([...hello, toolUse])).finalMessage());
    expect(error).toBeInstanceOf(BadRequestError);
    expect(server.pairingViolations[0]?.problems).toEqual(['message 1: tool_use toolu_x without tool_result (history ends)']);
  });

  it('string content, cache_control and array tool_result content are accepted when paired correctly', async () => {
    const { client, server } = await serve(always({ kind: 'stream', events: responseEvents({ text: 'ok' }) }));
    const messages: MessageParam[] = [
      { role: 'user', content: 'Hello' },
      {
        role: 'assistant',
        content: [
          { type: 'text', text: 'reading' },
          { type: 'tool_use', id: 'toolu_y', name: 'read', input: { path: 'a' } },
        ],
      },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 'toolu_y', content: [{ type: 'text', text: 'file body' }], cache_control: { type: 'ephemeral' } },
          { type: 'text', text: 'go on' },
        ],
      },
    ];
    const message = await client.messages.stream(params(messages)).finalMessage();
    expect(message.content).toEqual([{ type: 'text', text: 'ok' }]);
    expect(server.pairingViolations).toEqual([]);
  });
});

describe('agents and scripts', () => {
  it('agentOf reads the sub-agent name from a string or block system prompt', () => {
    const body = (system?: MessagesBody['system']): MessagesBody => ({ model: 'm', max_tokens: 1, messages: [], ...(system === undefined ? {} : { system }) });
    expect(agentOf(body())).toBe('root');
    expect(agentOf(body('You are the root agent of an exarch run.'))).toBe('root');
    expect(agentOf(body("You are sub-agent 'reader-2', started by another agent"))).toBe('reader-2');
    expect(agentOf(body([{ type: 'text', text: "You are sub-agent 'scout', started…", cache_control: { type: 'ephemeral' } }]))).toBe('scout');
  });

  it('scriptedHandler consumes steps per agent and answers a missing step with a clear, non-retried 500', async () => {
    const { client, server } = await serve(
      scriptedHandler({
        root: [{ kind: 'stream', events: responseEvents({ text: 'root 1' }) }],
        scout: [(r) => ({ kind: 'stream', events: responseEvents({ text: `scout saw ${r.body.messages.length} message(s)` }) })],
      }),
    );
    const scoutSystem: TextBlockParam[] = [{ type: 'text', text: "You are sub-agent 'scout', started by another agent to do one task." }];
    const scout = await client.messages.stream(params(hello, scoutSystem)).finalMessage();
    expect(scout.content).toEqual([{ type: 'text', text: 'scout saw 1 message(s)' }]);
    expect((await client.messages.stream(params()).finalMessage()).content).toEqual([{ type: 'text', text: 'root 1' }]);
    const error = await rejection(client.messages.stream(params()).finalMessage());
    expect(error).toBeInstanceOf(InternalServerError);
    expect((error as Error).message).toContain("agent 'root' has only 1 scripted step(s)");
    expect(server.requests.map((r) => r.agent)).toEqual(['scout', 'root', 'root']);
  });
});

describe('request validation', () => {
  const post = (server: AnthropicTestServer, init: { path?: string; method?: string; headers?: Record<string, string>; body?: string }) =>
    fetch(`${server.url}${init.path ?? '/v1/messages'}`, {
      method: init.method ?? 'POST',
      headers: { 'content-type': 'application/json', ...init.headers },
      ...(init.body === undefined ? {} : { body: init.body }),
    });
  const validBody = JSON.stringify({ ...params(), stream: true });

  it('answers 404 for anything but POST /v1/messages', async () => {
    const { server } = await serve(always({ kind: 'raw', body: '' }));
    const response = await post(server, { path: '/v1/models', method: 'GET', headers: { 'x-api-key': 'k' } });
    expect(response.status).toBe(404);
    expect(await response.json()).toMatchObject({ type: 'error', error: { type: 'not_found_error' } });
  });

  it('answers 401 authentication_error without an x-api-key or bearer authorization', async () => {
    const { server } = await serve(always({ kind: 'raw', body: '' }));
    const response = await post(server, { body: validBody });
    expect(response.status).toBe(401);
    expect(response.headers.get('request-id')).toMatch(/^req_test_/);
    expect(await response.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
    expect(server.requests).toHaveLength(0);
  });

  it('answers 400 invalid_request_error for a body that is not JSON or lacks required fields', async () => {
    const { server } = await serve(always({ kind: 'raw', body: '' }));
    const notJson = await post(server, { headers: { 'x-api-key': 'k' }, body: '{oops' });
    expect(notJson.status).toBe(400);
    const noMessages = await post(server, { headers: { 'x-api-key': 'k' }, body: JSON.stringify({ model: 'm', max_tokens: 5, stream: true }) });
    expect(noMessages.status).toBe(400);
    expect(await noMessages.json()).toMatchObject({ error: { type: 'invalid_request_error', message: expect.stringContaining('messages') } });
    const ok = await post(server, { headers: { 'x-api-key': 'k' }, body: validBody });
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toContain('text/event-stream');
    await ok.text();
  });
});
