/**
 * Central types. Message shapes follow the Anthropic Messages API exactly, so a history can be
 * sent to the API unchanged and a test can check it with the API's own pairing rule.
 */

export interface TextBlock {
  readonly type: 'text';
  readonly text: string;
}

export interface ToolUseBlock {
  readonly type: 'tool_use';
  readonly id: string;
  readonly name: string;
  readonly input: Readonly<Record<string, unknown>>;
}

export interface ToolResultBlock {
  readonly type: 'tool_result';
  readonly tool_use_id: string;
  readonly content: string;
  readonly is_error?: boolean;
}

export type AssistantBlock = TextBlock | ToolUseBlock;
export type UserBlock = TextBlock | ToolResultBlock;

export interface AssistantMessage {
  readonly role: 'assistant';
  readonly content: readonly AssistantBlock[];
}

export interface UserMessage {
  readonly role: 'user';
  readonly content: readonly UserBlock[];
}

export type Message = AssistantMessage | UserMessage;

/** Why a model stopped (CONTRACT §5). */
export type StopReason = 'end_turn' | 'stop_sequence' | 'tool_use' | 'max_tokens' | 'pause_turn' | 'refusal' | 'model_context_window_exceeded';

export const STOP_REASONS: readonly StopReason[] = [
  'end_turn',
  'stop_sequence',
  'tool_use',
  'max_tokens',
  'pause_turn',
  'refusal',
  'model_context_window_exceeded',
];

export interface Usage {
  readonly inputTokens: number;
  readonly outputTokens: number;
  readonly cacheCreationInputTokens: number;
  readonly cacheReadInputTokens: number;
}

/** Who a session is, as seen by providers, tools, logs and listeners. */
export interface AgentIdentity {
  /** The name given in the `agent` call; `root` for the root session. */
  readonly name: string;
  /** Names from the root down, e.g. `['root', 'explorer', 'reader']`. */
  readonly path: readonly string[];
  /** 0 for the root. */
  readonly depth: number;
  /** Unique for the run: `root`, `root/explorer`, `root/explorer#2` when a name is reused. */
  readonly id: string;
}

/** A tool as advertised to a model (Anthropic tool definition shape). */
export interface ToolSpec {
  readonly name: string;
  readonly description: string;
  readonly input_schema: Readonly<Record<string, unknown>>;
}

export interface ModelRequest {
  readonly agent: AgentIdentity;
  readonly system: string;
  /** The live history. Read-only for providers; it does not change while a request is in flight. */
  readonly messages: readonly Message[];
  readonly tools: readonly ToolSpec[];
  /** The model this agent's profile asks for (`agents.NAME.model`); absent: the provider's own. */
  readonly model?: string;
  readonly signal: AbortSignal;
}

/** Where a provider reports the stream as it arrives. Every call also feeds the stall watchdog. */
export interface StreamSink {
  text(delta: string): void;
  toolUseStart(id: string, name: string): void;
  toolInputDelta(id: string, partialJson: string): void;
  /** Any other sign of life (pings, thinking deltas). */
  heartbeat(): void;
  /**
   * The tokens this attempt has used so far, cumulative (the Anthropic stream's `message_start` and
   * `message_delta` usage). Budgets count it as it arrives, before the response completes; a
   * provider that never calls it is counted once, from the response's `usage`. (Optional for a sink
   * made by hand: providers call it only if it is there.)
   */
  usage?(usage: Usage): void;
}

export interface ModelResponse {
  readonly content: readonly AssistantBlock[];
  readonly stopReason: StopReason;
  readonly usage: Usage;
  /**
   * Ids of `tool_use` blocks whose `content_block_stop` never arrived (cut off at `max_tokens`).
   * Their input is incomplete; the session answers them with an error and never executes them.
   */
  readonly incompleteToolUseIds: readonly string[];
  /**
   * `tool_use` blocks that completed with an input no tool can take (not valid JSON, not an
   * object, nested too deep), by id, with why. Their input in the history is `{}`; the session
   * answers them with an error naming the reason and never executes them.
   */
  readonly invalidToolInputs?: Readonly<Record<string, string>>;
}

export interface Provider {
  /** Who serves the model (`anthropic`): telemetry reports it as `gen_ai.provider.name`. */
  readonly name: string;
  /** The model asked for when a request names none, if the provider has one (telemetry reports it). */
  readonly model?: string;
  stream(request: ModelRequest, sink: StreamSink): Promise<ModelResponse>;
}

export type AgentOutcome = 'replied' | 'empty' | 'capped' | 'failed' | 'cancelled';

/** What a finished sub-agent hands its parent: the output of its final state. */
export interface AgentResult {
  readonly name: string;
  readonly outcome: AgentOutcome;
  /** The rendered, clipped `reply` payload; empty for every other outcome. */
  readonly text: string;
  /** One line, for `failed` (and the reason of a cancellation, if one was given). */
  readonly reason?: string;
  /**
   * The parsed `reply`, for an agent whose profile declares a `reply` schema (or a root run with
   * `output`): typed by that schema. Absent for every other agent and outcome; `text` is what the
   * parent model reads either way.
   */
  readonly value?: unknown;
  /** This agent's tokens plus those of its whole subtree. */
  readonly usage: Usage;
}

/** Live callbacks for what does not pass through the machine (per-delta traffic). */
export interface SessionListener {
  onTextDelta?(agent: AgentIdentity, delta: string): void;
  onToolUseStart?(agent: AgentIdentity, id: string, name: string): void;
  onToolInputDelta?(agent: AgentIdentity, id: string, partialJson: string): void;
  onRetry?(agent: AgentIdentity, info: { attempt: number; delayMs: number; reason: string }): void;
}
