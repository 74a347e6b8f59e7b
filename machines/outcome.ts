import { describeError } from '../src/engine/model/errors.js';
import { clip, renderValue } from '../src/engine/render.js';
import { addUsage } from '../src/engine/usage.js';
import type { AgentOutcome, AgentResult } from '../src/engine/types.js';
import type { SessionContext, SessionArgs } from './sessionTypes.js';
import { REFUSAL_REASONS, responseOf } from './guards.js';

// How a session ends: the failure it records and the result of each final state.

/**
 * The session's result for a final state, with its own and its subtree's usage; records the
 * outcome and flushes the log.
 */
export function finish(context: SessionContext, outcome: AgentOutcome, extra: { text?: string; reason?: string; value?: unknown } = {}): AgentResult {
  const totalUsage = addUsage(context.usage, context.childUsage);
  const result: AgentResult = {
    name: context.agent.name,
    outcome,
    text: extra.text ?? '',
    ...(extra.reason === undefined ? {} : { reason: extra.reason }),
    ...('value' in extra ? { value: extra.value } : {}),
    usage: totalUsage,
  };
  context.fixed.recorder.record({
    type: 'outcome',
    outcome,
    text: result.text,
    ...(extra.reason === undefined ? {} : { reason: extra.reason }),
    ...('value' in extra ? { value: extra.value } : {}),
    usage: context.usage,
    totalUsage,
  });
  context.fixed.recorder.flush();
  return result;
}

/** Why the session fails: the reason given, the refusal, the error, or the event it failed on. */
export function fail({ event }: SessionArgs, params: { reason?: string }): Partial<SessionContext> {
  if (params.reason) return { failure: params.reason };
  if (event.type === 'model.done') return { failure: REFUSAL_REASONS[responseOf(event).stopReason] ?? 'model stopped' };
  if ('error' in event) return { failure: describeError(event.error) };
  return { failure: `failed on ${event.type}` };
}

/** The staged reply, rendered and clipped, is the session's result (`empty` if it renders to nothing). */
export function finishReplied({ context }: SessionArgs): Partial<SessionContext> {
  const reply = context.batch?.reply;
  const rendered = clip(renderValue(reply?.result), context.options.replyCap);
  // A typed reply also hands up its parsed value (the host's `AgentResult.value`).
  const value = context.options.reply !== undefined && reply ? { value: reply.result } : {};
  return { result: finish(context, rendered.length > 0 ? 'replied' : 'empty', { text: rendered, ...value }) };
}

/** Ends `capped`: by its budget (spent, or capping it now) or by its step cap. */
export function finishCapped({ context, event }: SessionArgs): Partial<SessionContext> {
  const budget = event.type === 'budget.spent' || context.options.budget.caps(context.agent, context.fixed.budgetScope);
  const reason = budget ? 'budget' : `step cap of ${context.options.maxSteps} reached`;
  return { result: finish(context, 'capped', { reason }) };
}

/** Ends `cancelled`, with the reason the cancel gave. */
export function finishCancelled({ context, event }: SessionArgs): Partial<SessionContext> {
  return { result: finish(context, 'cancelled', event.type === 'cancel' && event.reason ? { reason: event.reason } : {}) };
}
