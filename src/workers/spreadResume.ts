import type PgBoss from 'pg-boss';
import { RunError } from '../run/durableRun.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import { RUN_QUEUE, type RunJob } from './runQueue.js';
import { jobSessionOf } from './spreadApprovals.js';

/**
 * Queues again every session of a spread run that has not ended, each as its own wake (what
 * `exarch resume RUN_ID --db` does for such a run): one whose job was lost or gave up (a worker
 * that refused it, a job that ran out of retries) is taken up by the next free worker, from its
 * journal. A session still held is left to its holder (its wake is dropped there); one parked
 * with nothing new parks again. Sessions inside a budgeted subtree are woken through the session
 * that keeps them. Returns the sessions queued, root first; throws `RunError` for an unknown run.
 */
export async function requeueSpreadRun(store: PostgresRunStore, boss: PgBoss, runId: string): Promise<string[]> {
  const row = await store.getRun(runId);
  if (!row) throw new RunError(`no run with id ${runId}`, 'unknown-run', runId);
  const rows = await store.journal(runId);
  const started = new Set<string>(['root']);
  const ended = new Set<string>();
  for (const { session, record } of rows) {
    if (record.type === 'spawn') started.add(record.id);
    else if (record.type === 'outcome') ended.add(session);
  }
  const sessions = [...new Set([...started].filter((id) => !ended.has(id)).map((id) => jobSessionOf(id, rows)))].filter((id) => !ended.has(id));
  if (sessions.length > 0) await boss.insert(sessions.map((session) => ({ name: RUN_QUEUE, data: { runId, session } satisfies RunJob })));
  return sessions;
}
