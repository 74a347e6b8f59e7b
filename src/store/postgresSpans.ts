import type { PostgresConnection } from './postgresConnection.js';

/** Records the span a session's agent span was opened as (`traceparent`); the first one recorded stands. */
export async function recordSpan(conn: PostgresConnection, runId: string, session: string, traceparent: string): Promise<void> {
  await conn.call(() =>
    conn.pool.query(
      `INSERT INTO exarch.sessions (run_id, session, span) VALUES ($1, $2, $3)
       ON CONFLICT (run_id, session) DO UPDATE SET span = coalesce(exarch.sessions.span, EXCLUDED.span)`,
      [runId, session, traceparent],
    ),
  );
}

/** The spans recorded for these sessions (all of the run's without `sessions`), by session. */
export async function spansOf(conn: PostgresConnection, runId: string, sessions?: readonly string[]): Promise<Map<string, string>> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ session: string; span: string }>(
      sessions === undefined
        ? 'SELECT session, span FROM exarch.sessions WHERE run_id = $1 AND span IS NOT NULL'
        : 'SELECT session, span FROM exarch.sessions WHERE run_id = $1 AND session = ANY($2) AND span IS NOT NULL',
      sessions === undefined ? [runId] : [runId, sessions],
    ),
  );
  return new Map(rows.map((r) => [r.session, r.span]));
}
