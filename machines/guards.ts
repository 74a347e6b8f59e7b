import { textOf } from '../src/engine/history.js';
import { pickNudge, type NudgeLatch, type NudgeView } from '../src/engine/nudges.js';
import type { ResumeState } from '../src/store/restoredSession.js';
import type { ModelResponse, StopReason, ToolUseBlock } from '../src/engine/types.js';
import type { SessionEvent, SessionContext, SessionArgs, StepEnd } from './sessionTypes.js';

// The questions the session chart asks (machines/session.ts): its guards, by name, and the reads of
// the context and event behind them.

/** The stop reasons a session fails on (the `refused` guard), with the failure each records. */
export const REFUSAL_REASONS: Partial<Record<StopReason, string>> = {
  refusal: 'the model refused to continue (stop reason: refusal)',
  model_context_window_exceeded: 'the conversation exceeded the model context window',
};

/** A session that owes a reply: every sub-agent, and a root given an `output` schema. */
function isSubAgent(context: SessionContext): boolean {
  return context.fixed.toolbox.axes.replies;
}

/** Nothing is coming: no sub-agent runs, no result waits, and (issue 17) no message sent to it waits. */
export function isQuiet(context: SessionContext): boolean {
  return context.inbox.length === 0 && context.children.size === 0 && context.pendingUser.length === 0;
}

/** The step cap, or a budget (src/engine/budget.ts): a session that would go on ends `capped`. */
function capReached(context: SessionContext): boolean {
  return context.steps >= context.options.maxSteps || context.options.budget.caps(context.agent, context.fixed.budgetScope);
}

/** Why a step stopped, from its response. */
export function stepEndOf(response: ModelResponse): StepEnd {
  return { stopReason: response.stopReason, stepText: textOf(response.content) };
}

/** What the nudge latches see of the session after a step (their fire counts are added by the caller). */
export function nudgeView(context: SessionContext, step: StepEnd): Omit<NudgeView, 'firedThisTurn' | 'firedTotal'> {
  return { agent: context.agent, isSubAgent: isSubAgent(context), quiet: isQuiet(context), steps: context.steps, ...step };
}

function latchFor(context: SessionContext, on: NudgeLatch['on'], step: StepEnd): NudgeLatch | undefined {
  return pickNudge(context.fixed.latches, on, context.latchCounts, nudgeView(context, step));
}

/** The model's response, from the `model.done` event. */
export function responseOf(event: SessionEvent): ModelResponse {
  if (event.type !== 'model.done') throw new Error(`exarch: expected the model's response, got ${event.type}`);
  return event.output;
}

/** Why the last step stopped: from the model's done event, or from the batch it produced. */
export function stepEndFor(context: SessionContext, event: SessionEvent): StepEnd {
  if (event.type === 'model.done') return stepEndOf(responseOf(event));
  if (context.batch) return context.batch.stepEnd;
  throw new Error(`exarch: no step has ended (event ${event.type})`);
}

/** The open batch's wait can end: every child has delivered ('all'), or one has ('any'). */
export function waitSatisfied(context: SessionContext): boolean {
  const wait = context.batch?.wait;
  if (!wait) return true;
  return context.children.size === 0 || (wait.until === 'any' && context.inbox.length > 0);
}

/**
 * The policy's answer per `model.done` event. The `needsApproval` guard and `openBatch` both need
 * it within one transition, and a host's predicate is asked once per call: it may prompt, log or
 * count. Keyed by the event, made once per delivery, not by the response: a provider may hand the
 * same response object to two sessions, whose agents the predicate may tell apart.
 */
const gatedCallsOf = new WeakMap<SessionEvent, readonly ToolUseBlock[]>();
const NONE_GATED: readonly ToolUseBlock[] = Object.freeze([]);

/** Host tool calls of the response in `event` that must wait for a person (the approval policy; see src/engine/approvals.ts). */
export function callsNeedingApproval(context: SessionContext, event: SessionEvent): readonly ToolUseBlock[] {
  // Without a policy nothing is asked: no list and no entry in the WeakMap per step (an entry
  // there is work for every garbage collection while the event lives).
  if (!context.options.approvals.asks) return NONE_GATED;
  const known = gatedCallsOf.get(event);
  if (known) return known;
  const response = responseOf(event);
  const gated: ToolUseBlock[] = [];
  for (const block of response.content) {
    if (block.type !== 'tool_use' || !context.fixed.toolbox.tools.has(block.name) || response.incompleteToolUseIds.includes(block.id)) continue;
    if (response.invalidToolInputs?.[block.id] !== undefined) continue;
    if (context.options.approvals.needs({ tool: block.name, input: block.input, agent: context.agent })) gated.push(block);
  }
  gatedCallsOf.set(event, gated);
  return gated;
}

/**
 * A session whose first turn has not begun, with input for it: a new one given a task, or one
 * taken up from a journal that holds its session record and no turn yet. It rests in `starting`
 * until the next tick rather than in `readyForUser`, whose turn would be over.
 */
export function beforeFirstTurn(context: SessionContext): boolean {
  if (context.pendingUser.length === 0) return false;
  return context.resumeAt === null || (context.resumeAt === 'readyForUser' && context.messages.length === 0);
}

/** What the chart asks of a session as it takes an event: its guards, by name. */
export const sessionGuards = {
  fromSubAgent: ({ event }: SessionArgs) => 'actorId' in event && /^\d+$/.test(event.actorId),
  // wake 'all': results wait in the inbox until the last running sub-agent has delivered.
  hasTurnInput: ({ context }: SessionArgs) =>
    context.pendingUser.length > 0 || (context.inbox.length > 0 && (context.options.wake === 'each' || context.children.size === 0)),
  capReached: ({ context }: SessionArgs) => capReached(context),
  // The turn's first request has not left yet (`model.starting`), and results arrived since the
  // turn started. (A user message alone waits for the next turn, as it does during any request.)
  lateResults: ({ context }: SessionArgs) => context.joinable && context.steps === 1 && context.inbox.length > 0,
  refused: ({ event }: SessionArgs) => responseOf(event).stopReason in REFUSAL_REASONS,
  hasToolCalls: ({ event }: SessionArgs) => responseOf(event).content.some((b) => b.type === 'tool_use'),
  truncated: ({ context, event }: SessionArgs) => stepEndFor(context, event).stopReason === 'max_tokens',
  paused: ({ event }: SessionArgs) => responseOf(event).stopReason === 'pause_turn',
  truncationReminderLeft: ({ context, event }: SessionArgs) => latchFor(context, 'max_tokens', stepEndFor(context, event)) !== undefined,
  endTurnLatchFires: ({ context, event }: SessionArgs) => latchFor(context, 'end_turn', stepEndFor(context, event)) !== undefined,
  quietSubAgent: ({ context }: SessionArgs) => isSubAgent(context) && isQuiet(context),
  replyStaged: ({ context }: SessionArgs) => context.batch?.reply != null,
  waitPending: ({ context }: SessionArgs) => !waitSatisfied(context),
  waitSatisfied: ({ context }: SessionArgs) => waitSatisfied(context),
  needsApproval: ({ context, event }: SessionArgs) => callsNeedingApproval(context, event).length > 0,
  approvalsAnswered: ({ context }: SessionArgs) => (context.batch?.awaiting.size ?? 0) === 0,
  // The open batch has `cancel_agent` calls whose cancels have not gone out (see `sendCancels`).
  cancelsUnsent: ({ context }: SessionArgs) => context.batch !== null && !context.batch.cancelsSent && context.batch.cancels.length > 0,
  resumesAt: ({ context }: SessionArgs, params: { state: ResumeState }) => context.resumeAt === params.state,
  beforeFirstTurn: ({ context }: SessionArgs) => beforeFirstTurn(context),
};
