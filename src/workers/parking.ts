import type { createActor } from 'xstate';
import type { sessionMachine } from '../../machines/session.js';
import { blockedOnApprovals } from '../engine/approvals.js';
import type { SessionSnapshot } from '../run/runtime.js';
import type { Looked } from '../store/jobStore.js';
import type { RestoredSession } from '../store/restoredSession.js';
import type { SessionJobEnd } from './jobContext.js';

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
function parkable(actor: SessionActor, keepsSubtree: boolean): boolean {
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
function approvalsWait(actor: SessionActor): boolean {
  return actor.getSnapshot().context.options.approvals.waiting().length > 0;
}

/** Approves the waiting calls of `tools` (approved `always` elsewhere in the run); true if there were any. */
function takeApproved(actor: SessionActor, tools: ReadonlySet<string>): boolean {
  const desk = actor.getSnapshot().context.options.approvals;
  const calls = desk.waiting().filter((request) => tools.has(request.tool));
  desk.approveAlways(tools);
  for (const { callId } of calls) desk.respond({ callId, decision: 'approve' });
  return calls.length > 0;
}

type SessionActor = ReturnType<typeof createActor<typeof sessionMachine>>;

/** The root at rest with nothing left: the run is done. */
function atRest(snapshot: SessionSnapshot): boolean {
  const { context } = snapshot;
  return (
    snapshot.status === 'active' &&
    snapshot.value === 'readyForUser' &&
    context.children.size === 0 &&
    context.inbox.length === 0 &&
    context.pendingUser.length === 0
  );
}

/** How a session's run here comes to an end (`settling`). */
export interface Settling {
  /** Settles as the session ends, parks, or is stopped; rejects if its actor fails. */
  readonly ended: Promise<SessionJobEnd>;
  /** Sets it down now, as handed back (a stopping worker, a store that failed). */
  stop(): void;
  /** Something in a subtree kept here moved, which its own snapshot does not show: it may have come to rest. */
  moved(): void;
}

/**
 * Watches a session's actor until it ends (done, or the root at rest), or parks: once it is
 * parkable and has held so for a moment, and `news` (what came to it in the store: results of the
 * sub-agents still live, a message, tools approved elsewhere when a call waits) holds nothing for
 * it.
 */
export function settling(
  actor: SessionActor,
  id: string,
  keepsSubtree: boolean,
  news: (live: readonly string[], approvals: boolean) => Promise<Looked>,
): Settling {
  let stopNow = (): void => undefined;
  let treeMoved = (): void => undefined;
  const ended = new Promise<SessionJobEnd>((resolve, reject) => {
    let parkCheck: NodeJS.Timeout | undefined;
    let settledWith: SessionJobEnd | undefined;
    const settle = (how: SessionJobEnd): void => {
      if (settledWith) return;
      settledWith = how;
      clearTimeout(parkCheck);
      subscription.unsubscribe();
      resolve(how);
    };
    stopNow = () => settle('handed-back');
    const consider = (): void => {
      if (parkCheck || settledWith || !parkable(actor, keepsSubtree)) return;
      // Parks once the state has held for a moment: results that arrive together are taken first.
      const check = (afterMs: number): void => {
        parkCheck = setTimeout(() => {
          void (async () => {
            if (!parkable(actor, keepsSubtree) || settledWith) {
              parkCheck = undefined;
              return;
            }
            // A sub-agent that ended since the last poll: its result is on its way here; stay for
            // it, and look again later (a store that did not answer, likewise). A call of a tool
            // approved for the rest of the run elsewhere since this job began is taken as approved.
            // A message sent meanwhile is taken here first (the watch hands it over within a poll).
            const live = [...actor.getSnapshot().context.children.values()].map((child) => child.agent.id);
            const found = await news(live, approvalsWait(actor)).catch(() => undefined);
            if (settledWith) return;
            if (!found) return check(500);
            if (found.approved.size > 0 && takeApproved(actor, found.approved)) return check(500);
            if (found.results.length > 0 || found.messages.length > 0 || !parkable(actor, keepsSubtree)) return check(500);
            settle('parked');
          })();
        }, afterMs);
      };
      check(50);
    };
    treeMoved = consider;
    const subscription = actor.subscribe({
      next: (snapshot) => {
        if (snapshot.status === 'done') return settle('ended');
        if (id === 'root' && atRest(snapshot)) return settle('ended');
        consider();
      },
      error: (error) => reject(error),
    });
  });
  return { ended, stop: () => stopNow(), moved: () => treeMoved() };
}
