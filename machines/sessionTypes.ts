import type { AnyActorRef } from 'xstate';
import type { ApprovalAnswerEvent } from '../src/engine/approvals.js';
import type { AgentBudget, BudgetRoomEvent, BudgetScope, BudgetSpentEvent, BudgetWaitEvent } from '../src/engine/budget.js';
import type { RequestAdmitter } from '../src/engine/requestAdmitter.js';
import type { ChildRegistry, LiveChild } from './childRegistry.js';
import type { CrewMember } from './crew.js';
import type { SessionRecorder } from '../src/session/recorder.js';
import type { LatchCount, NudgeLatch } from '../src/engine/nudges.js';
import type { ResolvedOptions, SessionOptions } from '../src/session/options.js';
import type { PlannedCall, Toolbox } from '../src/tools/toolbox.js';
import type { EffectEvent } from '../src/session/sessionEffects.js';
import type { RestoredSession, ResumeState } from '../src/store/restoredSession.js';
import type { AgentIdentity, AgentResult, Message, StopReason, ToolResultBlock, Usage } from '../src/engine/types.js';

// The session machine's types: what a session is made with (its input), the events it takes, its
// context, and the tool batch it holds open.

export interface SessionInput extends SessionOptions {
  /** The first user message. Without one the session waits in `readyForUser` for `user.message`. */
  readonly task?: string;
  /** Earlier conversation to continue from; it must pass the pairing check. */
  readonly history?: readonly Message[];
  /** Set by a parent for the sub-agents it spawns. */
  readonly agent?: AgentIdentity;
  /**
   * A durable session taken up again (see `resumeRun`): it starts where its journal left it
   * instead of afresh, and resumes its live children the same way.
   */
  readonly restore?: RestoredSession;
  /**
   * Set by a parent for a sub-agent it gives a budget (`agent {…, budget}`): the most the sub-agent
   * and its subtree may spend together (see `BudgetMeter`).
   */
  readonly subtreeBudget?: AgentBudget;
  /** Set by a parent for the sub-agents it spawns: the nearest budget they spend within, if any. */
  readonly enclosingBudget?: BudgetScope;
}

export type SessionEvent =
  /** A user message for the root; queued until the session's next turn boundary. */
  /** `journaled`: the sender wrote it to the session's journal already (a steering line to a session running elsewhere). */
  | { readonly type: 'user.message'; readonly text: string; readonly journaled?: boolean }
  /** Cancels the session and its whole subtree. */
  | { readonly type: 'cancel'; readonly reason?: string }
  /** A person's answer to a call the session waits on (routed by the tree's desk: see `respond`). */
  | ApprovalAnswerEvent
  /** Its budget (given by its parent, or one around it) is spent: it ends `capped` at once (src/engine/budget.ts). */
  | BudgetSpentEvent
  /** Its budgets have no room for its request yet (`queued`), then have it (`budget.room`). */
  | BudgetWaitEvent
  | BudgetRoomEvent
  /** From the session's effects: the model's response or failure, tool results, ticks. */
  | EffectEvent
  /** A spawned sub-agent finished (actor ids of sub-agents are decimal numbers). */
  | { readonly type: `xstate.done.actor.${number}`; readonly output: AgentResult; readonly actorId: string }
  | { readonly type: `xstate.error.actor.${number}`; readonly error: unknown; readonly actorId: string };

export interface Batch {
  readonly plan: readonly PlannedCall[];
  /**
   * Results by tool_use id. Mutated in place as calls settle (one Map per batch rather than a
   * copy per result); committed to history in model order once every call has one.
   */
  readonly results: Map<string, ToolResultBlock>;
  /** The first `reply` of the batch: it stands, later ones are refused. */
  readonly reply: { readonly result: unknown } | null;
  /** Children its `cancel_agent` calls cancel. */
  readonly cancels: readonly LiveChild[];
  /**
   * Its `wait_for_agents` call, while the condition does not hold: the batch then stays open in
   * `waitingForAgents`, and the call is answered (with the inbox after it) once it does.
   */
  readonly wait: { readonly id: string; readonly until: 'all' | 'any' } | null;
  /**
   * Calls waiting for a person (`awaitingApproval`), by id, with their tool and input. Emptied in
   * place as answers arrive; nothing of the batch runs before it is empty.
   */
  readonly awaiting: Map<string, { readonly tool: string; readonly input: Readonly<Record<string, unknown>> }>;
  /** Why the step that produced the batch stopped (`max_tokens`: it was cut off). */
  readonly stepEnd: StepEnd;
  /** Mutable for the same reason as `results`: teardown must not answer a batch twice. */
  committed: boolean;
  /** Whether its `cancel_agent` calls went out (a batch that waited for approval passes two entries). */
  cancelsSent: boolean;
}

/**
 * What a session is made with and never replaces. One member rather than four: every `assign`
 * copies the context with `Object.assign({}, context, update)`, and V8 turns a copy of twenty or
 * more properties into a dictionary-mode object, whose every read and copy is a hash lookup: at
 * twenty members that cost a plain step about a fifth of its time (bench/run.mjs, loop rows).
 * test/e2e/package/sessionContextShape.test.ts holds the member count under that cliff.
 */
export interface SessionFixed {
  readonly toolbox: Toolbox;
  readonly system: string;
  readonly latches: readonly NudgeLatch[];
  readonly recorder: SessionRecorder;
  /** The nearest budget it spends within: its own (given by its parent) or an ancestor's; undefined: the tree's only. */
  readonly budgetScope: BudgetScope | undefined;
  /** Asks its budgets for room before each request, and keeps its place while it is `queued`. */
  readonly admitter: RequestAdmitter;
}

export interface SessionContext {
  readonly options: ResolvedOptions;
  readonly agent: AgentIdentity;
  /** Kept in one member, see `SessionFixed`. */
  readonly fixed: SessionFixed;
  /** Append-only; see the note on the machine (machines/session.ts). */
  readonly messages: Message[];
  /** User messages waiting for the next turn. */
  readonly pendingUser: readonly string[];
  /** Results of finished children waiting for the next turn; appended in place, replaced at a turn start. */
  readonly inbox: AgentResult[];
  /** Model requests made in the current turn. */
  readonly steps: number;
  /**
   * The turn was started by this process (not taken up from a journal), so late results may join
   * its first request (`joinTurn`). A resumed request is asked again from the committed history
   * only: its first try may have reached the model without them.
   */
  readonly joinable: boolean;
  readonly batch: Batch | null;
  readonly children: ChildRegistry;
  /** Children ever spawned (per name: see `children`). */
  readonly spawned: number;
  readonly latchCounts: Readonly<Record<string, LatchCount>>;
  /**
   * Model requests of this session that reached the provider, over its life: each retry and each
   * aborted or failed request counts, as the provider counts them.
   */
  readonly requests: number;
  /** This session's own tokens (those of its retried, aborted and failed requests included), and those delivered by finished children (their whole subtrees). */
  readonly usage: Usage;
  readonly childUsage: Usage;
  /** Why the session is failing, set by the transition into `failed`. */
  readonly failure: string | null;
  /** Set on entering a final state; the machine's output. */
  readonly result: AgentResult | null;
  /** Where a resumed session picks up (read once, by `starting`); null for a new one. */
  readonly resumeAt: ResumeState | null;
}

/** Why the last step stopped, as the nudge registry sees it. */
export interface StepEnd {
  readonly stopReason: StopReason;
  readonly stepText: string;
}

/** What every session's context has, new or resumed. */
export type MadeContext = Pick<SessionContext, 'options' | 'agent' | 'fixed' | 'failure' | 'result'>;

export type Spawner = (src: 'crew', options: { id: string; input: { members: CrewMember<SessionInput>[] } }) => unknown;

/**
 * What the chart's guards and actions read of what XState hands them: the session's context and
 * the event in hand. (The machine-wide type: XState does not narrow the event per transition for
 * implementations given to `setup`.)
 */
export interface SessionArgs {
  readonly context: SessionContext;
  readonly event: SessionEvent;
}

/** What an action that starts effects or sends events is handed: the session's own actor too. */
export interface ActorArgs extends SessionArgs {
  readonly self: AnyActorRef;
}
