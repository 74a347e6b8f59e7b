import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { stringifyBounded } from '../engine/nesting.js';
import type { Queued, SqlExecutor } from './jobStore.js';
import type { PostgresConnection } from './postgresConnection.js';
import { RELEASE_SESSION } from './postgresLeases.js';
import type { JournalRow, RunOwner } from './runStore.js';
import { StoreError } from './storeError.js';

/**
 * One INSERT of the whole batch (one round trip, one transaction): a taken (run, seq) rolls all
 * of it back. Rows are bounded and redacted as the SQLite store writes them.
 */
export async function append(conn: PostgresConnection, rows: readonly JournalRow[]): Promise<void> {
  if (rows.length === 0) return;
  const columns = { runId: [] as string[], seq: [] as number[], session: [] as string[], ts: [] as number[], type: [] as string[], body: [] as string[] };
  for (const row of rows) {
    columns.runId.push(row.runId);
    columns.seq.push(row.seq);
    columns.session.push(row.session);
    columns.ts.push(row.ts);
    columns.type.push(row.record.type);
    columns.body.push(conn.redactor.json(stringifyBounded(row.record)));
  }
  const params = [columns.runId, columns.seq, columns.session, columns.ts, columns.type, columns.body];
  let attempts = 0;
  await conn.call(async () => {
    attempts++;
    try {
      await conn.pool.query(
        `INSERT INTO exarch.journal (run_id, seq, session, ts, type, body)
         SELECT * FROM unnest($1::text[], $2::int[], $3::text[], $4::bigint[], $5::text[], $6::text[])`,
        params,
      );
    } catch (error) {
      const conflict = conn.conflict(error, 'a journal row of this batch (run and seq)');
      // After a lost connection the first attempt may have committed: its own rows are no conflict.
      if (conflict instanceof StoreError && attempts > 1 && (await holdsExactly(conn, columns))) return;
      throw conflict;
    }
  });
}

/** Whether the journal already holds exactly these rows (a retried append that had committed). */
async function holdsExactly(conn: PostgresConnection, columns: { runId: string[]; seq: number[]; session: string[]; body: string[] }): Promise<boolean> {
  const { rows } = await conn.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM exarch.journal AS j
     JOIN unnest($1::text[], $2::int[], $3::text[], $4::text[]) AS w(run_id, seq, session, body)
     ON j.run_id = w.run_id AND j.seq = w.seq AND j.session = w.session AND j.body = w.body`,
    [columns.runId, columns.seq, columns.session, columns.body],
  );
  return rows[0]?.n === columns.seq.length;
}

/**
 * The run's records after `afterSeq`, in order: what a follower polls for, reading each record
 * once however long the run.
 */
export async function journalAfter(conn: PostgresConnection, runId: string, afterSeq: number): Promise<JournalRow[]> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: number; session: string; ts: string; body: string }>(
      'SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND seq > $2 ORDER BY seq',
      [runId, afterSeq],
    ),
  );
  return conn.journalRows(runId, rows);
}

/**
 * Appends rows of sessions that other processes append to as well (a run spread over workers):
 * the rows' own seq numbers are replaced by the next ones of their run, counted on the run's row
 * (whose lock is held to the commit), so seq order is commit order and a follower reading past its
 * last seq misses nothing. The rows may be of several runs (a worker's sessions committing
 * together, see src/workers/sharedCommits.ts): each run's rows keep their order. One statement,
 * or one transaction with what is written with it; a retry after a lost connection finds the rows
 * it wrote (by a key per call) rather than writing them twice. `also` writes in the same
 * transaction (the jobs these rows start, queued with pg-boss's `insert({ db })`): both are
 * committed, or neither. `releasing`: a session `owner` holds, let go of in the same transaction
 * (before the jobs that wake it can be taken).
 */
export async function appendShared(
  conn: PostgresConnection,
  rows: readonly JournalRow[],
  also?: (db: SqlExecutor) => Promise<unknown>,
  releasing?: { readonly session: string; readonly owner: RunOwner },
): Promise<void> {
  const first = rows[0];
  if (!first) return;
  if (releasing && rows.some((row) => row.runId !== first.runId)) throw new TypeError('exarch: appendShared releases a session of the one run it writes');
  const burst = randomUUID();
  const columns = { runId: [] as string[], session: [] as string[], ts: [] as number[], type: [] as string[], body: [] as string[] };
  for (const row of rows) {
    columns.runId.push(row.runId);
    columns.session.push(row.session);
    columns.ts.push(row.ts);
    columns.type.push(row.record.type);
    columns.body.push(conn.redactor.json(stringifyBounded(row.record)));
  }
  const runs = [...new Set(columns.runId)].sort();
  let attempts = 0;
  await conn.call(async () => {
    attempts++;
    if (attempts > 1) {
      const { rows: found } = await conn.pool.query('SELECT 1 FROM exarch.journal WHERE run_id = $1 AND session = $2 AND burst = $3 LIMIT 1', [
        first.runId,
        first.session,
        burst,
      ]);
      if (found.length > 0) return;
    }
    const params = [burst, columns.runId, columns.session, columns.ts, columns.type, columns.body];
    const insert = async (db: pg.Pool | pg.PoolClient): Promise<void> => {
      // Each run's row is its counter: its lock, held to the commit, orders the appends of one
      // run. The rows of each run are numbered in their order here (n), after its counter. The
      // runs' rows are locked in id order first: two workers writing groups of the same runs
      // took them in their plans' orders and deadlocked (four spread workers, bench:workers). A
      // run that is not there writes nothing of any run: no counter moves without its rows.
      const { rowCount } = await db.query(
        `WITH w AS (
           SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[], $5::text[], $6::text[]) WITH ORDINALITY AS w(run_id, session, ts, type, body, n)
         ), counts AS (
           SELECT run_id, count(*) AS k FROM w GROUP BY run_id
         ), locked AS (
           SELECT id FROM exarch.runs WHERE id IN (SELECT run_id FROM counts) ORDER BY id FOR UPDATE
         ), taken AS (
           UPDATE exarch.runs AS r SET next_seq = r.next_seq + counts.k FROM counts, locked
           WHERE r.id = counts.run_id AND locked.id = r.id AND (SELECT count(*) FROM locked) = (SELECT count(*) FROM counts)
           RETURNING r.id, r.next_seq - counts.k AS base
         )
         INSERT INTO exarch.journal (run_id, seq, session, ts, type, body, burst)
         SELECT w.run_id, taken.base + row_number() OVER (PARTITION BY w.run_id ORDER BY w.n), w.session, w.ts, w.type, w.body, $1
         FROM w JOIN taken ON taken.id = w.run_id`,
        params,
      );
      if (rowCount !== rows.length) throw new StoreError('unknown-run', conn.file, runs.length === 1 ? first.runId : `among ${runs.join(', ')}`);
    };
    // One statement, one round trip, unless something is to be written with it.
    const write = (): Promise<void> =>
      also || releasing
        ? conn.transaction(async (client) => {
            await insert(client);
            if (releasing) await client.query(RELEASE_SESSION, [first.runId, releasing.session, releasing.owner.token]);
            await also?.({ executeSql: (text, values) => client.query(text, values) });
          })
        : insert(conn.pool);
    try {
      await writeThroughDeadlocks(write);
    } catch (error) {
      if (!(error instanceof pg.DatabaseError && error.code === '23505')) throw error;
      // A counter is behind the journal (a resume here appended with numbers of its own): caught up, then again.
      await conn.pool.query(
        `UPDATE exarch.runs AS r SET next_seq = greatest(r.next_seq, (SELECT coalesce(max(seq), 0) FROM exarch.journal WHERE run_id = r.id))
         WHERE r.id = ANY($1::text[])`,
        [runs],
      );
      await writeThroughDeadlocks(write);
    }
  });
}

/**
 * Runs `write` again when the server broke a deadlock by rolling it back (whole: nothing of it was
 * written). The counters are locked in one order, but a commit's transaction also takes the
 * queue's and the sessions' rows, which other writers may hold in another order.
 */
async function writeThroughDeadlocks(write: () => Promise<void>): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await write();
      return;
    } catch (error) {
      if (!(error instanceof pg.DatabaseError && error.code === '40P01') || attempt >= DEADLOCK_ATTEMPTS) throw error;
    }
  }
}

const DEADLOCK_ATTEMPTS = 5;

/** `appendShared` with the jobs `queued` written through their queue's own `insert` in its transaction (`JobStore.commit`). */
export function commit(
  conn: PostgresConnection,
  rows: readonly JournalRow[],
  queued?: Queued,
  releasing?: { readonly session: string; readonly owner: RunOwner },
): Promise<void> {
  return appendShared(conn, rows, queued && ((db) => queued.queue.insert(queued.jobs, { db })), releasing);
}
