import Anthropic, { AnthropicError, APIConnectionError, APIError, APIUserAbortError } from '@anthropic-ai/sdk';
import type { MessageParam, MessageStreamParams, RawMessageStreamEvent, TextBlockParam, Tool as SdkTool } from '@anthropic-ai/sdk/resources/messages/messages';
import { ProviderError, describeError } from '../model/errors.js';
import { ZERO_USAGE } from '../usage.js';
import type { AssistantBlock, Message, ModelRequest, ModelResponse, Provider, StopReason, StreamSink, Usage } from '../types.js';
import { STOP_REASONS } from '../types.js';

export const DEFAULT_MODEL = 'claude-sonnet-5-5';

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
  /** `cache_control` breakpoints on the tools, the system prompt and the end of the conversation (default on). */
  readonly promptCaching?: boolean;
  /** A client of your own (tests, proxies); the options above that configure a client are then ignored. */
  readonly client?: Anthropic;
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
  private readonly client: Anthropic;
  private readonly maxTokens: number;
  private readonly promptCaching: boolean;

  constructor(options: AnthropicProviderOptions = {}) {
    this.model = options.model ?? DEFAULT_MODEL;
    this.maxTokens = options.maxTokens ?? 8192;
    this.promptCaching = options.promptCaching ?? true;
    this.client =
      options.client ??
      new Anthropic({
        ...(options.apiKey === undefined ? {} : { apiKey: options.apiKey }),
        ...(options.baseURL === undefined ? {} : { baseURL: options.baseURL }),
        maxRetries: options.sdkMaxRetries ?? 4,
        ...(options.timeoutMs === undefined ? {} : { timeout: options.timeoutMs }),
      });
  }

  async stream(request: ModelRequest, sink: StreamSink): Promise<ModelResponse> {
    const assembler = new MessageAssembler(sink);
    try {
      const stream = this.client.messages.stream(this.params(request), { signal: request.signal });
      for await (const event of stream) assembler.apply(event);
      return assembler.finish();
    } catch (error) {
      throw translateError(error, assembler.started, request.signal);
    }
  }

  /** The request body: our history is already in the API's shape; caching adds breakpoints to copies. */
  params(request: ModelRequest): MessageStreamParams {
    const cache = this.promptCaching ? ({ cache_control: { type: 'ephemeral' } } as const) : {};
    const tools: SdkTool[] = request.tools.map((tool, i) => ({
      name: tool.name,
      description: tool.description,
      input_schema: tool.input_schema as SdkTool['input_schema'],
      ...(i === request.tools.length - 1 ? cache : {}),
    }));
    const system: TextBlockParam[] = request.system ? [{ type: 'text', text: request.system, ...cache }] : [];
    return {
      model: this.model,
      max_tokens: this.maxTokens,
      ...(system.length > 0 ? { system } : {}),
      ...(tools.length > 0 ? { tools } : {}),
      messages: toMessageParams(request.messages, this.promptCaching),
    };
  }
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
    switch (event.type) {
      case 'message_start': {
        const u = event.message.usage;
        this.usage = {
          inputTokens: u.input_tokens ?? 0,
          outputTokens: u.output_tokens ?? 0,
          cacheCreationInputTokens: u.cache_creation_input_tokens ?? 0,
          cacheReadInputTokens: u.cache_read_input_tokens ?? 0,
        };
        this.sink.heartbeat();
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
        if (block) block.complete = true;
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
        this.sink.heartbeat();
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
    for (const block of this.blocks) {
      if (!block) continue;
      if (block.kind === 'text' && block.text.length > 0) content.push({ type: 'text', text: block.text });
      if (block.kind !== 'tool_use') continue;
      const input = block.complete ? parseInput(block.json) : undefined;
      if (input === undefined) incompleteToolUseIds.push(block.id);
      // A cut-off call stays in history (the API needs the id answered) with an empty input.
      content.push({ type: 'tool_use', id: block.id, name: block.name, input: input ?? {} });
    }
    return { content, stopReason: stopReason as StopReason, usage: this.usage, incompleteToolUseIds };
  }
}

function parseInput(json: string): Record<string, unknown> | undefined {
  if (json.trim() === '') return {};
  try {
    const value: unknown = JSON.parse(json);
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** One line from an API error body: `overloaded_error: Overloaded`. */
function apiErrorText(error: APIError): string {
  const body = error.error as { error?: { type?: unknown; message?: unknown } } | undefined;
  const type = typeof body?.error?.type === 'string' ? body.error.type : undefined;
  const message = typeof body?.error?.message === 'string' ? body.error.message : undefined;
  if (type || message) return [type, message].filter(Boolean).join(': ');
  return describeError(error);
}

export function translateError(error: unknown, started: boolean, signal: AbortSignal): unknown {
  if (signal.aborted || error instanceof APIUserAbortError) return error;
  if (error instanceof ProviderError) return error;
  if (error instanceof APIError && error.status !== undefined) {
    // The SDK already retried what it retries; what reaches us is final.
    return new ProviderError(`${apiErrorText(error)} (HTTP ${error.status})`, { retryable: false, status: error.status, kind: 'http', cause: error });
  }
  if (error instanceof APIError && !(error instanceof APIConnectionError)) {
    // An SSE `error` event: the request was accepted, then the stream failed.
    return new ProviderError(apiErrorText(error), { retryable: true, kind: 'stream', cause: error });
  }
  // The SDK reports a connection dropped after the response began as a plain AnthropicError
  // ('terminated'), whether or not an event had arrived yet.
  if (started || (error instanceof AnthropicError && !(error instanceof APIError))) {
    return new ProviderError(`connection lost mid-stream: ${describeError(error)}`, { retryable: true, kind: 'stream', cause: error });
  }
  if (error instanceof APIConnectionError) {
    return new ProviderError(`cannot reach the Anthropic API: ${describeError(error.cause ?? error)}`, { retryable: false, kind: 'connection', cause: error });
  }
  return new ProviderError(describeError(error), { retryable: false, cause: error });
}
