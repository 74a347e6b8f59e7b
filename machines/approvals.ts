import { denialMessage } from '../src/engine/approvals.js';
import { errorResult } from '../src/tools/toolbox.js';
import type { ActorArgs, SessionContext, SessionArgs } from './sessionTypes.js';

// The session chart's approval actions: calls that wait for a person go to the tree's desk, and its
// answers come back.

/** Why the session runs: its first user message (a sub-agent's holds its task verbatim; the root's is the run's task). */
function taskOf(context: SessionContext): string {
  const first = context.messages.find((message) => message.role === 'user');
  if (!first) return '';
  return first.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/**
 * Entering `awaitingApproval`: the waiting calls are journaled (a resume waits on) and go to the
 * tree's desk, which tells the host. (A resumed call of a tool approved `always` meanwhile was
 * approved by `resumedBatch`.)
 */
export function requestApprovals({ context, self }: ActorArgs): void {
  const batch = context.batch;
  if (!batch || batch.awaiting.size === 0) return;
  const desk = context.options.approvals;
  context.fixed.recorder.note({ type: 'awaiting', calls: [...batch.awaiting.keys()] });
  const task = taskOf(context);
  for (const [callId, call] of batch.awaiting)
    desk.request({ type: 'approval.requested', callId, tool: call.tool, input: call.input, agent: context.agent, task }, self);
}

/** A person answered one waiting call: a denial is its `is_error` result; an approval lets it run. */
export function answerApproval({ context, event }: SessionArgs): void {
  if (event.type !== 'approval.answer') return;
  const call = context.batch?.awaiting.get(event.callId);
  if (!context.batch || !call) return;
  context.batch.awaiting.delete(event.callId);
  context.options.approvals.settle(event.callId);
  const reason = event.reason === undefined ? {} : { reason: event.reason };
  context.fixed.recorder.note({ type: 'approval', callId: event.callId, tool: call.tool, decision: event.decision, ...reason });
  if (event.decision === 'deny') context.batch.results.set(event.callId, errorResult(event.callId, denialMessage(call.tool, event.reason)));
}

/** Leaving `awaitingApproval` other than by its answers (a cancel): the desk stops offering its calls. */
export function withdrawApprovals({ context }: SessionArgs): void {
  for (const callId of context.batch?.awaiting.keys() ?? []) context.options.approvals.settle(callId);
}
