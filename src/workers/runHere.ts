import { createActor, type AnyActorRef, type InspectionEvent } from 'xstate';
import { sessionMachine } from '../../machines/session.js';
import type { SessionInput } from '../../machines/sessionTypes.js';
import { stopOrphansOf } from '../../machines/crew.js';
import { childOptions, inheritOptions, resolveOptions, type ResolvedOptions } from '../session/options.js';
import type { RemoteChildren } from '../engine/remoteChildren.js';
import type { AgentResult } from '../engine/types.js';
import type { RestoredSession } from '../store/restoredSession.js';
import { RunJournal } from '../store/runJournal.js';
import type { JournalRow, RunRow, RunStatus } from '../store/runStore.js';
import type { RunJob, SpawnedSession } from './runQueue.js';
import { createRunObserver } from '../watch/observe/runObserver.js';
import { cancelAgent, findAgent } from '../engine/steering.js';
import { SessionHandedBack, type RunSessions, type SessionJobContext, type SessionJobEnd } from './jobContext.js';
import { settling, type Settling } from './parking.js';
import { jobsStartedBy, parentOf, requestCancel } from './spawnJobs.js';

/** How a session's run here left it: ended (with the run's status, for a root), parked waiting on sub-agents, or handed back. */
export interface LeftHere {
  readonly how: SessionJobEnd;
  readonly waitingOn: readonly string[];
  /** Whether a cancel asked of it was taken (a parked session that took one is not woken for it again). */
  readonly cancelTaken: boolean;
  /** The run's status, when the root ended. */
  readonly status?: RunStatus;
}

/**
 * Runs a session here from its restored state (none: from its task) until it ends, parks, or is
 * handed back. Its records are committed as they come, each burst with the jobs it starts
 * (`jobJournal`); what comes to it from elsewhere (results, cancels, messages) is looked for by the
 * worker's watch and, before it parks, once more (`settling`).
 */
export async function runHere(
  job: RunJob,
  row: RunRow,
  id: string,
  restore: RestoredSession | undefined,
  sessions: RunSessions,
  ctx: SessionJobContext,
  /** The last seq of the journal the session was restored from: messages after it are new to it. */
  seen: { seq: number },
): Promise<LeftHere> {
  const { store, boss } = ctx;
  const runId = row.id;
  const spawn = job.spawn;
  const keepsSubtree = spawn?.budget !== undefined;
  let storeFailure: Error | undefined;
  let settlement: Settling | undefined;
  const journal = jobJournal(ctx, sessions, job, runId, id, (error) => {
    storeFailure = error;
    settlement?.stop();
  });
  const abort = new AbortController();
  const remoteChildren: RemoteChildren = {
    start: (child, signal) =>
      ctx.watch.child(runId, child, signal, async (reason) => {
        await requestCancel(store, boss, runId, child.agent.id, reason);
        ctx.queued();
      }),
  };
  const runOptions = resolveOptions({ ...sessions.input, journal, remoteChildren });
  // Tools a person approved for the rest of the run, in any session: its calls of them wait for no one.
  if (sessions.input.approve !== undefined) runOptions.approvals.approveAlways((await store.look(runId, id, { approved: true })).approved);
  const input = sessionInputOf(runOptions, row, restore, spawn);
  // The host's run events come from an observer of this job's actors (each job is an actor system of its own).
  const observer = sessions.events ? createRunObserver() : undefined;
  if (sessions.events) observer?.subscribe(sessions.events);
  // The spans of this session (opened by an earlier job), of its parent and of a subtree kept here.
  if (sessions.events) await sessions.spans?.load([id, ...(id === 'root' ? [] : [parentOf(id)]), ...(keepsSubtree && restore ? subtreeOf(restore) : [])]);
  const hosts = [sessions.inspect, observer?.inspect].filter((f): f is (event: InspectionEvent) => void => f !== undefined);
  // A subtree kept here moves below the session without changing its snapshot: with calls that may
  // wait for a person, every change in the tree is a moment it may have come to rest.
  const watchTree = keepsSubtree && sessions.input.approve !== undefined;
  const inspect =
    hosts.length > 0 || watchTree
      ? (event: InspectionEvent): void => {
          for (const host of hosts) host(event);
          if (watchTree && event.type === '@xstate.snapshot') settlement?.moved();
        }
      : undefined;
  const actor = createActor(sessionMachine, { input, ...(inspect ? { inspect } : {}) });
  let handedBack = false;
  settlement = settling(actor, id, keepsSubtree, (live, approved) =>
    store.look(runId, id, { results: live, approved, messagesAfter: seen.seq, subtree: keepsSubtree }),
  );
  const { ended } = settlement;
  const untrack = ctx.track({
    result: ended.catch(() => undefined),
    interrupt: () => {
      handedBack = true;
      settlement?.stop();
    },
  });
  const takeMessages = async (): Promise<void> => {
    const { messages } = await store.look(runId, id, { messagesAfter: seen.seq, subtree: keepsSubtree });
    handMessages(actor, id, messages, seen);
  };
  let taking: Promise<void> = Promise.resolve();
  // A cancel asked before this job began is taken at once: the session must not park before it
  // sees it (the watch's first look may be a poll away).
  const askedBefore = (await store.look(runId, id, { cancel: true })).cancel;
  let cancelTaken = false;
  const cancel = (reason: string): void => {
    if (cancelTaken) return;
    cancelTaken = true;
    actor.send({ type: 'cancel', reason });
  };
  ctx.watch.steering(runId, id, abort.signal, {
    subtree: keepsSubtree,
    onCancel: (reason, session) => (session === id ? cancel(reason) : cancelAgent(actor, session, reason)),
    onMessages: () => {
      taking = taking.then(takeMessages).catch(() => undefined);
    },
  });
  let how: SessionJobEnd = 'handed-back';
  try {
    actor.start();
    if (askedBefore !== undefined) cancel(askedBefore);
    how = await ended;
  } catch {
    // The session's actor crashed: stopping it below records it failed (`stopOrphansOf` closes its
    // log), and that outcome wakes its parent.
    how = 'ended';
  } finally {
    abort.abort();
    untrack();
    // Parked or handed back, it is set down where its journal stands: its stop records nothing.
    if (how !== 'ended') journal.seal();
    actor.stop();
    stopOrphansOf(actor);
    // Sessions close their logs on the next microtasks; their last records go in the last burst.
    await new Promise((resolve) => setImmediate(resolve));
    await journal.flush();
  }
  if (storeFailure) throw storeFailure;
  if (how === 'handed-back' || handedBack) throw new SessionHandedBack(`session ${id} of run ${runId} handed back by a stopping worker`);
  const snapshot = actor.getSnapshot();
  if (how === 'ended') {
    const status = snapshot.status === 'done' && snapshot.output ? statusOf(snapshot.output) : snapshot.status === 'error' ? 'failed' : 'done';
    return { how, waitingOn: [], cancelTaken, status };
  }
  return { how, waitingOn: how === 'parked' ? [...snapshot.context.children.values()].map((child) => child.agent.id) : [], cancelTaken };
}

/**
 * Hands messages sent from elsewhere (steering: `queued` records, in the journal already) to the
 * session `id` that `actor` runs, or to one of the subtree it keeps here, without writing them
 * again, each once, in order; `seen` moves past each one handed over.
 *
 * Only while the session runs: the look may answer after it parked, was handed back or ended
 * (XState would drop the message, saying "sent to stopped actor"). Its messages then stay after
 * `seen`, where the look before parking finds them and wakes the session, whose next job restores
 * them from its journal. A message to one of the subtree that has ended is passed over: nothing
 * would read it (the steering line that sent it found it running).
 */
export function handMessages(actor: AnyActorRef, id: string, messages: readonly JournalRow[], seen: { seq: number }): void {
  for (const { seq, session, record } of messages) {
    if (seq <= seen.seq || record.type !== 'queued') continue;
    if (actor.getSnapshot().status !== 'active') return;
    seen.seq = seq;
    const target = session === id ? actor : findAgent(actor, session);
    target?.send({ type: 'user.message', text: record.text, journaled: true });
  }
}

/**
 * The session's journal: each burst of its records committed with the jobs it starts (a
 * sub-agent's first job for each `spawn`, its parent's wake for its `outcome`) in one transaction,
 * so a started sub-agent always has a job and no wake comes before the result it is for.
 */
function jobJournal(ctx: SessionJobContext, sessions: RunSessions, job: RunJob, runId: string, id: string, onFailure: (error: Error) => void): RunJournal {
  const { store, boss } = ctx;
  const keepsSubtree = job.spawn?.budget !== undefined;
  // The declared type this session's untyped sub-agents are bound by.
  const scope = job.spawn ? (job.spawn.profile ?? job.spawn.scope) : undefined;
  return new RunJournal(
    {
      append: async (rows) => {
        const jobs = jobsStartedBy(runId, id, keepsSubtree, scope, rows);
        if (jobs.length === 0) return store.commit(rows);
        // A sub-agent's job finds this session's span: written before the record that starts it.
        await sessions.spans?.written();
        await store.commit(rows, { queue: boss, jobs });
        ctx.queued();
      },
    },
    runId,
    1,
    onFailure,
  );
}

/** The session's input: the root's from the run, a sub-agent's from its job, bound as its parent's options bound it. */
function sessionInputOf(runOptions: ResolvedOptions, row: RunRow, restore: Parameters<typeof runHere>[3], spawn: SpawnedSession | undefined): SessionInput {
  if (!spawn) return inheritOptions(runOptions, restore ? { restore } : { task: row.task });
  const above = spawn.scope === undefined ? runOptions : childOptions(runOptions, spawn.scope);
  const options = childOptions(above, spawn.profile);
  const budget = spawn.budget === undefined ? {} : { subtreeBudget: spawn.budget };
  return inheritOptions(options, restore ? { agent: spawn.agent, restore, ...budget } : { agent: spawn.agent, task: spawn.task, ...budget });
}

/** The agent ids of a restored session's subtree (itself included). */
function subtreeOf(session: RestoredSession): string[] {
  return [session.agent.id, ...session.children.flatMap((child) => (child.restore ? subtreeOf(child.restore) : [child.agent.id]))];
}

export function statusOf(result: AgentResult): RunStatus {
  return result.outcome === 'capped' ? 'capped' : result.outcome === 'failed' ? 'failed' : result.outcome === 'cancelled' ? 'interrupted' : 'done';
}
