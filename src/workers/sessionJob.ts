import { randomUUID } from 'node:crypto';
import { RunError } from '../run/durableRun.js';
import { restoreAlone } from '../store/restoreRun.js';
import type { RunOwner, RunRow } from '../store/runStore.js';
import { RUN_QUEUE, type RunJob } from './runQueue.js';
import { SessionHeld, type SessionJobContext, type SessionJobEnd } from './jobContext.js';
import { waitsForAll } from './parking.js';
import { runHere, statusOf, type LeftHere } from './runHere.js';
import { spawnFromJournal } from './spawnJobs.js';

/**
 * Runs one session of a run whose sessions are jobs of their own, from where its journal left it,
 * until it ends or has nothing to do but wait for sub-agents running elsewhere; it then parks:
 * its actor stops, its claim is let go, its job is done, and the journal record that delivers a
 * sub-agent's result queues the job that wakes it (`jobsStartedBy`). Its sub-agents are started as jobs
 * the same way, in the transaction of the records that start them, so a started sub-agent always
 * has a job, and one whose parent crashed before the records were written never ran.
 *
 * A sub-agent given a budget runs its whole subtree here (a budget is kept in one process).
 */
export async function runSessionJob(offered: RunJob, jobId: string, row: RunRow, ctx: SessionJobContext): Promise<SessionJobEnd> {
  const { store, boss, leaseMs } = ctx;
  // A token per job: two slots of one worker never both hold a session (a holder may claim again).
  const owner: RunOwner = { ...ctx.owner, token: randomUUID() };
  const runId = row.id;
  const id = offered.session ?? 'root';
  const claim = await store.claimSession(runId, id, owner, leaseMs, jobId);
  if (!claim.ok) {
    const held = `session ${id} of run ${runId} is being run by process ${claim.holder.pid} on ${claim.holder.host}`;
    // This very job again (it expired under its holder, which may have died on another host):
    // offered again until the holder ends or its lease runs out. Any other job (a wake, a cancel)
    // is left to the holder, which looks for results once more as it lets go.
    if (claim.job === jobId) throw new SessionHeld(held, runId);
    throw new RunError(held, 'held', runId);
  }
  const letGo = ctx.leases.hold(runId, id, owner.token);
  let released = false;
  try {
    // A wake carries no spawn: what started the session is in its ancestors' journals.
    const spawn = offered.spawn ?? (id === 'root' ? undefined : await spawnFromJournal(store, runId, id));
    const job: RunJob = spawn ? { ...offered, spawn } : offered;
    // A session with a budget keeps its subtree here: it is restored with it, as a resume restores a tree.
    const keepsSubtree = job.spawn?.budget !== undefined;
    const read = await store.readSession(runId, id, { subtree: keepsSubtree });
    const restored = restoreAlone(read.rows, id);
    // Every record it is restored from, messages included: a message after these is new to it.
    const seen = { seq: read.lastSeq };
    if (restored.kind === 'ended') {
      // Ended before (its outcome's commit queued its parent's wake): only a root's run is left to close.
      if (id === 'root') await store.endRun(runId, statusOf(restored.result));
      return 'ended';
    }
    if (id !== 'root' && !job.spawn && restored.kind === 'empty') throw new Error(`exarch: session ${id} of run ${runId} has no records and no spawn`);
    let left: LeftHere;
    if (
      !keepsSubtree &&
      restored.kind === 'resumable' &&
      waitsForAll(restored.session) &&
      (await store.look(runId, id, { cancel: true })).cancel === undefined
    ) {
      // Woken by one result while it waits for them all: nothing for it to do yet; the results wait in
      // the journal and are taken together once the last one is there (no actor made, nothing written).
      // (Not so for a subtree kept here: its sub-agents run here, and it was woken for one of them.)
      left = { how: 'parked', waitingOn: restored.session.children.map((child) => child.agent.id), cancelTaken: false };
    } else {
      const sessions = await ctx.acquire(row);
      try {
        left = await runHere(job, row, id, restored.kind === 'resumable' ? restored.session : undefined, sessions, ctx, seen);
      } finally {
        ctx.release(row);
      }
    }
    if (left.how === 'ended' && id === 'root') await store.endRun(runId, left.status ?? 'done');
    if (left.how === 'parked') {
      letGo();
      await store.releaseSession(runId, id, owner);
      released = true;
      // A wake that came while this job held the session was dropped (see the worker): a result or
      // a cancel that arrived between the last look and the release is looked for once more, now
      // that a new wake would find the session free.
      const found = await store.look(runId, id, { results: left.waitingOn, cancel: true, messagesAfter: seen.seq, subtree: keepsSubtree });
      if (found.results.length > 0 || (found.cancel !== undefined && !left.cancelTaken) || found.messages.length > 0) {
        await boss.send(RUN_QUEUE, { runId, session: id } satisfies RunJob);
        ctx.queued();
      }
    }
    return left.how;
  } finally {
    letGo();
    // A parked session was let go of before its last look: once is enough (a statement per park).
    if (!released) await store.releaseSession(runId, id, owner).catch(() => undefined);
  }
}
