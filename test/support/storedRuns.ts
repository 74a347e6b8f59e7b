import pg from 'pg';

/**
 * What a test reads of a run in a PostgreSQL store, with its own connection and plain SQL: the
 * oracle does not go through the store code it checks.
 */

/** A query on the test's own connection. */
export async function query<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

export async function statusOf(db: string, id: string): Promise<string | undefined> {
  return (await query<{ status: string }>(db, `SELECT status FROM exarch.runs WHERE id = '${id}'`))[0]?.status;
}

/** The root's last assistant text, read from the journal. */
export async function rootAnswer(db: string, id: string): Promise<string> {
  const rows = await query<{ body: string }>(
    db,
    `SELECT body FROM exarch.journal WHERE run_id = '${id}' AND session = 'root' AND type = 'message' ORDER BY seq DESC`,
  );
  for (const { body } of rows) {
    const message = JSON.parse(body) as { role: string; content: { type: string; text?: string }[] };
    if (message.role === 'assistant')
      return message.content
        .filter((b) => b.type === 'text')
        .map((b) => b.text)
        .join('');
  }
  return '';
}

/** A journal row as the tests read it back, with a connection of their own. */
export interface JournalLine {
  readonly session: string;
  readonly type: string;
  readonly body: string;
}

/** A run's journal, in seq order. */
export function journalOf(url: string, runId: string): Promise<JournalLine[]> {
  return query<JournalLine & pg.QueryResultRow>(url, 'SELECT session, type, body FROM exarch.journal WHERE run_id = $1 ORDER BY seq', [runId]);
}
