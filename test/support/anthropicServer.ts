/**
 * A local Anthropic Messages API for tests: `POST /v1/messages` on 127.0.0.1 (a free port), answered
 * the way the real API answers and the way `@anthropic-ai/sdk` expects (SSE with
 * `content-type: text/event-stream`, a `request-id` header, JSON error bodies
 * `{"type":"error","error":{"type","message"}}`, `retry-after-ms` / `x-should-retry` honoured by the
 * SDK's retries).
 *
 * Every request is checked with the project's one pairing rule (`findPairingProblems`): a history the
 * real API would refuse is recorded in `pairingViolations` and refused with HTTP 400
 * `invalid_request_error`, without consulting the handler.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { findPairingProblems } from '../../src/engine/pairing.js';
import type { AssistantBlock, Message, UserBlock } from '../../src/engine/types.js';

export type SseEvent = { readonly event: string; readonly data: unknown };

export type ServerPlan =
  /**
   * An SSE stream of `events`. `latencyMs` waits before the first (a model's time to first
   * token); `chunkDelayMs` waits between events. `stallAfter`: send that many
   * events, then keep the connection open silently until the client aborts (or `close()`).
   * `dropAfter`: send that many events, then destroy the socket (a dropped connection mid-stream).
   */
  | { kind: 'stream'; events: readonly SseEvent[]; latencyMs?: number; chunkDelayMs?: number; stallAfter?: number; dropAfter?: number }
  /** An HTTP error before any stream: JSON error body, plus `headers` (e.g. `retry-after-ms`, `x-should-retry`). */
  | { kind: 'http_error'; status: number; errorType: string; message: string; headers?: Record<string, string> }
  /** `body` sent verbatim as the SSE body (e.g. a recorded fixture file). */
  | { kind: 'raw'; body: string }
  /** `after` events, then a mid-stream `event: error`, then the stream ends. */
  | { kind: 'sse_error'; after: readonly SseEvent[]; errorType: string; message: string };

/** A content block as the API accepts it: any `type`, with whatever fields that type has. */
export interface MessagesContentBlock {
  readonly type: string;
  readonly [field: string]: unknown;
}

export interface MessagesMessage {
  readonly role: 'user' | 'assistant';
  readonly content: string | readonly MessagesContentBlock[];
}

interface MessagesSystemBlock {
  readonly type: 'text';
  readonly text: string;
  readonly [field: string]: unknown;
}

export interface MessagesTool {
  readonly name: string;
  readonly description?: string;
  readonly input_schema?: unknown;
  readonly [field: string]: unknown;
}

/** The request body of `POST /v1/messages`, as far as tests look at it (other fields pass through). */
export interface MessagesBody {
  readonly model: string;
  readonly max_tokens: number;
  readonly system?: string | readonly MessagesSystemBlock[];
  readonly messages: readonly MessagesMessage[];
  readonly tools?: readonly MessagesTool[];
  readonly stream?: boolean;
  readonly [field: string]: unknown;
}

export interface ReceivedRequest {
  /** 0-based, in arrival order, over the requests whose body was well-formed (pairing violations included). */
  index: number;
  agent: string;
  body: MessagesBody;
  headers: Record<string, string | string[] | undefined>;
}

export type Handler = (request: ReceivedRequest) => ServerPlan | Promise<ServerPlan>;

export interface AnthropicTestServer {
  /** Base URL for the SDK's `baseURL`, e.g. `http://127.0.0.1:41234`. */
  url: string;
  requests: ReceivedRequest[];
  pairingViolations: { index: number; agent: string; problems: string[] }[];
  /**
   * What the server billed, as a provider counts it: the tokens its streams reported in the events
   * it wrote (`message_start`'s usage, then what each `message_delta` adds), the streams it began,
   * and the most that were open at once.
   */
  billed: { tokens: number; streams: number; open: number; mostOpen: number };
  /** Destroys every open connection (stalled streams included) and stops listening. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Event builders

let idSequence = 0;
function nextId(prefix: string): string {
  idSequence += 1;
  return `${prefix}_test_${String(idSequence).padStart(4, '0')}`;
}

type UsageSpec = Partial<{
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
}>;

export interface ResponseSpec {
  text?: string;
  toolCalls?: readonly { id?: string; name: string; input: unknown }[];
  stopReason?: string;
  usage?: UsageSpec;
  /** The last tool_use block streams only part of its input JSON and gets no `content_block_stop`; stop_reason `max_tokens`. */
  cutOffLastCall?: boolean;
  /** Characters per text_delta / input_json_delta (default 8). */
  chunkSize?: number;
  model?: string;
}

function chunks(text: string, size: number): string[] {
  const out: string[] = [];
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size));
  return out;
}

/**
 * Builds a realistic event sequence: `message_start` (with usage), per block `content_block_start` /
 * deltas (text_delta chunked; input_json_delta chunked, after an empty first one as the API sends) /
 * `content_block_stop`, a `ping` after the first block starts, `message_delta` (stop_reason, cumulative
 * usage), `message_stop`. Tool ids default to process-unique `toolu_test_NNNN`.
 */
export function responseEvents(spec: ResponseSpec): SseEvent[] {
  const size = Math.max(1, spec.chunkSize ?? 8);
  const toolCalls = spec.toolCalls ?? [];
  const cutOff = spec.cutOffLastCall === true && toolCalls.length > 0;
  const stopReason = spec.stopReason ?? (cutOff ? 'max_tokens' : toolCalls.length > 0 ? 'tool_use' : 'end_turn');
  let streamedChars = 0;

  const blocks: SseEvent[] = [];
  let index = 0;
  const ping: SseEvent = { event: 'ping', data: { type: 'ping' } };
  const start = (contentBlock: unknown): void => {
    blocks.push({ event: 'content_block_start', data: { type: 'content_block_start', index, content_block: contentBlock } });
    if (index === 0) blocks.push(ping);
  };
  const delta = (d: unknown): void => {
    blocks.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index, delta: d } });
  };
  const stop = (): void => {
    blocks.push({ event: 'content_block_stop', data: { type: 'content_block_stop', index } });
    index += 1;
  };

  if (spec.text !== undefined && spec.text !== '') {
    start({ type: 'text', text: '' });
    for (const piece of chunks(spec.text, size)) delta({ type: 'text_delta', text: piece });
    streamedChars += spec.text.length;
    stop();
  }
  toolCalls.forEach((call, i) => {
    const last = i === toolCalls.length - 1;
    start({ type: 'tool_use', id: call.id ?? nextId('toolu'), name: call.name, input: {} });
    const json = JSON.stringify(call.input ?? {});
    // A cut-off call streams at most half of its JSON (and at least one character when there is any).
    const sent = cutOff && last ? json.slice(0, Math.max(1, Math.floor(json.length / 2))) : json;
    delta({ type: 'input_json_delta', partial_json: '' });
    for (const piece of chunks(sent, size)) delta({ type: 'input_json_delta', partial_json: piece });
    streamedChars += sent.length;
    if (!(cutOff && last)) stop();
  });
  if (index === 0 && blocks.length === 0) blocks.push(ping);

  const inputTokens = spec.usage?.input_tokens ?? 10;
  const cacheCreation = spec.usage?.cache_creation_input_tokens ?? 0;
  const cacheRead = spec.usage?.cache_read_input_tokens ?? 0;
  const outputTokens = spec.usage?.output_tokens ?? Math.max(1, Math.ceil(streamedChars / 4));
  return [
    {
      event: 'message_start',
      data: {
        type: 'message_start',
        message: {
          id: nextId('msg'),
          type: 'message',
          role: 'assistant',
          model: spec.model ?? 'claude-test',
          content: [],
          stop_reason: null,
          stop_sequence: null,
          usage: {
            input_tokens: inputTokens,
            cache_creation_input_tokens: cacheCreation,
            cache_read_input_tokens: cacheRead,
            output_tokens: 1,
          },
        },
      },
    },
    ...blocks,
    {
      event: 'message_delta',
      data: {
        type: 'message_delta',
        delta: { stop_reason: stopReason, stop_sequence: null },
        usage: {
          input_tokens: inputTokens,
          cache_creation_input_tokens: cacheCreation,
          cache_read_input_tokens: cacheRead,
          output_tokens: outputTokens,
        },
      },
    },
    { event: 'message_stop', data: { type: 'message_stop' } },
  ];
}

const DEFAULT_ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  408: 'timeout_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

/**
 * An `http_error` plan. For statuses the SDK retries (408, 409, 429, 5xx) it adds `retry-after-ms: 1`
 * so the SDK's own retries take a millisecond instead of its default backoff; `headers` override.
 */
export function httpError(status: number, errorType?: string, message?: string, headers: Record<string, string> = {}): ServerPlan {
  const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
  const type = errorType ?? DEFAULT_ERROR_TYPES[status] ?? (status >= 500 ? 'api_error' : 'invalid_request_error');
  return {
    kind: 'http_error',
    status,
    errorType: type,
    message: message ?? type,
    headers: { ...(retryable ? { 'retry-after-ms': '1' } : {}), ...headers },
  };
}

// ---------------------------------------------------------------------------------------------
// Agents and scripts

const SUB_AGENT = /You are sub-agent '([^']+)'/;

/** `'root'` unless the system prompt (a string or text blocks) contains "You are sub-agent 'NAME'" → NAME. */
export function agentOf(body: MessagesBody): string {
  const system = body.system;
  const text = typeof system === 'string' ? system : (system ?? []).map((block) => block.text).join('\n');
  return SUB_AGENT.exec(text)?.[1] ?? 'root';
}

/**
 * A handler from one script per agent: each request of an agent consumes that agent's next step (a
 * plan, or a function of the request giving one). A request with no step left is answered with HTTP
 * 500 naming the agent and step, and `x-should-retry: false` so the SDK fails at once.
 */
export function scriptedHandler(scripts: Record<string, readonly (ServerPlan | ((r: ReceivedRequest) => ServerPlan))[]>): Handler {
  const consumed = new Map<string, number>();
  return (request) => {
    const step = consumed.get(request.agent) ?? 0;
    consumed.set(request.agent, step + 1);
    const script = scripts[request.agent];
    const entry = script?.[step];
    if (entry === undefined) {
      const why = script === undefined ? `no script for agent '${request.agent}'` : `agent '${request.agent}' has only ${script.length} scripted step(s)`;
      return {
        kind: 'http_error',
        status: 500,
        errorType: 'api_error',
        message: `test server: ${why}, request ${request.index} asked for step ${step + 1}`,
        headers: { 'x-should-retry': 'false' },
      };
    }
    return typeof entry === 'function' ? entry(request) : entry;
  };
}

/**
 * Like `scriptedHandler`, but each agent's step is chosen by its history, not by a count of the
 * requests this server saw: step n answers a request whose messages hold n assistant messages.
 * A resumed run (a new process, perhaps a new server) that asks again from the same history gets
 * the same answer, which is what a crash test needs.
 */
export function historyHandler(scripts: Record<string, readonly (ServerPlan | ((r: ReceivedRequest) => ServerPlan))[]>): Handler {
  return (request) => {
    const step = request.body.messages.filter((m) => m.role === 'assistant').length;
    const entry = scripts[request.agent]?.[step];
    if (entry === undefined) {
      return {
        kind: 'http_error',
        status: 500,
        errorType: 'api_error',
        message: `test server: no step ${step + 1} for agent '${request.agent}' (request ${request.index})`,
        headers: { 'x-should-retry': 'false' },
      };
    }
    return typeof entry === 'function' ? entry(request) : entry;
  };
}

// ---------------------------------------------------------------------------------------------
// Request validation

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Returns the problem with the body's shape (as the API would name it), or undefined if it is usable. */
function shapeProblem(body: unknown): string | undefined {
  if (!isRecord(body)) return 'body: must be a JSON object';
  if (typeof body['model'] !== 'string' || body['model'] === '') return 'model: Field required';
  const maxTokens = body['max_tokens'];
  if (typeof maxTokens !== 'number' || !Number.isInteger(maxTokens) || maxTokens < 1) return 'max_tokens: Field required (a positive integer)';
  const system = body['system'];
  if (system !== undefined && typeof system !== 'string') {
    if (!Array.isArray(system)) return 'system: must be a string or a list of text blocks';
    for (const [i, block] of system.entries()) {
      if (!isRecord(block) || block['type'] !== 'text' || typeof block['text'] !== 'string') return `system.${i}: must be a text block`;
    }
  }
  const messages = body['messages'];
  if (!Array.isArray(messages)) return 'messages: Field required (a list)';
  for (const [i, message] of messages.entries()) {
    if (!isRecord(message)) return `messages.${i}: must be an object`;
    if (message['role'] !== 'user' && message['role'] !== 'assistant') return `messages.${i}.role: Input should be 'user' or 'assistant'`;
    const content = message['content'];
    if (typeof content === 'string') continue;
    if (!Array.isArray(content)) return `messages.${i}.content: must be a string or a list of content blocks`;
    for (const [j, block] of content.entries()) {
      if (!isRecord(block) || typeof block['type'] !== 'string') return `messages.${i}.content.${j}: must be a content block with a type`;
      if (block['type'] === 'text' && typeof block['text'] !== 'string') return `messages.${i}.content.${j}.text: Field required`;
      if (block['type'] === 'tool_use' && (typeof block['id'] !== 'string' || typeof block['name'] !== 'string' || !isRecord(block['input']))) {
        return `messages.${i}.content.${j}: tool_use needs id, name and an input object`;
      }
      if (block['type'] === 'tool_result' && typeof block['tool_use_id'] !== 'string') return `messages.${i}.content.${j}.tool_use_id: Field required`;
    }
  }
  const tools = body['tools'];
  if (tools !== undefined) {
    if (!Array.isArray(tools)) return 'tools: must be a list';
    for (const [i, tool] of tools.entries()) {
      if (!isRecord(tool) || typeof tool['name'] !== 'string') return `tools.${i}.name: Field required`;
    }
  }
  if (body['stream'] !== true) return 'stream: this test server answers streaming requests only (stream: true)';
  return undefined;
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((b) => (isRecord(b) && typeof b['text'] === 'string' ? b['text'] : '')).join('');
  return '';
}

/**
 * The request history in the project's `Message` shape, for `findPairingProblems`: string content
 * becomes one text block, extra fields (`cache_control`, …) are dropped, and blocks the pairing rule
 * does not know (images, thinking, server tools) become a non-empty placeholder text. A `tool_use` in a
 * user message or a `tool_result` in an assistant message is reported as a problem of its own.
 */
function normaliseForPairing(messages: readonly MessagesMessage[]): { messages: Message[]; problems: string[] } {
  const problems: string[] = [];
  const normalised = messages.map((message, index): Message => {
    const blocks: readonly MessagesContentBlock[] = typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content;
    if (message.role === 'assistant') {
      const content = blocks.map((block): AssistantBlock => {
        if (block.type === 'text') return { type: 'text', text: String(block['text']) };
        if (block.type === 'tool_use') {
          const input = isRecord(block['input']) ? block['input'] : {};
          return { type: 'tool_use', id: String(block['id']), name: String(block['name']), input };
        }
        if (block.type === 'tool_result') problems.push(`message ${index}: tool_result in an assistant message`);
        return { type: 'text', text: `[${block.type}]` };
      });
      return { role: 'assistant', content };
    }
    const content = blocks.map((block): UserBlock => {
      if (block.type === 'text') return { type: 'text', text: String(block['text']) };
      if (block.type === 'tool_result') {
        return {
          type: 'tool_result',
          tool_use_id: String(block['tool_use_id']),
          content: toolResultText(block['content']),
          ...(block['is_error'] === true ? { is_error: true } : {}),
        };
      }
      if (block.type === 'tool_use') problems.push(`message ${index}: tool_use in a user message`);
      return { type: 'text', text: `[${block.type}]` };
    });
    return { role: 'user', content };
  });
  return { messages: normalised, problems };
}

// ---------------------------------------------------------------------------------------------
// The server

function sseFrame(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

function errorBody(errorType: string, message: string, requestId: string): string {
  return JSON.stringify({ type: 'error', error: { type: errorType, message }, request_id: requestId });
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    req.on('data', (chunk: Buffer) => parts.push(chunk));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
    req.on('error', reject);
  });
}

/** Starts the server on 127.0.0.1 at a free port. */
export async function startAnthropicServer(handler: Handler): Promise<AnthropicTestServer> {
  const sockets = new Set<Socket>();
  const waits = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  const requests: ReceivedRequest[] = [];
  const pairingViolations: AnthropicTestServer['pairingViolations'] = [];
  let requestSequence = 0;
  let closing = false;
  const billed = { tokens: 0, streams: 0, open: 0, mostOpen: 0 };
  /** What one written event adds to the bill (`seen`: the stream's usage so far, cumulative as the API reports it). */
  const bill = (event: SseEvent, seen: { input: number; output: number }): void => {
    const data = event.data as { message?: { usage?: UsageSpec }; usage?: UsageSpec };
    const usage = event.event === 'message_start' ? data.message?.usage : event.event === 'message_delta' ? data.usage : undefined;
    if (!usage) return;
    const input = (usage.input_tokens ?? 0) + (usage.cache_creation_input_tokens ?? 0) + (usage.cache_read_input_tokens ?? 0);
    const output = usage.output_tokens ?? 0;
    billed.tokens += Math.max(0, input - seen.input) + Math.max(0, output - seen.output);
    seen.input = Math.max(seen.input, input);
    seen.output = Math.max(seen.output, output);
  };

  /** A delay that `close()` cuts short. */
  const wait = (ms: number): Promise<void> =>
    new Promise((resolve) => {
      const entry = {
        timer: setTimeout(() => {
          waits.delete(entry);
          resolve();
        }, ms),
        resolve,
      };
      waits.add(entry);
    });

  const sendError = (
    res: ServerResponse,
    requestId: string,
    status: number,
    errorType: string,
    message: string,
    headers: Record<string, string> = {},
  ): void => {
    const body = errorBody(errorType, message, requestId);
    res.writeHead(status, {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(body),
      'request-id': requestId,
      ...headers,
    });
    res.end(body);
  };

  const startSse = (res: ServerResponse, requestId: string): void => {
    res.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      'request-id': requestId,
    });
    res.flushHeaders();
  };

  const gone = (res: ServerResponse): boolean => closing || res.destroyed || res.socket === null || res.socket.destroyed;

  /** Ends the connection abruptly once what was written has gone out: a dropped connection mid-stream. */
  const drop = (res: ServerResponse): void => {
    const socket = res.socket;
    if (socket === null || socket.destroyed) return;
    socket.end(() => socket.destroy());
  };

  const runPlan = async (res: ServerResponse, requestId: string, plan: ServerPlan): Promise<void> => {
    switch (plan.kind) {
      case 'http_error':
        sendError(res, requestId, plan.status, plan.errorType, plan.message, plan.headers);
        return;
      case 'raw':
        startSse(res, requestId);
        res.end(plan.body);
        return;
      case 'sse_error':
        startSse(res, requestId);
        for (const event of plan.after) res.write(sseFrame(event.event, event.data));
        res.end(sseFrame('error', { type: 'error', error: { type: plan.errorType, message: plan.message } }));
        return;
      case 'stream': {
        if (plan.latencyMs !== undefined && plan.latencyMs > 0) await wait(plan.latencyMs);
        if (gone(res)) return;
        startSse(res, requestId);
        billed.streams += 1;
        billed.open += 1;
        billed.mostOpen = Math.max(billed.mostOpen, billed.open);
        res.once('close', () => (billed.open -= 1));
        const seen = { input: 0, output: 0 };
        const limit = Math.min(plan.events.length, plan.stallAfter ?? Infinity, plan.dropAfter ?? Infinity);
        for (let i = 0; i < limit; i += 1) {
          if (i > 0 && plan.chunkDelayMs !== undefined && plan.chunkDelayMs > 0) await wait(plan.chunkDelayMs);
          if (gone(res)) return;
          const event = plan.events[i];
          if (event !== undefined) {
            res.write(sseFrame(event.event, event.data));
            bill(event, seen);
          }
        }
        if (gone(res)) return;
        if (plan.dropAfter !== undefined && plan.dropAfter <= (plan.stallAfter ?? Infinity)) {
          drop(res);
          return;
        }
        if (plan.stallAfter !== undefined) return; // silent until the client aborts or close()
        res.end();
        return;
      }
    }
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    requestSequence += 1;
    const requestId = `req_test_${String(requestSequence).padStart(4, '0')}`;
    const path = (req.url ?? '').split('?')[0];
    const text = await readBody(req);
    if (req.method !== 'POST' || path !== '/v1/messages') {
      sendError(res, requestId, 404, 'not_found_error', `test server: no route ${req.method ?? '?'} ${path ?? ''} (only POST /v1/messages)`);
      return;
    }
    // The real API takes `x-api-key`; SDK 1.10.0 sends the key as `Authorization: Bearer <key>` instead.
    const apiKey = req.headers['x-api-key'];
    const bearer = /^Bearer\s+\S/i.test(req.headers.authorization ?? '');
    if (!bearer && (typeof apiKey !== 'string' || apiKey === '')) {
      sendError(res, requestId, 401, 'authentication_error', 'x-api-key header is required');
      return;
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      sendError(res, requestId, 400, 'invalid_request_error', 'request body is not valid JSON');
      return;
    }
    const problem = shapeProblem(parsed);
    if (problem !== undefined) {
      sendError(res, requestId, 400, 'invalid_request_error', problem);
      return;
    }
    const body = parsed as MessagesBody;
    const received: ReceivedRequest = { index: requests.length, agent: agentOf(body), body, headers: { ...req.headers } };
    requests.push(received);

    const normalised = normaliseForPairing(body.messages);
    const problems = [...normalised.problems, ...findPairingProblems(normalised.messages)];
    if (problems.length > 0) {
      pairingViolations.push({ index: received.index, agent: received.agent, problems });
      sendError(res, requestId, 400, 'invalid_request_error', `messages: tool_use/tool_result pairing rule broken: ${problems.join('; ')}`);
      return;
    }

    let plan: ServerPlan;
    try {
      plan = await handler(received);
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error);
      sendError(res, requestId, 500, 'api_error', `test server: handler threw: ${message}`, { 'x-should-retry': 'false' });
      return;
    }
    if (gone(res)) return;
    await runPlan(res, requestId, plan);
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const message = error instanceof Error ? error.message : String(error);
      sendError(res, 'req_test_error', 500, 'api_error', `test server: ${message}`, { 'x-should-retry': 'false' });
    });
  });
  server.on('connection', (socket: Socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address() as AddressInfo;

  let closed: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    pairingViolations,
    billed,
    close(): Promise<void> {
      closed ??= new Promise<void>((resolve, reject) => {
        closing = true;
        for (const entry of waits) {
          clearTimeout(entry.timer);
          entry.resolve();
        }
        waits.clear();
        server.close((error) => (error ? reject(error) : resolve()));
        for (const socket of sockets) socket.destroy();
        sockets.clear();
      });
      return closed;
    },
  };
}
