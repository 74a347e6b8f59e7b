import type { AnyActorRef } from 'xstate';
import { appendAssistantBlocks, nonEmptyBlocks } from '../src/engine/history.js';
import { effectsOf, type SessionEffects } from '../src/session/sessionEffects.js';
import type { RequestSpend, StreamModelInput } from '../src/engine/model/streamModel.js';
import { addUsage, ZERO_USAGE } from '../src/engine/usage.js';
import type { ActorArgs, SessionEvent, SessionContext, SessionFixed } from './sessionTypes.js';
import { isQuiet, responseOf } from './guards.js';

// The model step of the session chart: the request as the history stands, its start, and the commit
// of its response.

/**
 * Appends a complete assistant message to the history; returns the session's requests and usage
 * with the step's (a retried step made more than one request, and its retries spent tokens too).
 */
export function commitResponseTo(context: SessionContext, event: SessionEvent): Pick<SessionContext, 'requests' | 'usage'> {
  const response = responseOf(event);
  const blocks = nonEmptyBlocks(response.content);
  appendAssistantBlocks(context.messages, blocks);
  if (blocks.length > 0) context.fixed.recorder.record({ type: 'message', role: 'assistant', content: blocks });
  // (Budgets counted these tokens as they streamed: see `requestModel`.)
  const retried = event.type === 'model.done' && event.requests !== undefined ? { requests: event.requests, lost: event.lost ?? ZERO_USAGE } : undefined;
  const usage = addUsage(context.usage, retried ? addUsage(response.usage, retried.lost) : response.usage);
  context.fixed.recorder.record({
    type: 'usage',
    request: response.usage,
    session: usage,
    stopReason: response.stopReason,
    ...(response.incompleteToolUseIds.length > 0 ? { incomplete: response.incompleteToolUseIds } : {}),
    ...(retried ? { requests: retried.requests, lost: retried.lost } : {}),
  });
  return { requests: context.requests + (retried?.requests ?? 1), usage };
}

/**
 * The input of a session's model steps, made on its first step and used by every later one:
 * nothing in it changes over a session's life (its options, identity and `fixed` are never
 * replaced, and `messages` is the one append-only history), so a step need not build it, its
 * request and its two callbacks again. Checked against the context all the same: a context made
 * with other parts (a resumed session's) gets its own.
 */
const stepInputs = new WeakMap<SessionFixed, StreamModelInput>();

/** The model step of `streaming`: the request as the history stands, and how its usage is counted. */
export function modelStepInput(context: SessionContext): StreamModelInput {
  const known = stepInputs.get(context.fixed);
  if (known && known.request.messages === context.messages && known.request.agent === context.agent && known.provider === context.options.provider) {
    return known;
  }
  const input = newModelStepInput(context);
  stepInputs.set(context.fixed, input);
  return input;
}

function newModelStepInput(context: SessionContext): StreamModelInput {
  const meter = context.options.budget;
  const { agent } = context;
  const { budgetScope } = context.fixed;
  const model = context.options.model;
  return {
    provider: context.options.provider,
    request: {
      agent,
      system: context.fixed.system,
      messages: context.messages,
      tools: context.fixed.toolbox.specs,
      ...(model === undefined ? {} : { model }),
    },
    listener: context.options.listener,
    retry: context.options.retry,
    stallTimeoutMs: context.options.stallTimeoutMs,
    onRetry: (info) => context.fixed.recorder.record({ type: 'retry', ...info }),
    // Counted as the stream reports it, so a budget is reached before the response completes.
    onUsage: (added) => meter.charge(agent, model, budgetScope, added),
  };
}

/** Whether results arrived for the turn's first request while it waited for the journal (see `joinTurn`). */
export function lateResultsOf(context: SessionContext): (() => boolean) | undefined {
  // Results are appended to this very array until the turn's first request leaves.
  const inbox = context.inbox;
  return context.joinable && context.steps === 1 ? () => inbox.length > 0 : undefined;
}

/** Counts requests that ended with nothing to keep (failed, or aborted: see the `lost` record). */
export function countLost(context: SessionContext, spent: RequestSpend | undefined): Partial<Pick<SessionContext, 'requests' | 'usage'>> {
  if (!spent) return {};
  context.fixed.recorder.lost(spent);
  return { requests: context.requests + spent.requests, usage: addUsage(context.usage, spent.usage) };
}

/** At rest: a log closed in this snapshot records that the session stopped there, not that it was cancelled. */
function atRest(snapshot: unknown): boolean {
  const s = snapshot as { value?: unknown; context?: SessionContext };
  return s.value === 'readyForUser' && s.context !== undefined && isQuiet(s.context) && s.context.pendingUser.length === 0;
}

/** The session's effects, made as it first needs them (none for a stand-in computing pure transitions). */
export function effectsFor(self: AnyActorRef, context: SessionContext): SessionEffects | undefined {
  return effectsOf(self, () => {
    const journal = context.options.journal;
    const { recorder, admitter } = context.fixed;
    return { recorder, atRest, onClose: () => admitter.leave(), ...(journal ? { barrier: () => journal.barrier() } : {}) };
  });
}

/** Starts the model request its budgets admitted (see src/session/sessionEffects.ts); it answers with `model.done` or `model.error`. */
export function requestModel({ context, self }: ActorArgs): void {
  const admission = context.fixed.admitter.take();
  if (!admission) return;
  context.options.budget.requestStarting(context.agent);
  effectsFor(self, context)?.requestModel(modelStepInput(context), lateResultsOf(context), admission);
}
