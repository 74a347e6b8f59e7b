import type { ApprovalDecision } from '../../engine/approvals.js';
import type { AgentBudget } from '../../engine/budget.js';
import type { SessionSnapshot } from '../../run/runtime.js';
import type { AgentOutcome, AgentResult, Message, StopReason, Usage } from '../../engine/types.js';

/**
 * What every run event says: which agent, where it sits in the tree, and when.
 *
 * `agent` is the agent id, unique within the run (`root`, `root/researcher`, `root/researcher#2`);
 * `path` is that id's segments from the root down (`['root', 'researcher#2']`), so a consumer can
 * group by subtree without parsing ids. `time` is `Date.now()` when the event was observed.
 */
export interface RunEventBase {
  readonly agent: string;
  readonly path: readonly string[];
  readonly time: number;
}

/** A session appeared (the root, or a sub-agent a parent spawned). Always an agent's first event. */
export interface AgentStartedEvent extends RunEventBase {
  readonly type: 'agent.started';
  readonly name: string;
  /** 0 for the root. */
  readonly depth: number;
  /** The agent id of the session that spawned it; null for the root. */
  readonly parent: string | null;
  /** Its task (its first user message), in full; '' when it starts waiting for one. */
  readonly task: string;
  /** The model its requests ask for, when its declared profile names one; absent: the provider's own. */
  readonly model?: string;
}

/**
 * The session's state changed, or a new model request began while it stayed in `streaming` (a
 * continuation after `pause_turn`, or the next turn started within one macrostep).
 */
export interface AgentStateEvent extends RunEventBase {
  readonly type: 'agent.state';
  /** The machine's state value: `readyForUser`, `streaming`, `dispatchingBatch`, `replied`, … */
  readonly state: string;
  /** Model requests in the current turn. */
  readonly steps: number;
  /** Model requests begun over the agent's whole life. */
  readonly requests: number;
  /** The agent's own tokens so far (its sub-agents' are theirs). */
  readonly usage: Usage;
}

/** Text the model is streaming, as it arrives (never a machine event: see src/engine/model/streamModel.ts). */
export interface TextDeltaEvent extends RunEventBase {
  readonly type: 'text.delta';
  readonly text: string;
}

/** The model's response arrived (before it is committed to the history). */
export interface ModelResponseEvent extends RunEventBase {
  readonly type: 'model.response';
  readonly stopReason: StopReason;
  /** Characters of text in the response. */
  readonly textChars: number;
  readonly toolCalls: readonly { readonly id: string; readonly name: string; readonly complete: boolean }[];
  /** This request's tokens. */
  readonly usage: Usage;
}

/** One tool call of a response, right after its `model.response` (protocol tools included). */
export interface ToolCallEvent extends RunEventBase {
  readonly type: 'tool.call';
  readonly id: string;
  readonly name: string;
  readonly input: Readonly<Record<string, unknown>>;
  /** False when the response was cut off inside this call's input (it is not run). */
  readonly complete: boolean;
}

/**
 * A call the session ran as a tool (a host or workspace tool) settled. Protocol tools (`agent`,
 * `reply`, `wait_for_agents`) are answered by the machine itself: their results are in the
 * `message` that carries them.
 */
export interface ToolResultEvent extends RunEventBase {
  readonly type: 'tool.result';
  readonly id: string;
  readonly isError: boolean;
  /** The rendered result (already clipped to the tool output cap). */
  readonly content: string;
}

/**
 * A finished sub-agent's result reached its parent (`agent` and `path` are the parent's). A child
 * that crashed is delivered as `failed` with the crash as its reason and no `result`.
 */
export interface DeliveryEvent extends RunEventBase {
  readonly type: 'delivery';
  /** The child's agent id. */
  readonly child: string;
  readonly name: string;
  readonly outcome: AgentOutcome;
  /** The rendered reply (clipped to the reply cap); '' for every other outcome. */
  readonly text: string;
  readonly reason?: string;
  /**
   * The parsed reply of a child declared with a `reply` schema (as `AgentResult.value`): what the
   * host reads, beside the rendered `text` the parent model sees.
   */
  readonly value?: unknown;
  /** The child's output, when it ended in a final state. */
  readonly result?: AgentResult;
}

/** Tokens of one model request, right after its `model.response` (the agent's running total is on `agent.state`). */
export interface UsageEvent extends RunEventBase {
  readonly type: 'usage';
  readonly usage: Usage;
}

/**
 * A message of the agent's history at position `index`, once committed. A later append that merged
 * into the last message sends it again with the same `index` (the newer replaces the older).
 */
export interface MessageEvent extends RunEventBase {
  readonly type: 'message';
  readonly index: number;
  readonly message: Message;
}

/** A user message reached the session (queued if it was busy). */
export interface UserMessageEvent extends RunEventBase {
  readonly type: 'user.message';
  readonly text: string;
}

/** The session was asked to cancel (`cancel` event). */
export interface CancelEvent extends RunEventBase {
  readonly type: 'agent.cancel';
  readonly reason?: string;
}

/** A model request failed for good (after its retries); the session fails with it. */
export interface ModelErrorEvent extends RunEventBase {
  readonly type: 'model.error';
  readonly message: string;
}

/**
 * Model requests of the agent that reached the provider and ended without a response it keeps:
 * `retried` (a stream that broke, asked again), `failed` (the step failed with it) or `aborted`
 * (a cancel, a spent budget). They were served, and what they reported is spent: `usage` counts
 * it, as `agent.state`'s running total does.
 */
export interface ModelLostEvent extends RunEventBase {
  readonly type: 'model.lost';
  readonly reason: 'retried' | 'failed' | 'aborted';
  readonly requests: number;
  readonly usage: Usage;
}

/**
 * Every snapshot of a session, for a watcher that draws from the session's context (what a batch
 * is running, how many sub-agents are live). Sent after the other events of the same snapshot.
 * The snapshot is XState's own, typed; its context's arrays are the live ones, not copies.
 */
export interface AgentSnapshotEvent extends RunEventBase {
  readonly type: 'agent.snapshot';
  readonly state: string;
  /** Model requests begun over the agent's whole life (as in `agent.state`). */
  readonly requests: number;
  readonly snapshot: SessionSnapshot;
}

/** The session ended: a final state (`done`, with its `outcome`), stopped from outside, or crashed (`error`). Always its last event. */
export interface AgentEndedEvent extends RunEventBase {
  readonly type: 'agent.ended';
  readonly status: 'done' | 'stopped' | 'error';
  readonly outcome?: AgentOutcome;
  readonly reason?: string;
  /** Its output, for `done`. */
  readonly result?: AgentResult;
}

/**
 * A tool call waits for a person (its session entered `awaitingApproval`); `agent` and `path` are
 * the agent that asked. Answer it with `respond(root, { callId, decision })`: exactly that call
 * resumes. A resumed run asks again for the calls still waiting.
 */
export interface ApprovalRequestedEvent extends RunEventBase {
  readonly type: 'approval.requested';
  /** The call's `tool_use` id (`toolu_…`). */
  readonly callId: string;
  readonly tool: string;
  readonly input: Readonly<Record<string, unknown>>;
  /** Why the agent runs: the task its parent gave it (the root's: the run's task). */
  readonly task: string;
}

/**
 * A person's answer reached the waiting call (`approve`, `deny` with its reason, or `always`; the
 * other calls of that tool waiting then are answered `approve`).
 */
export interface ApprovalAnsweredEvent extends RunEventBase {
  readonly type: 'approval.answered';
  readonly callId: string;
  readonly tool: string;
  readonly decision: ApprovalDecision;
  readonly reason?: string;
}

/**
 * A budget was reached: the tree's (`scope: 'tree'`, `agent` the root: running sub-agents are
 * cancelled next and the root gets a final turn) or the one a parent gave a sub-agent (`scope:
 * 'agent'`, `agent` that sub-agent: it ends `capped` next). Sent before what it causes.
 */
export interface BudgetExceededEvent extends RunEventBase {
  readonly type: 'budget.exceeded';
  readonly scope: 'tree' | 'agent';
  /** Spent within the budget's scope when it was reached (cost 0 when the run has no prices). */
  readonly tokens: number;
  readonly cost: number;
  readonly limit: AgentBudget;
}

/**
 * A run event: one discriminated union (switch on `type`) for everything a host, the terminal
 * progress, the trace recorder and the turn-flow narration watch. New kinds join this union; a
 * `switch` with a `default` keeps compiling when they do.
 */
export type RunEvent =
  | AgentStartedEvent
  | AgentStateEvent
  | TextDeltaEvent
  | ModelResponseEvent
  | ToolCallEvent
  | ToolResultEvent
  | DeliveryEvent
  | UsageEvent
  | MessageEvent
  | UserMessageEvent
  | CancelEvent
  | ModelErrorEvent
  | ModelLostEvent
  | ApprovalRequestedEvent
  | ApprovalAnsweredEvent
  | BudgetExceededEvent
  | AgentSnapshotEvent
  | AgentEndedEvent;

export type RunEventType = RunEvent['type'];

/** Called with each event, in order, synchronously as it is observed. */
export type RunEventListener = (event: RunEvent) => void;
