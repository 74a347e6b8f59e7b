import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type PgBoss from 'pg-boss';
import type { ApprovalAnswer } from '../engine/approvals.js';
import { RunError } from '../run/durableRun.js';
import { openPostgresStore, type PostgresRunStore } from '../store/postgresStore.js';
import { answering, waitingCallsIn, type WaitingCall } from '../store/runApprovals.js';
import type { JournalRow, RunOwner } from '../store/runStore.js';
import { RUN_QUEUE, startBoss, type RunJob } from './runQueue.js';

/** How long an answer waits for the session that asked to park (it parks within a moment of asking). */
const HELD_WAIT_MS = 5_000;

/**
 * Records a person's answer to a call of a spread run (`exarch approve|deny --db`), and queues the
 * job that wakes the session holding it, in one transaction: the session, parked while it waited,
 * is taken up by a worker with the answer in its journal. An `always` also wakes the sessions with
 * calls of the same tool waiting: they take them as approved. Throws `RunError` for an unknown or
 * ended run, a call that does not wait, or a session a worker still holds after a few seconds.
 *
 * @example
 * ```ts
 * const call = await recordSpreadApproval(store, boss, runId, { callId: 'toolu_01…', decision: 'approve' });
 * ```
 */
export async function recordSpreadApproval(store: PostgresRunStore, boss: PgBoss, runId: string, answer: ApprovalAnswer): Promise<WaitingCall> {
  const row = await store.getRun(runId);
  if (!row) throw new RunError(`no run with id ${runId}`, 'unknown-run', runId);
  const first = await store.journal(runId);
  const host = jobSessionOf(answering(waitingCallsIn(first, row.task), runId, answer).call.agent, first);
  const owner: RunOwner = { host: hostname(), pid: process.pid, token: `approval-${randomUUID()}` };
  // The session must be parked: a worker that holds it would not read an answer written meanwhile.
  const end = Date.now() + HELD_WAIT_MS;
  for (;;) {
    const claim = await store.claimSession(runId, host, owner, HELD_WAIT_MS * 2);
    if (claim.ok) break;
    if (Date.now() > end)
      throw new RunError(
        `session ${host} of run ${runId} is being run by process ${claim.holder.pid} on ${claim.holder.host}; answer once it waits`,
        'held',
        runId,
      );
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  let answered = false;
  try {
    // Read again under the claim: the journal as the session will be taken up from it.
    const rows = await store.journal(runId);
    const waiting = waitingCallsIn(rows, row.task);
    const { call, record } = answering(waiting, runId, answer);
    const woken = new Set([host]);
    if (answer.decision === 'always') for (const other of waiting) if (other.tool === call.tool) woken.add(jobSessionOf(other.agent, rows));
    const jobs = [...woken].map((session) => ({ name: RUN_QUEUE, data: { runId, session } satisfies RunJob }));
    await store.commit(
      [{ runId, seq: 0, session: call.agent, ts: Date.now(), record }],
      { queue: boss, jobs },
      // Let go of with the jobs' commit: a wake taken at once finds the session free.
      { session: host, owner },
    );
    answered = true;
    return call;
  } finally {
    await store.releaseSession(runId, host, owner).catch(() => undefined);
    // A sub-agent's result that woke the session while it was claimed here found it held, and its
    // wake was dropped: with no answer to wake it, it is woken once to look (it parks again if nothing came).
    if (!answered) await boss.send(RUN_QUEUE, { runId, session: host } satisfies RunJob).catch(() => undefined);
  }
}

/**
 * The session whose job runs `agent`: itself, unless an ancestor was given a budget, whose job
 * then runs its whole subtree (the topmost such ancestor).
 */
export function jobSessionOf(agent: string, rows: readonly JournalRow[]): string {
  const budgeted = new Set<string>();
  for (const { record } of rows) if (record.type === 'spawn' && record.budget !== undefined) budgeted.add(record.id);
  const parts = agent.split('/');
  for (let depth = 2; depth < parts.length; depth++) {
    const ancestor = parts.slice(0, depth).join('/');
    if (budgeted.has(ancestor)) return ancestor;
  }
  return agent;
}

/** `recordSpreadApproval` from a command that has no store or queue of its own open (`exarch approve --db`, a follower asking at its terminal). */
export async function recordSpreadApprovalAt(url: string, runId: string, answer: ApprovalAnswer): Promise<WaitingCall> {
  const store = openPostgresStore(url);
  try {
    const boss = await startBoss(url);
    try {
      return await recordSpreadApproval(store, boss, runId, answer);
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
  } finally {
    await store.close();
  }
}
