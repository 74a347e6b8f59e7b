import type { Look, Looked, SessionRecords, SessionRef } from './jobStore.js';
import type { PostgresConnection } from './postgresConnection.js';
import { cancelRequests } from './postgresSteering.js';
import { liveChildrenOf } from './restoreRun.js';
import { RUN_QUEUE } from './postgresSchema.js';
import type { JournalRow } from './runStore.js';

/**
 * One session's records, in order; with `subtree`, those of every session below it too (ids are
 * paths: `root/lead/reader`).
 */
export async function sessionJournal(
  conn: PostgresConnection,
  runId: string,
  session: string,
  options: { readonly subtree?: boolean } = {},
): Promise<JournalRow[]> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: number; session: string; ts: string; body: string }>(
      options.subtree
        ? "SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND (session = $2 OR left(session, length($2) + 1) = $2 || '/') ORDER BY seq"
        : 'SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND session = $2 ORDER BY seq',
      [runId, session],
    ),
  );
  return conn.journalRows(runId, rows);
}

/** The sub-agents of a run started and not ended (`spawn` records without an `outcome`), in the order they were started. */
export async function liveSubAgents(conn: PostgresConnection, runId: string): Promise<string[]> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ id: string }>(
      `SELECT s.body::jsonb ->> 'id' AS id FROM exarch.journal AS s WHERE s.run_id = $1 AND s.type = 'spawn'
         AND NOT EXISTS (SELECT 1 FROM exarch.journal AS o WHERE o.run_id = $1 AND o.session = s.body::jsonb ->> 'id' AND o.type = 'outcome')
       ORDER BY s.seq`,
      [runId],
    ),
  );
  return rows.map((r) => r.id);
}

/** Whether a session has begun (its `session` record is in the journal). */
export async function hasBegun(conn: PostgresConnection, runId: string, session: string): Promise<boolean> {
  const { rows } = await conn.call(() =>
    conn.pool.query("SELECT 1 FROM exarch.journal WHERE run_id = $1 AND session = $2 AND type = 'session' LIMIT 1", [runId, session]),
  );
  return rows.length > 0;
}

/** The `queued` records (user messages) of a session, with `subtree` of every session below it too, after seq `after`. */
export async function queuedAfter(
  conn: PostgresConnection,
  runId: string,
  session: string,
  after: number,
  options: { readonly subtree?: boolean } = {},
): Promise<JournalRow[]> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: number; session: string; ts: string; body: string }>(
      options.subtree
        ? "SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND (session = $2 OR left(session, length($2) + 1) = $2 || '/') AND type = 'queued' AND seq > $3 ORDER BY seq"
        : "SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND session = $2 AND type = 'queued' AND seq > $3 ORDER BY seq",
      [runId, session, after],
    ),
  );
  return conn.journalRows(runId, rows);
}

/** The `spawn` records that started these sessions (each in its parent's journal), in order. */
export async function spawnsOf(conn: PostgresConnection, runId: string, sessions: readonly string[]): Promise<JournalRow[]> {
  if (sessions.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: number; session: string; ts: string; body: string }>(
      "SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND type = 'spawn' AND body::jsonb ->> 'id' = ANY($2) ORDER BY seq",
      [runId, sessions],
    ),
  );
  return conn.journalRows(runId, rows);
}

/** Sessions of one run, as `outcomes` takes them. */
const ofRun = (runId: string, sessions: readonly string[]): SessionRef[] => sessions.map((session) => ({ runId, session }));

/**
 * The `outcome` records of those of `sessions` (of any runs) that ended, in seq order within each
 * run. One statement for all of them: the worker's watch asks it every fifth of a second.
 */
export async function outcomes(conn: PostgresConnection, sessions: readonly SessionRef[]): Promise<JournalRow[]> {
  if (sessions.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ run_id: string; seq: number; session: string; ts: string; body: string }>(
      `SELECT j.run_id, j.seq, j.session, j.ts, j.body FROM exarch.journal AS j
         JOIN unnest($1::text[], $2::text[]) AS w(run_id, session) ON j.run_id = w.run_id AND j.session = w.session
         WHERE j.type = 'outcome' ORDER BY j.run_id, j.seq`,
      [sessions.map((s) => s.runId), sessions.map((s) => s.session)],
    ),
  );
  const byRun = new Map<string, typeof rows>();
  for (const row of rows) {
    const ofRun = byRun.get(row.run_id);
    if (ofRun) ofRun.push(row);
    else byRun.set(row.run_id, [row]);
  }
  return [...byRun].flatMap(([runId, ofRun]) => conn.journalRows(runId, ofRun));
}

/**
 * Whether nothing in a spread run can move until a person answers (its status `waiting`, as a
 * whole run stops as `waiting`): a call waits for approval (a session's last `awaiting` record
 * was followed by no `dispatching` and no `outcome`), no session is held by a live worker, and no
 * job of the run is queued or running in pg-boss's table on this server.
 */
export async function spreadWaiting(conn: PostgresConnection, runId: string): Promise<boolean> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ waiting: boolean }>(
      `SELECT EXISTS (
           SELECT 1 FROM exarch.journal AS a WHERE a.run_id = $1 AND a.type = 'awaiting' AND NOT EXISTS (
             SELECT 1 FROM exarch.journal AS b WHERE b.run_id = $1 AND b.session = a.session AND b.seq > a.seq AND b.type IN ('dispatching', 'outcome')))
         AND NOT EXISTS (SELECT 1 FROM exarch.sessions AS s WHERE s.run_id = $1 AND s.owner_token IS NOT NULL AND s.lease_until > $2)
         AND NOT EXISTS (SELECT 1 FROM pgboss.job AS q WHERE q.name = $3 AND q.state < 'completed' AND q.data ->> 'runId' = $1) AS waiting`,
      [runId, conn.now(), RUN_QUEUE],
    ),
  );
  return rows[0]?.waiting === true;
}

/** The tools a person approved for the rest of a run (`always`), in any session's journal. */
export async function approvedAlways(conn: PostgresConnection, runId: string): Promise<Set<string>> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ tool: string }>(
      "SELECT DISTINCT body::jsonb ->> 'tool' AS tool FROM exarch.journal WHERE run_id = $1 AND type = 'approval' AND body::jsonb ->> 'decision' = 'always'",
      [runId],
    ),
  );
  return new Set(rows.map((r) => r.tool));
}

/**
 * What a session is restored from (`JobStore.readSession`): its records, with `subtree` those of
 * every session below it too, and (when it keeps no subtree) the `outcome` records of its
 * sub-agents started and not yet delivered to it: results that came while it was parked.
 */
export async function readSession(conn: PostgresConnection, runId: string, session: string, options: { readonly subtree: boolean }): Promise<SessionRecords> {
  const rows = await sessionJournal(conn, runId, session, { subtree: options.subtree });
  const own = rows.filter((r) => r.session === session).map((r) => r.record);
  const delivered = options.subtree ? [] : await outcomes(conn, ofRun(runId, liveChildrenOf(own)));
  return { rows: [...rows, ...delivered].sort((a, b) => a.seq - b.seq), lastSeq: rows.at(-1)?.seq ?? 0 };
}

/** What came to a session from elsewhere (`JobStore.look`): each part asked, in parallel; a part not asked is empty. */
export async function look(conn: PostgresConnection, runId: string, session: string, asked: Look): Promise<Looked> {
  const [results, cancels, messages, approved] = await Promise.all([
    outcomes(conn, ofRun(runId, asked.results ?? [])),
    asked.cancel === true ? cancelRequests(conn, runId, [session]) : undefined,
    asked.messagesAfter === undefined ? [] : queuedAfter(conn, runId, session, asked.messagesAfter, { subtree: asked.subtree === true }),
    asked.approved === true ? approvedAlways(conn, runId) : new Set<string>(),
  ]);
  return { results, cancel: cancels?.get(session), messages, approved };
}
