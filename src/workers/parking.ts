import type { createActor } from 'xstate';
import type { sessionMachine } from '../../machines/session.js';
import { blockedOnApprovals } from '../engine/approvals.js';
import type { SessionSnapshot } from '../run/runtime.js';
import type { RestoredSession } from '../store/restoredSession.js';

/** A session waiting in `wait_for_agents` for all its sub-agents, some still running. */
export function waitsForAll(session: RestoredSession): boolean {
  if (session.state !== 'waitingForAgents' || session.children.length === 0) return false;
  const wait = session.batch?.content.find((block) => block.type === 'tool_use' && block.name === 'wait_for_agents');
  return wait?.type === 'tool_use' && wait.input['until'] !== 'any';
}

/**
 * A session with nothing to do but wait for sub-agents that run elsewhere, or for a person to
 * answer its calls. One that keeps its subtree here (a budget) waits for sub-agents that run here:
 * it parks only once nothing in its subtree can move without a person.
 */
export function parkable(actor: SessionActor, keepsSubtree: boolean): boolean {
  if (keepsSubtree) return approvalsWait(actor) && blockedOnApprovals(actor);
  const snapshot = actor.getSnapshot();
  if (snapshot.status !== 'active') return false;
  if (snapshot.value === 'awaitingApproval') return true;
  const { context } = snapshot;
  if (context.children.size === 0) return false;
  if (snapshot.value === 'waitingForAgents') return true;
  if (snapshot.value !== 'readyForUser') return false;
  const turnInput = context.pendingUser.length > 0 || (context.inbox.length > 0 && context.options.wake === 'each');
  return !turnInput;
}

/** Whether a call of the session (or of its subtree here) waits for a person. */
export function approvalsWait(actor: SessionActor): boolean {
  return actor.getSnapshot().context.options.approvals.waiting().length > 0;
}

/** Approves the waiting calls of `tools` (approved `always` elsewhere in the run); true if there were any. */
export function takeApproved(actor: SessionActor, tools: ReadonlySet<string>): boolean {
  const desk = actor.getSnapshot().context.options.approvals;
  const calls = desk.waiting().filter((request) => tools.has(request.tool));
  desk.approveAlways(tools);
  for (const { callId } of calls) desk.respond({ callId, decision: 'approve' });
  return calls.length > 0;
}

export type SessionActor = ReturnType<typeof createActor<typeof sessionMachine>>;

/** The root at rest with nothing left: the run is done. */
export function atRest(snapshot: SessionSnapshot): boolean {
  const { context } = snapshot;
  return (
    snapshot.status === 'active' &&
    snapshot.value === 'readyForUser' &&
    context.children.size === 0 &&
    context.inbox.length === 0 &&
    context.pendingUser.length === 0
  );
}
