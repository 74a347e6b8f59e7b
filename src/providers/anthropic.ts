import type Anthropic from '@anthropic-ai/sdk';
import type {
  MessageParam,
  MessageCreateParamsStreaming,
  RawMessageStreamEvent,
  TextBlockParam,
  Tool as SdkTool,
} from '@anthropic-ai/sdk/resources/messages/messages';
import { ProviderError, describeError } from '../engine/model/errors.js';
import { type AnthropicSdk, cappedRetryFetch, DEFAULT_MAX_RETRY_WAIT_MS, translateError } from './anthropicFaults.js';
import { MAX_TOOL_INPUT_DEPTH, depthExceeds } from '../engine/nesting.js';
import { ZERO_USAGE } from '../engine/usage.js';
import type { AssistantBlock, Message, ModelRequest, ModelResponse, Provider, StopReason, StreamSink, Usage } from '../engine/types.js';
import { STOP_REASONS } from '../engine/types.js';
import { Redactor } from '../engine/redact.js';
import type { FileError } from '../engine/fs/fileError.js';
import { ExchangeRecorder } from '../replay/recorder.js';
import { DEFAULT_MODEL } from './defaultModel.js';

export { DEFAULT_MODEL };

export interface AnthropicProviderOptions {
  /** Defaults to `ANTHROPIC_API_KEY`, as in the SDK. */
  readonly apiKey?: string;
  /** Defaults to `ANTHROPIC_BASE_URL`, as in the SDK. */
  readonly baseURL?: string;
  readonly model?: string;
  /** Output tokens per request (default 8,192). */
  readonly maxTokens?: number;
  /** The SDK's own retries of HTTP 408/409/429/5xx before a stream starts (default 4). */
  readonly sdkMaxRetries?: number;
  /** Time to response headers, per attempt (the SDK's timeout; default 10 minutes). */
  readonly timeoutMs?: number;
  /**
   * Longest wait a `retry-after` (or `retry-after-ms`) of a 429/5xx may ask for (default 60,000 ms).
   * The SDK honours any delay a server asks for, an hour or a day; past this the request ends at
   * once with "rate limited: the server asked to wait N s" instead.
   */
  readonly maxRetryWaitMs?: number;
  /** `cache_control` breakpoints on the tools, the system prompt and the end of the conversation (default on). */
  readonly promptCaching?: boolean;
  /** A client of your own (tests, proxies); the options above that configure a client are then ignored. */
  readonly client?: Anthropic;
  /**
   * Record every exchange (request body and response stream) into this file, for `replayProvider`
   * (`exarch/testing`) to replay offline. Secrets of the environment and the key are never written;
   * give a `redactor` to name the secrets yourself. A file that cannot be made throws `RecordingError`;
   * one that cannot be appended to later (a full disk) is said to `onFault` (see `ExchangeRecorderOptions`).
   */
  readonly record?: string | { readonly file: string; readonly redactor?: Redactor; readonly onFault?: (fault: FileError) => void };
}

/** What shapes a request body besides the request itself. */
export interface MessagesBodySettings {
  readonly model: string;
  readonly maxTokens: number;
  readonly promptCaching: boolean;
}

/**
 * Claude through `client.messages.stream()`. Deltas go to the sink as they arrive. The message is
 * assembled from the raw events rather than taken from `finalMessage()`, which silently repairs the
 * input of a `tool_use` block cut off at `max_tokens`: a block without `content_block_stop` is
 * reported in `incompleteToolUseIds` and never executed.
 *
 * Faults (CONTRACT §5): the SDK retries HTTP 429/5xx/529 before the stream; whatever still fails
 * then, and 400/401/403/404, is fatal. An SSE `error` event or a dropped connection after the
 * stream began is retryable: the session discards the partial message and retries the step.
 */
export class AnthropicProvider implements Provider {
  readonly name = 'anthropic';
  readonly model: string;
  /** Output tokens per request. */
  readonly maxTokens: number;
  /** Made at the first request, when the SDK is loaded (see `loadSdk`), unless the host gave one. */
  private client: Anthropic | undefined;
  private readonly clientOptions: ClientOptions;
  private readonly promptCaching: boolean;
  private readonly recorder: ExchangeRecorder | undefined;

  constructor(options: AnthropicProviderOptions = {}) {
    this.model = options.model ?? DEFAULT_MODEL;
    this.maxTokens = options.maxTokens ?? 8192;
    this.promptCaching = options.promptCaching ?? true;
    const record = typeof options.record === 'string' ? { file: options.record } : options.record;
    this.recorder =
      record &&
      new ExchangeRecorder({
        file: record.file,
        model: this.model,
        maxTokens: this.maxTokens,
        redactor: record.redactor ?? Redactor.fromEnv(process.env, options.apiKey === undefined ? [] : [options.apiKey]),
        ...('onFault' in record && record.onFault ? { onFault: record.onFault } : {}),
      });
    this.client = options.client;
    this.clientOptions = {
      ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
      ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
      maxRetries: options.sdkMaxRetries ?? 4,
      ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      fetch: cappedRetryFetch(options.maxRetryWaitMs ?? DEFAULT_MAX_RETRY_WAIT_MS),
    };
  }

  async stream(request: ModelRequest, sink: StreamSink): Promise<ModelResponse> {
    const assembler = new MessageAssembler(sink);
    const body = this.params(request);
    const log = this.recorder?.begin(request, body);
    let sdk: AnthropicSdk | undefined;
    try {
      sdk = await loadSdk();
      const client = (this.client ??= new sdk.default(this.clientOptions));
      // The raw event stream, not `messages.stream()`: that helper also accumulates its own
      // snapshot and partial-parses every input delta, and its errors on events out of protocol
      // (a delta for a block that never started) came out as a lost connection. The assembler
      // sees every event first and says what is wrong with it.
      const stream = await client.messages.create(body, { signal: request.signal });
      for await (const event of stream) {
        log?.event(event);
        assembler.apply(event);
      }
      const response = assembler.finish();
      log?.end();
      return response;
    } catch (error) {
      const translated = sdk === undefined ? sdkUnavailable(error) : translateError(sdk, error, assembler.started, request.signal);
      log?.end(translated);
      throw translated;
    }
  }

  /** The request body: our history is already in the API's shape; caching adds breakpoints to copies. */
  params(request: ModelRequest): MessageCreateParamsStreaming {
    return messagesBody(request, { model: this.model, maxTokens: this.maxTokens, promptCaching: this.promptCaching });
  }
}

type ClientOptions = NonNullable<ConstructorParameters<AnthropicSdk['default']>[0]>;

let sdkLoading: Promise<AnthropicSdk> | undefined;

/**
 * The SDK is some 1,000 modules and most of a cold `import('exarch')` when loaded statically:
 * it is loaded by the first request of the first provider, once per process, so a host that
 * passes another provider (scripted, replay) never pays for it.
 */
function loadSdk(): Promise<AnthropicSdk> {
  sdkLoading ??= import('@anthropic-ai/sdk');
  return sdkLoading;
}

/** The SDK could not be loaded (not installed, broken): no request can be made, so not retryable. */
function sdkUnavailable(error: unknown): ProviderError {
  return new ProviderError(`cannot load @anthropic-ai/sdk: ${describeError(error)}`, { retryable: false, kind: 'fatal', cause: error });
}

/** The body of a streaming Messages request for `request` (also what a replay compares: see src/replay/). */
export function messagesBody(request: Omit<ModelRequest, 'signal'>, settings: MessagesBodySettings): MessageCreateParamsStreaming {
  const cache = settings.promptCaching ? ({ cache_control: { type: 'ephemeral' } } as const) : {};
  const tools: SdkTool[] = request.tools.map((tool, i) => ({
    name: tool.name,
    description: tool.description,
    input_schema: tool.input_schema as SdkTool['input_schema'],
    ...(i === request.tools.length - 1 ? cache : {}),
  }));
  const system: TextBlockParam[] = request.system ? [{ type: 'text', text: request.system, ...cache }] : [];
  return {
    model: request.model ?? settings.model,
    max_tokens: settings.maxTokens,
    stream: true,
    ...(system.length > 0 ? { system } : {}),
    ...(tools.length > 0 ? { tools } : {}),
    messages: toMessageParams(request.messages, settings.promptCaching),
  };
}

/** Copies the history into request params; the last block of the last message carries the moving cache breakpoint. */
function toMessageParams(messages: readonly Message[], cache: boolean): MessageParam[] {
  const params = messages as unknown as MessageParam[];
  if (!cache || messages.length === 0) return [...params];
  const last = messages[messages.length - 1] as Message;
  const blocks = last.content.map((block, i) => (i === last.content.length - 1 ? { ...block, cache_control: { type: 'ephemeral' as const } } : block));
  return [...params.slice(0, -1), { role: last.role, content: blocks } as MessageParam];
}

interface PendingBlock {
  readonly kind: 'text' | 'tool_use' | 'other';
  text: string;
  readonly id: string;
  readonly name: string;
  json: string;
  complete: boolean;
}

/** Builds the assistant message from raw stream events, tracking which blocks completed. */
export class MessageAssembler {
  started = false;
  private readonly blocks: PendingBlock[] = [];
  private stopReason: string | null = null;
  private stopped = false;
  private usage: Usage = ZERO_USAGE;

  constructor(private readonly sink: StreamSink) {}

  apply(event: RawMessageStreamEvent): void {
    this.started = true;
    // The SDK hands on whatever JSON the server sent as an event, and a recording is a file: each
    // event is checked for what is read of it, so a bad one is a broken stream said in one line.
    const wrong = eventProblem(event as unknown);
    if (wrong !== undefined) throw outOfProtocol(wrong);
    switch (event.type) {
      case 'message_start': {
        const u = event.message.usage;
        this.usage = {
          inputTokens: u.input_tokens ?? 0,
          outputTokens: u.output_tokens ?? 0,
          cacheCreationInputTokens: u.cache_creation_input_tokens ?? 0,
          cacheReadInputTokens: u.cache_read_input_tokens ?? 0,
        };
        // The input is billed from here on, whatever becomes of the stream: budgets count it now.
        this.sink.usage?.(this.usage);
        break;
      }
      case 'content_block_start': {
        const block = event.content_block;
        if (block.type === 'text') {
          this.blocks[event.index] = { kind: 'text', text: block.text, id: '', name: '', json: '', complete: false };
          if (block.text) this.sink.text(block.text);
        } else if (block.type === 'tool_use') {
          this.blocks[event.index] = { kind: 'tool_use', text: '', id: block.id, name: block.name, json: '', complete: false };
          this.sink.toolUseStart(block.id, block.name);
        } else {
          // Thinking and server-tool blocks are not requested by exarch; keep the index, drop the block.
          this.blocks[event.index] = { kind: 'other', text: '', id: '', name: '', json: '', complete: false };
          this.sink.heartbeat();
        }
        break;
      }
      case 'content_block_delta': {
        const block = this.blocks[event.index];
        if (!block) throw outOfProtocol(`a content_block_delta for block ${event.index}, which never started`);
        const delta = event.delta;
        if (block?.kind === 'text' && delta.type === 'text_delta') {
          block.text += delta.text;
          this.sink.text(delta.text);
        } else if (block?.kind === 'tool_use' && delta.type === 'input_json_delta') {
          block.json += delta.partial_json;
          this.sink.toolInputDelta(block.id, delta.partial_json);
        } else this.sink.heartbeat();
        break;
      }
      case 'content_block_stop': {
        const block = this.blocks[event.index];
        if (!block) throw outOfProtocol(`a content_block_stop for block ${event.index}, which never started`);
        block.complete = true;
        this.sink.heartbeat();
        break;
      }
      case 'message_delta': {
        if (event.delta.stop_reason) this.stopReason = event.delta.stop_reason;
        // message_delta usage is cumulative: take each value it carries as the latest total.
        const u = event.usage;
        this.usage = {
          inputTokens: u.input_tokens ?? this.usage.inputTokens,
          outputTokens: u.output_tokens ?? this.usage.outputTokens,
          cacheCreationInputTokens: u.cache_creation_input_tokens ?? this.usage.cacheCreationInputTokens,
          cacheReadInputTokens: u.cache_read_input_tokens ?? this.usage.cacheReadInputTokens,
        };
        this.sink.usage?.(this.usage);
        break;
      }
      case 'message_stop':
        this.stopped = true;
        this.sink.heartbeat();
        break;
    }
  }

  finish(): ModelResponse {
    if (!this.stopped) throw new ProviderError('the stream ended before message_stop', { retryable: true, kind: 'stream' });
    const stopReason = this.stopReason;
    if (!stopReason || !STOP_REASONS.includes(stopReason as StopReason)) {
      throw new ProviderError(`unsupported stop reason: ${String(stopReason)}`, { retryable: false });
    }
    const content: AssistantBlock[] = [];
    const incompleteToolUseIds: string[] = [];
    const invalidToolInputs: Record<string, string> = {};
    for (const block of this.blocks) {
      if (!block) continue;
      if (block.kind === 'text' && block.text.length > 0) content.push({ type: 'text', text: block.text });
      if (block.kind !== 'tool_use') continue;
      if (!block.complete) {
        // Cut off at max_tokens: it stays in history (the API needs the id answered) with an empty input.
        incompleteToolUseIds.push(block.id);
        content.push({ type: 'tool_use', id: block.id, name: block.name, input: {} });
        continue;
      }
      const parsed = parseInput(block.json);
      if (!parsed.ok) invalidToolInputs[block.id] = parsed.reason;
      content.push({ type: 'tool_use', id: block.id, name: block.name, input: parsed.ok ? parsed.input : {} });
    }
    return {
      content,
      stopReason: stopReason as StopReason,
      usage: this.usage,
      incompleteToolUseIds,
      ...(Object.keys(invalidToolInputs).length > 0 ? { invalidToolInputs } : {}),
    };
  }
}

/** Block indices a message may use: far more blocks than a response's output tokens could make. */
const MAX_BLOCKS = 1_000_000;

/**
 * What is wrong with a stream event, for what the assembler reads of it; undefined when nothing
 * is. Event types exarch does not read pass as they are.
 */
function eventProblem(event: unknown): string | undefined {
  if (!isObject(event) || typeof event['type'] !== 'string') return 'an event that is not an object with a type';
  const type = event['type'];
  switch (type) {
    case 'message_start': {
      const message = event['message'];
      return isObject(message) && isUsage(message['usage']) ? undefined : 'a message_start without the usage of a message';
    }
    case 'content_block_start': {
      const index = event['index'];
      const block = event['content_block'];
      // Blocks are numbered from 0 as they start: a later number would leave a gap the size of the number.
      if (typeof index !== 'number' || !Number.isSafeInteger(index) || index < 0) return 'a content_block_start whose index is not a block number';
      // Blocks are kept by their index, gaps and all: a gap is bounded, as every later walk over the blocks walks it.
      if (index >= MAX_BLOCKS) return `a content_block_start for block ${index}, past the ${MAX_BLOCKS} blocks a message may hold`;
      if (!isObject(block) || typeof block['type'] !== 'string') return `a content_block_start for block ${index} without a content block`;
      if (block['type'] === 'text' && typeof block['text'] !== 'string') return `a text block ${index} without its text`;
      if (block['type'] === 'tool_use' && (typeof block['id'] !== 'string' || typeof block['name'] !== 'string'))
        return `a tool_use block ${index} without its id and name`;
      return undefined;
    }
    case 'content_block_delta': {
      const delta = event['delta'];
      if (!Number.isSafeInteger(event['index'])) return 'a content_block_delta whose index is not a block number';
      if (!isObject(delta) || typeof delta['type'] !== 'string') return 'a content_block_delta without a delta';
      if (delta['type'] === 'text_delta' && typeof delta['text'] !== 'string') return 'a text_delta without its text';
      if (delta['type'] === 'input_json_delta' && typeof delta['partial_json'] !== 'string') return 'an input_json_delta without its partial_json';
      return undefined;
    }
    case 'content_block_stop':
      return Number.isSafeInteger(event['index']) ? undefined : 'a content_block_stop whose index is not a block number';
    case 'message_delta': {
      const delta = event['delta'];
      if (!isObject(delta)) return 'a message_delta without a delta';
      const reason = delta['stop_reason'];
      if (reason !== undefined && reason !== null && typeof reason !== 'string') return 'a message_delta whose stop reason is not text';
      return isUsage(event['usage']) ? undefined : 'a message_delta without its usage';
    }
    default:
      return undefined;
  }
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Usage as the stream reports it: each count a number of tokens, or absent (null, when not counted). */
function isUsage(value: unknown): boolean {
  if (!isObject(value)) return false;
  return ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'].every((key) => {
    const count = value[key];
    return count === undefined || count === null || (typeof count === 'number' && Number.isFinite(count) && count >= 0);
  });
}

/** A server that breaks the event protocol: retried like a broken stream, and said as it is. */
function outOfProtocol(what: string): ProviderError {
  return new ProviderError(`the server's stream broke the protocol: ${what}`, { retryable: true, kind: 'stream' });
}

/** A complete block's input: an object, or why it is not one a tool can take. */
function parseInput(json: string): { ok: true; input: Record<string, unknown> } | { ok: false; reason: string } {
  if (json.trim() === '') return { ok: true, input: {} };
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    return { ok: false, reason: `its input was not valid JSON (${error instanceof Error ? error.message : String(error)})` };
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return { ok: false, reason: 'its input was not a JSON object' };
  if (depthExceeds(value, MAX_TOOL_INPUT_DEPTH)) return { ok: false, reason: `its input is nested more than ${MAX_TOOL_INPUT_DEPTH} levels deep` };
  return { ok: true, input: value as Record<string, unknown> };
}
