import { randomUUID } from 'node:crypto';
import type { Queued, SessionSignal, WatchedSession } from './jobStore.js';
import type { PostgresConnection } from './postgresConnection.js';
import { appendShared } from './postgresJournal.js';

/** A steering line taken this long ago and not answered was taken by a worker that died: another may take it. */
const COMMAND_STALE_MS = 30_000;

/**
 * Sends a steering line (`/cancel root/lead`, `/msg …`) to whichever worker runs the run; returns
 * its number, by which `answers` reports what the worker said. Lines wait while no worker holds
 * the run. Redacted as everything stored is. A retry after a lost connection finds the line it
 * sent (by its key) rather than sending it twice.
 */
export async function sendCommand(conn: PostgresConnection, runId: string, line: string): Promise<number> {
  const key = randomUUID();
  const text = conn.redactor.text(line);
  const { rows } = await conn.call(async () => {
    const inserted = await conn.pool.query<{ seq: string }>(
      'INSERT INTO exarch.commands (key, run_id, line, sent_at) VALUES ($1, $2, $3, $4) ON CONFLICT (key) DO NOTHING RETURNING seq',
      [key, runId, text, conn.now()],
    );
    return inserted.rows.length > 0 ? inserted : conn.pool.query<{ seq: string }>('SELECT seq FROM exarch.commands WHERE key = $1', [key]);
  });
  return Number(rows[0]?.seq);
}

/**
 * The run's unanswered steering lines, now taken by `taker`, in the order sent: those no one
 * took, those `taker` took before (an answer lost with a connection is asked for again), and
 * those another taker took more than `COMMAND_STALE_MS` ago and never answered (it died).
 */
export async function takeCommands(conn: PostgresConnection, runId: string, taker: string): Promise<{ readonly seq: number; readonly line: string }[]> {
  const now = conn.now();
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: string; line: string }>(
      `UPDATE exarch.commands SET taken_by = $2, taken_at = $3
       WHERE run_id = $1 AND answer IS NULL AND (taken_by IS NULL OR taken_by = $2 OR taken_at < $4)
       RETURNING seq, line`,
      [runId, taker, now, now - COMMAND_STALE_MS],
    ),
  );
  return rows.map((r) => ({ seq: Number(r.seq), line: r.line })).sort((a, b) => a.seq - b.seq);
}

/** What the worker said to a steering line. */
export async function answerCommand(conn: PostgresConnection, seq: number, answer: string): Promise<void> {
  await conn.call(() => conn.pool.query('UPDATE exarch.commands SET answer = $2 WHERE seq = $1', [seq, conn.redactor.text(answer)]));
}

/** Lets go of `taker`'s unanswered lines but `keep`: the next worker of the run takes them (a run handed back, say). */
export async function releaseCommands(conn: PostgresConnection, runId: string, taker: string, keep: readonly number[]): Promise<void> {
  await conn.call(() =>
    conn.pool.query(
      'UPDATE exarch.commands SET taken_by = NULL, taken_at = NULL WHERE run_id = $1 AND taken_by = $2 AND answer IS NULL AND NOT (seq = ANY($3))',
      [runId, taker, keep.map(String)],
    ),
  );
}

/** The answers given so far to the lines `seqs` (those not answered yet are left out). */
export async function answers(conn: PostgresConnection, seqs: readonly number[]): Promise<{ readonly seq: number; readonly answer: string }[]> {
  if (seqs.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: string; answer: string }>('SELECT seq, answer FROM exarch.commands WHERE seq = ANY($1) AND answer IS NOT NULL ORDER BY seq', [
      seqs.map(String),
    ]),
  );
  return rows.map((r) => ({ seq: Number(r.seq), answer: r.answer }));
}

/** Takes back the lines of `seqs` that no worker took (the run stopped first): none acts on them later. Returns how many. */
export async function withdrawCommands(conn: PostgresConnection, seqs: readonly number[]): Promise<number> {
  if (seqs.length === 0) return 0;
  const { rowCount } = await conn.call(() => conn.pool.query('DELETE FROM exarch.commands WHERE seq = ANY($1) AND taken_by IS NULL', [seqs.map(String)]));
  return rowCount ?? 0;
}

/** Asks that a session be cancelled, wherever it runs or next runs; the first reason stands. `queued` (its wake) in the same transaction. */
export async function requestCancel(conn: PostgresConnection, runId: string, session: string, reason: string, queued?: Queued): Promise<void> {
  await conn.call(() =>
    conn.transaction(async (client) => {
      await client.query(
        'INSERT INTO exarch.sessions (run_id, session, cancel) VALUES ($1, $2, $3) ON CONFLICT (run_id, session) DO UPDATE SET cancel = coalesce(exarch.sessions.cancel, $3)',
        [runId, session, conn.redactor.text(reason)],
      );
      await queued?.queue.insert(queued.jobs, { db: { executeSql: (text, values) => client.query(text, values) } });
    }),
  );
}

/**
 * Sends a user message to `session` of a spread run from elsewhere (a steering line): a `queued`
 * record in its journal, read by the job that runs it (`host`: itself, or the session that keeps
 * its subtree), which is told by `host`'s `message_seq`. `queued` (the wake of `host`) in the same
 * transaction: all of it is committed, or none.
 */
export async function sendMessage(conn: PostgresConnection, runId: string, session: string, host: string, text: string, queued?: Queued): Promise<void> {
  await appendShared(conn, [{ runId, seq: 0, session, ts: conn.now(), record: { type: 'queued', text } }], async (db) => {
    await db.executeSql(
      `INSERT INTO exarch.sessions (run_id, session, message_seq)
         VALUES ($1, $2, (SELECT max(seq) FROM exarch.journal WHERE run_id = $1 AND session = $3 AND type = 'queued'))
       ON CONFLICT (run_id, session) DO UPDATE SET message_seq = EXCLUDED.message_seq`,
      [runId, host, session],
    );
    await queued?.queue.insert(queued.jobs, { db });
  });
}

/**
 * What was asked from elsewhere of these sessions (of any runs; with `subtree`, of every session
 * below it too): a cancel (its reason), the seq of the last message sent. One statement for all
 * of them: the worker's watch asks it every fifth of a second for every session it runs.
 */
export async function sessionSignals(conn: PostgresConnection, sessions: readonly WatchedSession[]): Promise<SessionSignal[]> {
  if (sessions.length === 0) return [];
  const subtrees = sessions.filter((s) => s.subtree);
  const { rows } = await conn.call(() =>
    conn.pool.query<{ run_id: string; session: string; cancel: string | null; message_seq: number | null }>(
      // Each half looks sessions up by their key (run, id), or the run's sessions below a subtree's top.
      `SELECT s.run_id, s.session, s.cancel, s.message_seq FROM exarch.sessions AS s
         JOIN unnest($1::text[], $2::text[]) AS w(run_id, session) ON s.run_id = w.run_id AND s.session = w.session
         WHERE s.cancel IS NOT NULL OR s.message_seq IS NOT NULL
       UNION
       SELECT s.run_id, s.session, s.cancel, s.message_seq FROM exarch.sessions AS s
         JOIN unnest($3::text[], $4::text[]) AS t(run_id, top) ON s.run_id = t.run_id AND left(s.session, length(t.top) + 1) = t.top || '/'
         WHERE s.cancel IS NOT NULL OR s.message_seq IS NOT NULL`,
      [sessions.map((s) => s.runId), sessions.map((s) => s.session), subtrees.map((s) => s.runId), subtrees.map((s) => s.session)],
    ),
  );
  return rows.map((r) => ({
    runId: r.run_id,
    session: r.session,
    ...(r.cancel === null ? {} : { cancel: r.cancel }),
    ...(r.message_seq === null ? {} : { messageSeq: r.message_seq }),
  }));
}

/** The cancels asked of these sessions, by session. */
export async function cancelRequests(conn: PostgresConnection, runId: string, sessions: readonly string[]): Promise<Map<string, string>> {
  if (sessions.length === 0) return new Map();
  const { rows } = await conn.call(() =>
    conn.pool.query<{ session: string; cancel: string }>(
      'SELECT session, cancel FROM exarch.sessions WHERE run_id = $1 AND session = ANY($2) AND cancel IS NOT NULL',
      [runId, sessions],
    ),
  );
  return new Map(rows.map((r) => [r.session, r.cancel]));
}
