import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { stringifyBounded } from '../engine/nesting.js';
import { Redactor } from '../engine/redact.js';
import { mayClaim, reportedStatus, type StoreOptions } from './memoryStore.js';
import { redactUrl, urlSecrets } from '../engine/urlSecrets.js';
import { StoreError } from './storeError.js';
import { MAX_OPTIONS_CHARS, parseJson, readJournalRow, readRunColumns, readTotals, unreadableRun, type RunColumns as StoredRunColumns } from './storedRun.js';
import type { ClaimResult, JournalRow, NewRun, RunListing, RunOwner, RunRow, RunStatus, RunStore } from './runStore.js';

/**
 * Schema steps by the version they lead to, each run once, all pending ones in one transaction
 * (under an advisory lock, so two processes starting on an empty database do not both migrate).
 * Never edit a released step: add the next one. Everything lives in the `exarch` schema, so a
 * database shared with an application (or with pg-boss, which keeps to `pgboss`) is left alone.
 *
 * `journal` is one row per record keyed by (run, seq): concurrent writers (workers appending for
 * different sessions of one run) collide on the key, which Postgres checks for us; SQLite's
 * one-row-per-burst layout would need a range check under a lock. `body` is the record's JSON as
 * text, not jsonb: jsonb refuses `\u0000` and lone surrogate escapes that a model may send, and a
 * resume reads the text back as written.
 */
const MIGRATIONS: Readonly<Record<number, string>> = {
  1: `
    CREATE TABLE exarch.runs (
      id TEXT PRIMARY KEY,
      task TEXT NOT NULL,
      cwd TEXT NOT NULL,
      options TEXT NOT NULL,
      started_at BIGINT NOT NULL,
      status TEXT NOT NULL,
      owner_host TEXT,
      owner_pid INTEGER,
      owner_token TEXT,
      lease_until BIGINT NOT NULL DEFAULT 0,
      ended_at BIGINT,
      agents INTEGER,
      requests INTEGER,
      input_tokens BIGINT,
      output_tokens BIGINT,
      cache_creation_input_tokens BIGINT,
      cache_read_input_tokens BIGINT
    );
    CREATE INDEX runs_listed ON exarch.runs (started_at DESC, id DESC);
    CREATE TABLE exarch.journal (
      run_id TEXT NOT NULL,
      seq INTEGER NOT NULL,
      session TEXT NOT NULL,
      ts BIGINT NOT NULL,
      type TEXT NOT NULL,
      body TEXT NOT NULL,
      PRIMARY KEY (run_id, seq)
    );
  `,
  // Steering lines for a run its worker holds (`exarch run --db --steer`): sent by a follower,
  // taken and answered by the worker that runs the run.
  2: `
    CREATE TABLE exarch.commands (
      seq BIGSERIAL PRIMARY KEY,
      key TEXT NOT NULL UNIQUE,
      run_id TEXT NOT NULL,
      line TEXT NOT NULL,
      sent_at BIGINT NOT NULL,
      taken_by TEXT,
      taken_at BIGINT,
      answer TEXT
    );
    CREATE INDEX commands_open ON exarch.commands (run_id) WHERE answer IS NULL;
  `,
  // Sessions as jobs of their own (src/workers/sessionJob.ts): several workers append to one run's
  // journal, each reads back one session's records; a session is held by one worker at a time
  // (its claim and lease), and a cancel is asked of a session wherever it runs. `burst` tells a
  // retried append that had committed from a new one.
  3: `
    ALTER TABLE exarch.runs ADD COLUMN next_seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE exarch.journal ADD COLUMN burst TEXT;
    CREATE INDEX journal_sessions ON exarch.journal (run_id, session, seq);
    CREATE TABLE exarch.sessions (
      run_id TEXT NOT NULL,
      session TEXT NOT NULL,
      owner_host TEXT,
      owner_pid INTEGER,
      owner_token TEXT,
      lease_until BIGINT NOT NULL DEFAULT 0,
      cancel TEXT,
      job TEXT,
      PRIMARY KEY (run_id, session)
    );
  `,
  // The span each session's OpenTelemetry agent span was opened as (a W3C traceparent, then its start), so that a
  // session's sub-agents and its later jobs, on any worker, continue the same trace under it.
  // And the seq of the last user message sent to a session from elsewhere (a steering line), so
  // that the job running it looks for messages only when there are some.
  4: `
    ALTER TABLE exarch.sessions ADD COLUMN span TEXT;
    ALTER TABLE exarch.sessions ADD COLUMN message_seq INTEGER;
  `,
};

/** The pg-boss queue every exarch worker takes runs from (its jobs share this server with the store). */
export const RUN_QUEUE = 'exarch-runs';

/** The newest schema this exarch reads and writes. */
export const POSTGRES_SCHEMA_VERSION = Math.max(...Object.keys(MIGRATIONS).map(Number));

/** Held while migrating: any constant of ours ('EXAR'), shared by every exarch process. */
const MIGRATION_LOCK = 0x45584152;

/** A run's totals, summed from its journal by the server (as `requestSpend` counts one record: kept requests and `lost` ones). */
const TOTALS = `
  count(*) FILTER (WHERE j.type = 'session')::int AS agents,
  coalesce(sum(CASE j.type WHEN 'usage' THEN coalesce((j.body::jsonb #>> '{requests}')::int, 1) WHEN 'lost' THEN (j.body::jsonb #>> '{requests}')::int END), 0)::int AS requests,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,inputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,inputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,inputTokens}')::bigint END), 0)::bigint AS input_tokens,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,outputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,outputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,outputTokens}')::bigint END), 0)::bigint AS output_tokens,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,cacheCreationInputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,cacheCreationInputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,cacheCreationInputTokens}')::bigint END), 0)::bigint AS cache_creation_input_tokens,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,cacheReadInputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,cacheReadInputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,cacheReadInputTokens}')::bigint END), 0)::bigint AS cache_read_input_tokens`;

/** The rest of an UPDATE of `runs AS r` that lets go of a run (`$1`) and writes its totals, summed from its journal. */
const LET_GO_WITH_TOTALS = `owner_host = NULL, owner_pid = NULL, owner_token = NULL, lease_until = 0,
  agents = t.agents, requests = t.requests, input_tokens = t.input_tokens, output_tokens = t.output_tokens,
  cache_creation_input_tokens = t.cache_creation_input_tokens, cache_read_input_tokens = t.cache_read_input_tokens
  FROM (SELECT ${TOTALS} FROM exarch.journal AS j WHERE j.run_id = $1) AS t`;

/**
 * A run's columns (of `runs AS r`), `options` left out (null) past MAX_OPTIONS_CHARS: a value that
 * large is no run's, and is not read into memory to be refused.
 */
const RUN_COLUMNS = `r.id, r.task, r.cwd, CASE WHEN length(r.options) > ${MAX_OPTIONS_CHARS} THEN NULL ELSE r.options END AS options,
  length(r.options) AS options_chars, r.started_at, r.status, r.owner_host, r.owner_pid, r.owner_token, r.lease_until, r.ended_at`;

/** Released runs carry their totals; the others are summed from their journal, by key. */
const LIST_RUNS = `
  SELECT ${RUN_COLUMNS},
    coalesce(r.agents, t.agents) AS agents, coalesce(r.requests, t.requests) AS requests,
    coalesce(r.input_tokens, t.input_tokens) AS input_tokens, coalesce(r.output_tokens, t.output_tokens) AS output_tokens,
    coalesce(r.cache_creation_input_tokens, t.cache_creation_input_tokens) AS cache_creation_input_tokens,
    coalesce(r.cache_read_input_tokens, t.cache_read_input_tokens) AS cache_read_input_tokens
  FROM exarch.runs AS r
  LEFT JOIN LATERAL (SELECT ${TOTALS} FROM exarch.journal AS j WHERE j.run_id = r.id AND r.agents IS NULL) AS t ON true
  ORDER BY r.started_at DESC, r.id DESC`;

/** LIST_RUNS without the totals summed from journals: when one of them cannot be summed, each run's are asked for apart. */
const LIST_RUN_ROWS = `
  SELECT ${RUN_COLUMNS}, r.agents, r.requests, r.input_tokens, r.output_tokens, r.cache_creation_input_tokens, r.cache_read_input_tokens
  FROM exarch.runs AS r ORDER BY r.started_at DESC, r.id DESC`;

/** A `runs` row as pg returns it (BIGINT comes back as a string: parsed in `toRunRow`). */
interface RunColumns {
  readonly id: string;
  readonly task: string;
  readonly cwd: string;
  readonly options: string;
  readonly started_at: string;
  readonly status: string;
  readonly owner_host: string | null;
  readonly owner_pid: number | null;
  readonly owner_token: string | null;
  readonly lease_until: string;
  readonly ended_at: string | null;
}

interface TotalsColumns {
  readonly agents: number;
  readonly requests: number;
  readonly input_tokens: string;
  readonly output_tokens: string;
  readonly cache_creation_input_tokens: string;
  readonly cache_read_input_tokens: string;
}

function ownerOf(r: Pick<RunColumns, 'owner_host' | 'owner_pid' | 'owner_token'>): RunOwner | null {
  return r.owner_token === null ? null : { host: r.owner_host ?? '', pid: r.owner_pid ?? 0, token: r.owner_token };
}

/** Options of a Postgres store besides the clock and redactor both stores take. */
export interface PostgresStoreOptions extends StoreOptions {
  /** Connections kept open (default 4). */
  readonly poolSize?: number;
  /**
   * How long a call keeps retrying while the server cannot be reached (a restart, a failover)
   * before it fails; default 60 s. 0: fail at once. The first use is never retried.
   */
  readonly reconnectMs?: number;
}

/** Error codes that mean the connection, not the statement, failed: the call is tried again. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** Whether `error` is a lost or refused connection (the server restarting), not a refusal of the statement. */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(error.message);
}

/**
 * A store's way to its server: the pool; the schema made or checked once, before any statement;
 * statements tried again while the server cannot be reached; transactions on one client; and what
 * pg's errors mean to a store. Each concern of the store (its runs, journal, leases, steering, spans,
 * the queries of its workers) writes its SQL through it.
 */
export class PostgresConnection {
  /** The URL without its secrets (`redactUrl`): what messages name. */
  readonly file: string;
  readonly pool: pg.Pool;
  readonly now: () => number;
  readonly redactor: Redactor;
  private readonly reconnectMs: number;
  private ready: Promise<void> | undefined;
  private closed = false;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.file = redactUrl(url);
    this.now = options.now ?? Date.now;
    // The URL's own secrets too: an error that quotes it is stored without them.
    this.redactor = options.redactor ?? Redactor.fromEnv(process.env, urlSecrets(url));
    this.reconnectMs = options.reconnectMs ?? 60_000;
    this.pool = new pg.Pool({ Client: ClosingClient, connectionString: url, max: options.poolSize ?? 4, connectionTimeoutMillis: 10_000 });
    // An idle connection the server dropped (a restart) is an event, not a crash: the pool
    // discards it and the next query opens a new one.
    this.pool.on('error', () => {});
  }

  /**
   * Creates the schema, or checks it, once; every call waits for it. Not retried: a server that
   * cannot be reached when a store is first used is one line at once, not a minute's wait.
   */
  schema(): Promise<void> {
    this.ready ??= this.migrate().catch((error: unknown) => {
      this.ready = undefined;
      throw this.failure(error);
    });
    return this.ready;
  }

  private async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query('CREATE SCHEMA IF NOT EXISTS exarch');
      await client.query('CREATE TABLE IF NOT EXISTS exarch.schema_version (version INTEGER NOT NULL)');
      const { rows } = await client.query<{ version: number }>('SELECT version FROM exarch.schema_version');
      const version = rows[0]?.version ?? 0;
      if (version > POSTGRES_SCHEMA_VERSION) throw new StoreError('newer-schema', this.file, `schema ${version}; this exarch reads ${POSTGRES_SCHEMA_VERSION}`);
      if (version === POSTGRES_SCHEMA_VERSION) return;
      for (let step = version + 1; step <= POSTGRES_SCHEMA_VERSION; step++) await client.query(MIGRATIONS[step] ?? '');
      if (rows.length === 0) await client.query('INSERT INTO exarch.schema_version (version) VALUES ($1)', [POSTGRES_SCHEMA_VERSION]);
      else await client.query('UPDATE exarch.schema_version SET version = $1', [POSTGRES_SCHEMA_VERSION]);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  /** A statement after the schema is ready, tried again while the server cannot be reached. */
  async call<T>(fn: () => Promise<T>): Promise<T> {
    await this.schema();
    try {
      return await this.retrying(fn);
    } catch (error) {
      throw this.failure(error);
    }
  }

  private async retrying<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.reconnectMs;
    for (let pause = 50; ; pause = Math.min(pause * 2, 1000)) {
      try {
        return await fn();
      } catch (error) {
        if (this.closed || !isConnectionError(error) || Date.now() + pause > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  /**
   * `fn` in a transaction on one client of the pool. A client checked out of the pool has lost the
   * pool's 'error' listener: a server that goes away (a restart, a killed backend) then emits
   * 'error' on it, and an event nobody hears ends the process, every run of a worker with it. Heard
   * here, it only marks the connection lost: the statement in flight, or the next one, fails with a
   * connection error, which the caller's retry (`retrying`) or the worker's lease takes up.
   */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let lost: Error | undefined;
    const onError = (error: Error): void => {
      lost ??= error;
    };
    client.on('error', onError);
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      broken = isConnectionError(error) && error instanceof Error ? error : lost;
      if (broken === undefined) await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.off('error', onError);
      // A connection that failed is not handed out again (release gives the pool's listener back first).
      client.release(broken ?? lost);
    }
  }

  /** Journal rows as pg returns them, read back; one that cannot be is `damaged`, naming it. */
  journalRows(runId: string, rows: readonly { seq: number; session: unknown; ts: unknown; body: unknown }[]): JournalRow[] {
    return rows.map((r) => {
      const parsed = typeof r.body === 'string' ? parseJson(r.body) : undefined;
      const read = parsed ? readJournalRow(runId, r.seq, r.session, r.ts, parsed.value) : { problem: `journal record ${r.seq}: it is not JSON` };
      if ('problem' in read) throw new StoreError('damaged', this.file, `run ${runId}: ${read.problem}`);
      return read.row;
    });
  }

  /** A key taken is the caller's conflict; anything else, as Postgres said. */
  conflict(error: unknown, what: string): unknown {
    if (error instanceof pg.DatabaseError && error.code === '23505') return new StoreError('conflict', this.file, what, { cause: error });
    return error;
  }

  /** A server that cannot be reached (after the retries), or refuses us, is one line naming it. */
  private failure(error: unknown): unknown {
    if (error instanceof StoreError) return error;
    // pg's words when the server asks for a password it was not given (SCRAM), or cannot use.
    if (error instanceof Error && /^SASL: .*client password must be/.test(error.message))
      return new StoreError('unreadable', this.file, 'the server asks for a password: give it in PGPASSWORD, a PGPASSFILE, or the URL', { cause: error });
    if (error instanceof Error && error.message.startsWith('SASL: ')) return new StoreError('unreadable', this.file, error.message, { cause: error });
    // A query that reads journal records as JSON met one that is not: a record written by something other than exarch.
    if (error instanceof pg.DatabaseError && error.code === '22P02')
      return new StoreError('damaged', this.file, 'a journal record is not JSON', { cause: error });
    if (isConnectionError(error) || (error instanceof pg.DatabaseError && /^(28|3D)/.test(error.code ?? ''))) {
      return new StoreError('unreadable', this.file, error instanceof Error ? error.message : String(error), { cause: error });
    }
    return error;
  }
}

/**
 * pg's client, closing its socket when it fails to connect. pg leaves the socket of a client that
 * gave up during authentication open (it had no password to answer the server's SCRAM challenge
 * with): the server holds it for its authentication_timeout, a minute, and the command that
 * already said why it stops waits for it to exit.
 */
class ClosingClient extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error) => void): void;
  override connect(callback?: (err: Error) => void): Promise<pg.Client> | undefined {
    if (callback === undefined)
      return super.connect().catch((error: unknown) => {
        this.connection.stream.destroy();
        throw error;
      });
    super.connect((error: Error, ...rest: unknown[]) => {
      if (error) this.connection.stream.destroy();
      (callback as (error: Error, ...rest: unknown[]) => void)(error, ...rest);
    });
  }
}

/** Runs SQL in a store's transaction: the shape pg-boss takes as its `db` option. */
export interface SqlExecutor {
  executeSql(text: string, values: unknown[]): Promise<{ rows: unknown[] }>;
}

async function createRun(conn: PostgresConnection, run: NewRun): Promise<void> {
  const { id, task, cwd, startedAt, owner } = run;
  const options = conn.redactor.json(stringifyBounded(run.options));
  let attempts = 0;
  await conn.call(async () => {
    attempts++;
    try {
      await conn.pool.query(
        `INSERT INTO exarch.runs (id, task, cwd, options, started_at, status, owner_host, owner_pid, owner_token, lease_until)
         VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9)`,
        [id, conn.redactor.text(task), cwd, options, startedAt, owner.host, owner.pid, owner.token, conn.now() + run.leaseMs],
      );
    } catch (error) {
      const conflict = conn.conflict(error, `run ${id}`);
      // After a lost connection the first attempt may have committed: the run is then ours.
      if (conflict instanceof StoreError && attempts > 1 && (await getRun(conn, id))?.owner?.token === owner.token) return;
      throw conflict;
    }
  });
}

async function getRun(conn: PostgresConnection, id: string): Promise<RunRow | undefined> {
  const { rows } = await conn.call(() => conn.pool.query<StoredRunColumns>(`SELECT ${RUN_COLUMNS} FROM exarch.runs AS r WHERE r.id = $1`, [id]));
  const r = rows[0];
  if (!r) return undefined;
  const read = readRunColumns(r);
  if (!read.ok) throw new StoreError('damaged', conn.file, `run ${id}: ${read.problem}`);
  return read.run;
}

async function listRuns(conn: PostgresConnection): Promise<RunListing[]> {
  type Listed = StoredRunColumns & TotalsColumns & { journalDamaged?: boolean };
  let rows: Listed[];
  try {
    rows = (await conn.call(() => conn.pool.query<Listed>(LIST_RUNS))).rows;
  } catch (error) {
    // One journal record that is not JSON fails the sum of every run's totals: each run's are summed apart, so only its own run is unreadable.
    if (!(error instanceof StoreError) || error.kind !== 'damaged') throw error;
    rows = await listRunsApart(conn);
  }
  const now = conn.now();
  const runs = rows.map((r): RunListing => {
    const read = readRunColumns(r);
    if (!read.ok) return unreadableRun(r, read.problem);
    if (r.journalDamaged) return unreadableRun(r, 'its journal is not JSON');
    const totals = readTotals(r);
    if (!totals) return unreadableRun(r, 'its totals are not counts');
    const run = read.run;
    // A spread run has no process of its own: its sessions' jobs run it, one claim each.
    const status = run.status === 'running' && run.options['spread'] === true ? 'running' : reportedStatus(run, now);
    return { ...run, status, ...totals };
  });
  // One that asks for approvals is `waiting` once nothing in it can move without an answer.
  for (const [i, run] of runs.entries())
    if (run.status === 'running' && run.options['spread'] === true && run.options['approve'] !== undefined && (await spreadWaiting(conn, run.id)))
      runs[i] = { ...run, status: 'waiting' };
  return runs;
}

/** The runs, each one's totals summed on its own; a run whose journal cannot be summed is marked. */
async function listRunsApart(conn: PostgresConnection): Promise<(StoredRunColumns & TotalsColumns & { journalDamaged?: boolean })[]> {
  const { rows } = await conn.call(() => conn.pool.query<StoredRunColumns & TotalsColumns>(LIST_RUN_ROWS));
  const out: (StoredRunColumns & TotalsColumns & { journalDamaged?: boolean })[] = [];
  for (const r of rows) {
    if (r.agents !== null) {
      out.push(r);
      continue;
    }
    try {
      const { rows: totals } = await conn.call(() => conn.pool.query<TotalsColumns>(`SELECT ${TOTALS} FROM exarch.journal AS j WHERE j.run_id = $1`, [r.id]));
      out.push({ ...r, ...totals[0] });
    } catch (error) {
      if (!(error instanceof StoreError) || error.kind !== 'damaged') throw error;
      out.push({ ...r, journalDamaged: true });
    }
  }
  return out;
}

/** The run's row locked (FOR UPDATE) while the holder is judged: two claimants never both win. */
async function claim(conn: PostgresConnection, runId: string, owner: RunOwner, leaseMs: number): Promise<ClaimResult> {
  return conn.call(() =>
    conn.transaction(async (client) => {
      const { rows } = await client.query<RunColumns>('SELECT * FROM exarch.runs WHERE id = $1 FOR UPDATE', [runId]);
      const run = rows[0];
      if (!run) throw new StoreError('unknown-run', conn.file, runId);
      const now = conn.now();
      const holder = ownerOf(run);
      const leaseUntil = Number(run.lease_until);
      if (holder !== null && !mayClaim(holder, leaseUntil, owner, now)) return { ok: false, holder, leaseUntil };
      await client.query(
        `UPDATE exarch.runs SET status = 'running', owner_host = $2, owner_pid = $3, owner_token = $4, lease_until = $5, ended_at = NULL,
           agents = NULL, requests = NULL, input_tokens = NULL, output_tokens = NULL, cache_creation_input_tokens = NULL, cache_read_input_tokens = NULL
         WHERE id = $1`,
        [runId, owner.host, owner.pid, owner.token, now + leaseMs],
      );
      return { ok: true } as const;
    }),
  );
}

async function renew(conn: PostgresConnection, runId: string, owner: RunOwner, leaseMs: number): Promise<boolean> {
  const result = await conn.call(() =>
    conn.pool.query('UPDATE exarch.runs SET lease_until = $3 WHERE id = $1 AND owner_token = $2', [runId, owner.token, conn.now() + leaseMs]),
  );
  return result.rowCount === 1;
}

/** Lets go of the run and writes its totals (summed by the server), so `listRuns` need not sum them again. */
async function release(conn: PostgresConnection, runId: string, owner: RunOwner, status: RunStatus): Promise<void> {
  await conn.call(() =>
    conn.pool.query(`UPDATE exarch.runs AS r SET status = $3, ended_at = $4, ${LET_GO_WITH_TOTALS} WHERE r.id = $1 AND r.owner_token = $2`, [
      runId,
      owner.token,
      status,
      status === 'running' ? null : conn.now(),
    ]),
  );
}

/**
 * Ends a run whose sessions ran as jobs of their own (no process holds the run as a whole): sets
 * its status and writes its totals, as `release` does. A run already ended is left as it is.
 */
async function endRun(conn: PostgresConnection, runId: string, status: RunStatus): Promise<void> {
  await conn.call(() =>
    conn.pool.query(
      `UPDATE exarch.runs AS r SET status = $2, ended_at = $3, ${LET_GO_WITH_TOTALS} WHERE r.id = $1 AND r.status NOT IN ('done', 'capped', 'failed')`,
      [runId, status, conn.now()],
    ),
  );
}

/**
 * One INSERT of the whole batch (one round trip, one transaction): a taken (run, seq) rolls all
 * of it back. Rows are bounded and redacted as the SQLite store writes them.
 */
async function append(conn: PostgresConnection, rows: readonly JournalRow[]): Promise<void> {
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
async function journalAfter(conn: PostgresConnection, runId: string, afterSeq: number): Promise<JournalRow[]> {
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
 * the rows' own seq numbers are replaced by the next ones of the run, counted on the run's row
 * (whose lock is held to the commit), so seq order is commit order and a follower reading past its last seq misses nothing. One
 * transaction; a retry after a lost connection finds the rows it wrote (by a key per call)
 * rather than writing them twice. `also` writes in the same transaction (the jobs these rows
 * start, queued with pg-boss's `insert({ db })`): both are committed, or neither. `releasing`: a
 * session `owner` holds, let go of in the same transaction (before the jobs that wake it can be
 * taken).
 */
async function appendShared(
  conn: PostgresConnection,
  rows: readonly JournalRow[],
  also?: (db: SqlExecutor) => Promise<unknown>,
  releasing?: { readonly session: string; readonly owner: RunOwner },
): Promise<void> {
  const first = rows[0];
  if (!first) return;
  const runId = first.runId;
  if (rows.some((row) => row.runId !== runId)) throw new TypeError('exarch: appendShared takes the rows of one run');
  const burst = randomUUID();
  const columns = { session: [] as string[], ts: [] as number[], type: [] as string[], body: [] as string[] };
  for (const row of rows) {
    columns.session.push(row.session);
    columns.ts.push(row.ts);
    columns.type.push(row.record.type);
    columns.body.push(conn.redactor.json(stringifyBounded(row.record)));
  }
  let attempts = 0;
  await conn.call(async () => {
    attempts++;
    if (attempts > 1) {
      const { rows: found } = await conn.pool.query('SELECT 1 FROM exarch.journal WHERE run_id = $1 AND session = $2 AND burst = $3 LIMIT 1', [
        runId,
        first.session,
        burst,
      ]);
      if (found.length > 0) return;
    }
    const params = [runId, burst, columns.session, columns.ts, columns.type, columns.body, rows.length];
    const insert = async (db: pg.Pool | pg.PoolClient): Promise<void> => {
      // The run's row is the counter: its lock, held to the commit, orders the appends of one run.
      const { rowCount } = await db.query(
        `WITH taken AS (UPDATE exarch.runs SET next_seq = next_seq + $7 WHERE id = $1 RETURNING next_seq - $7 AS base)
         INSERT INTO exarch.journal (run_id, seq, session, ts, type, body, burst)
         SELECT $1, taken.base + w.n, w.session, w.ts, w.type, w.body, $2
         FROM taken, unnest($3::text[], $4::bigint[], $5::text[], $6::text[]) WITH ORDINALITY AS w(session, ts, type, body, n)`,
        params,
      );
      if (rowCount !== rows.length) throw new StoreError('unknown-run', conn.file, runId);
    };
    // One statement, one round trip, unless something is to be written with it.
    const write = (): Promise<void> =>
      also || releasing
        ? conn.transaction(async (client) => {
            await insert(client);
            if (releasing) await client.query(RELEASE_SESSION, [runId, releasing.session, releasing.owner.token]);
            await also?.({ executeSql: (text, values) => client.query(text, values) });
          })
        : insert(conn.pool);
    try {
      await write();
    } catch (error) {
      if (!(error instanceof pg.DatabaseError && error.code === '23505')) throw error;
      // The counter is behind the journal (a resume here appended with numbers of its own): caught up, then again.
      await conn.pool.query(
        'UPDATE exarch.runs SET next_seq = greatest(next_seq, (SELECT coalesce(max(seq), 0) FROM exarch.journal WHERE run_id = $1)) WHERE id = $1',
        [runId],
      );
      await write();
    }
  });
}

/** A claim of one session: when refused, the job its holder took it for, if it said. */
export type SessionClaim = { readonly ok: true } | { readonly ok: false; readonly holder: RunOwner; readonly leaseUntil: number; readonly job?: string };

/** Lets go of a session (`$1`, `$2`) if the token `$3` holds it. */
const RELEASE_SESSION =
  'UPDATE exarch.sessions SET owner_host = NULL, owner_pid = NULL, owner_token = NULL, lease_until = 0 WHERE run_id = $1 AND session = $2 AND owner_token = $3';

/**
 * Takes one session of a run for `owner`, as `claim` takes a run: when no live process holds it
 * (no owner, its lease expired, or on the same host its process is gone). `job` (the queue's id
 * of the job it is taken for) is kept with the claim: a refused claimant learns whether it is
 * that job again, offered while its holder may be dead.
 */
async function claimSession(conn: PostgresConnection, runId: string, session: string, owner: RunOwner, leaseMs: number, job?: string): Promise<SessionClaim> {
  return conn.call(async () => {
    for (;;) {
      const now = conn.now();
      // The usual case in one statement: a session no one holds, or whose lease ran out.
      const taken = await conn.pool.query(
        `INSERT INTO exarch.sessions (run_id, session, owner_host, owner_pid, owner_token, lease_until, job) VALUES ($1, $2, $3, $4, $5, $6, $8)
         ON CONFLICT (run_id, session) DO UPDATE SET owner_host = EXCLUDED.owner_host, owner_pid = EXCLUDED.owner_pid,
           owner_token = EXCLUDED.owner_token, lease_until = EXCLUDED.lease_until, job = EXCLUDED.job
         WHERE exarch.sessions.owner_token IS NULL OR exarch.sessions.owner_token = EXCLUDED.owner_token OR exarch.sessions.lease_until <= $7
         RETURNING 1`,
        [runId, session, owner.host, owner.pid, owner.token, now + leaseMs, now, job ?? null],
      );
      if (taken.rows.length > 0) return { ok: true } as const;
      // Held under a lease: still ours to take if its holder's process (on this host) is gone.
      const { rows } = await conn.pool.query<Pick<RunColumns, 'owner_host' | 'owner_pid' | 'owner_token' | 'lease_until'> & { job: string | null }>(
        'SELECT owner_host, owner_pid, owner_token, lease_until, job FROM exarch.sessions WHERE run_id = $1 AND session = $2',
        [runId, session],
      );
      const row = rows[0];
      const holder = row ? ownerOf(row) : null;
      // Let go of in between: asked again.
      if (!row || holder === null) continue;
      const leaseUntil = Number(row.lease_until);
      if (!mayClaim(holder, leaseUntil, owner, now)) return { ok: false, holder, leaseUntil, ...(row.job === null ? {} : { job: row.job }) };
      const moved = await conn.pool.query(
        'UPDATE exarch.sessions SET owner_host = $3, owner_pid = $4, owner_token = $5, lease_until = $6, job = $8 WHERE run_id = $1 AND session = $2 AND owner_token = $7',
        [runId, session, owner.host, owner.pid, owner.token, now + leaseMs, holder.token, job ?? null],
      );
      if (moved.rowCount === 1) return { ok: true } as const;
    }
  });
}

/** Extends `owner`'s leases on these sessions; returns those it no longer holds. */
async function renewSessions(conn: PostgresConnection, runId: string, sessions: readonly string[], owner: RunOwner, leaseMs: number): Promise<string[]> {
  if (sessions.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ session: string }>(
      'UPDATE exarch.sessions SET lease_until = $4 WHERE run_id = $1 AND session = ANY($2) AND owner_token = $3 RETURNING session',
      [runId, sessions, owner.token, conn.now() + leaseMs],
    ),
  );
  const held = new Set(rows.map((r) => r.session));
  return sessions.filter((session) => !held.has(session));
}

/** Lets go of a session `owner` holds. */
async function releaseSession(conn: PostgresConnection, runId: string, session: string, owner: RunOwner): Promise<void> {
  await conn.call(() => conn.pool.query(RELEASE_SESSION, [runId, session, owner.token]));
}

/** A steering line taken this long ago and not answered was taken by a worker that died: another may take it. */
const COMMAND_STALE_MS = 30_000;

/**
 * Sends a steering line (`/cancel root/lead`, `/msg …`) to whichever worker runs the run; returns
 * its number, by which `answers` reports what the worker said. Lines wait while no worker holds
 * the run. Redacted as everything stored is. A retry after a lost connection finds the line it
 * sent (by its key) rather than sending it twice.
 */
async function sendCommand(conn: PostgresConnection, runId: string, line: string): Promise<number> {
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
async function takeCommands(conn: PostgresConnection, runId: string, taker: string): Promise<{ readonly seq: number; readonly line: string }[]> {
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
async function answerCommand(conn: PostgresConnection, seq: number, answer: string): Promise<void> {
  await conn.call(() => conn.pool.query('UPDATE exarch.commands SET answer = $2 WHERE seq = $1', [seq, conn.redactor.text(answer)]));
}

/** Lets go of `taker`'s unanswered lines but `keep`: the next worker of the run takes them (a run handed back, say). */
async function releaseCommands(conn: PostgresConnection, runId: string, taker: string, keep: readonly number[]): Promise<void> {
  await conn.call(() =>
    conn.pool.query(
      'UPDATE exarch.commands SET taken_by = NULL, taken_at = NULL WHERE run_id = $1 AND taken_by = $2 AND answer IS NULL AND NOT (seq = ANY($3))',
      [runId, taker, keep.map(String)],
    ),
  );
}

/** The answers given so far to the lines `seqs` (those not answered yet are left out). */
async function answers(conn: PostgresConnection, seqs: readonly number[]): Promise<{ readonly seq: number; readonly answer: string }[]> {
  if (seqs.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: string; answer: string }>('SELECT seq, answer FROM exarch.commands WHERE seq = ANY($1) AND answer IS NOT NULL ORDER BY seq', [
      seqs.map(String),
    ]),
  );
  return rows.map((r) => ({ seq: Number(r.seq), answer: r.answer }));
}

/** Takes back the lines of `seqs` that no worker took (the run stopped first): none acts on them later. Returns how many. */
async function withdrawCommands(conn: PostgresConnection, seqs: readonly number[]): Promise<number> {
  if (seqs.length === 0) return 0;
  const { rowCount } = await conn.call(() => conn.pool.query('DELETE FROM exarch.commands WHERE seq = ANY($1) AND taken_by IS NULL', [seqs.map(String)]));
  return rowCount ?? 0;
}

/** Asks that a session be cancelled, wherever it runs or next runs; the first reason stands. `also` as in `appendShared`. */
async function requestCancel(
  conn: PostgresConnection,
  runId: string,
  session: string,
  reason: string,
  also?: (db: SqlExecutor) => Promise<unknown>,
): Promise<void> {
  await conn.call(() =>
    conn.transaction(async (client) => {
      await client.query(
        'INSERT INTO exarch.sessions (run_id, session, cancel) VALUES ($1, $2, $3) ON CONFLICT (run_id, session) DO UPDATE SET cancel = coalesce(exarch.sessions.cancel, $3)',
        [runId, session, conn.redactor.text(reason)],
      );
      await also?.({ executeSql: (text, values) => client.query(text, values) });
    }),
  );
}

/**
 * Sends a user message to `session` of a spread run from elsewhere (a steering line): a `queued`
 * record in its journal, read by the job that runs it (`host`: itself, or the session that keeps
 * its subtree), which is told by `host`'s `message_seq`. `also` as in `appendShared` (the wake of
 * `host`): all of it is committed, or none.
 */
async function sendMessage(
  conn: PostgresConnection,
  runId: string,
  session: string,
  host: string,
  text: string,
  also?: (db: SqlExecutor) => Promise<unknown>,
): Promise<void> {
  await appendShared(conn, [{ runId, seq: 0, session, ts: conn.now(), record: { type: 'queued', text } }], async (db) => {
    await db.executeSql(
      `INSERT INTO exarch.sessions (run_id, session, message_seq)
         VALUES ($1, $2, (SELECT max(seq) FROM exarch.journal WHERE run_id = $1 AND session = $3 AND type = 'queued'))
       ON CONFLICT (run_id, session) DO UPDATE SET message_seq = EXCLUDED.message_seq`,
      [runId, host, session],
    );
    await also?.(db);
  });
}

/**
 * What was asked of these sessions from elsewhere (and of every session below those of
 * `subtrees`): a cancel (its reason), the seq of the last message sent.
 */
async function sessionSignals(
  conn: PostgresConnection,
  runId: string,
  sessions: readonly string[],
  subtrees: readonly string[] = [],
): Promise<Map<string, { readonly cancel?: string; readonly messageSeq?: number }>> {
  if (sessions.length === 0 && subtrees.length === 0) return new Map();
  const { rows } = await conn.call(() =>
    conn.pool.query<{ session: string; cancel: string | null; message_seq: number | null }>(
      `SELECT session, cancel, message_seq FROM exarch.sessions WHERE run_id = $1
         AND (session = ANY($2) OR EXISTS (SELECT 1 FROM unnest($3::text[]) AS p(top) WHERE left(session, length(p.top) + 1) = p.top || '/'))
         AND (cancel IS NOT NULL OR message_seq IS NOT NULL)`,
      [runId, sessions, subtrees],
    ),
  );
  return new Map(
    rows.map((r) => [r.session, { ...(r.cancel === null ? {} : { cancel: r.cancel }), ...(r.message_seq === null ? {} : { messageSeq: r.message_seq }) }]),
  );
}

/** The cancels asked of these sessions, by session. */
async function cancelRequests(conn: PostgresConnection, runId: string, sessions: readonly string[]): Promise<Map<string, string>> {
  if (sessions.length === 0) return new Map();
  const { rows } = await conn.call(() =>
    conn.pool.query<{ session: string; cancel: string }>(
      'SELECT session, cancel FROM exarch.sessions WHERE run_id = $1 AND session = ANY($2) AND cancel IS NOT NULL',
      [runId, sessions],
    ),
  );
  return new Map(rows.map((r) => [r.session, r.cancel]));
}

/** Records the span a session's agent span was opened as (`traceparent`); the first one recorded stands. */
async function recordSpan(conn: PostgresConnection, runId: string, session: string, traceparent: string): Promise<void> {
  await conn.call(() =>
    conn.pool.query(
      `INSERT INTO exarch.sessions (run_id, session, span) VALUES ($1, $2, $3)
       ON CONFLICT (run_id, session) DO UPDATE SET span = coalesce(exarch.sessions.span, EXCLUDED.span)`,
      [runId, session, traceparent],
    ),
  );
}

/** The spans recorded for these sessions (all of the run's without `sessions`), by session. */
async function spansOf(conn: PostgresConnection, runId: string, sessions?: readonly string[]): Promise<Map<string, string>> {
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

/**
 * One session's records, in order; with `subtree`, those of every session below it too (ids are
 * paths: `root/lead/reader`).
 */
async function sessionJournal(conn: PostgresConnection, runId: string, session: string, options: { readonly subtree?: boolean } = {}): Promise<JournalRow[]> {
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
async function liveSubAgents(conn: PostgresConnection, runId: string): Promise<string[]> {
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
async function hasBegun(conn: PostgresConnection, runId: string, session: string): Promise<boolean> {
  const { rows } = await conn.call(() =>
    conn.pool.query("SELECT 1 FROM exarch.journal WHERE run_id = $1 AND session = $2 AND type = 'session' LIMIT 1", [runId, session]),
  );
  return rows.length > 0;
}

/** The `queued` records (user messages) of a session, with `subtree` of every session below it too, after seq `after`. */
async function queuedAfter(
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
async function spawnsOf(conn: PostgresConnection, runId: string, sessions: readonly string[]): Promise<JournalRow[]> {
  if (sessions.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: number; session: string; ts: string; body: string }>(
      "SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND type = 'spawn' AND body::jsonb ->> 'id' = ANY($2) ORDER BY seq",
      [runId, sessions],
    ),
  );
  return conn.journalRows(runId, rows);
}

/** The `outcome` records of those of `sessions` that ended. */
async function outcomes(conn: PostgresConnection, runId: string, sessions: readonly string[]): Promise<JournalRow[]> {
  if (sessions.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ seq: number; session: string; ts: string; body: string }>(
      "SELECT seq, session, ts, body FROM exarch.journal WHERE run_id = $1 AND session = ANY($2) AND type = 'outcome' ORDER BY seq",
      [runId, sessions],
    ),
  );
  return conn.journalRows(runId, rows);
}

/**
 * Whether nothing in a spread run can move until a person answers (its status `waiting`, as a
 * whole run stops as `waiting`): a call waits for approval (a session's last `awaiting` record
 * was followed by no `dispatching` and no `outcome`), no session is held by a live worker, and no
 * job of the run is queued or running in pg-boss's table on this server.
 */
async function spreadWaiting(conn: PostgresConnection, runId: string): Promise<boolean> {
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
async function approvedAlways(conn: PostgresConnection, runId: string): Promise<Set<string>> {
  const { rows } = await conn.call(() =>
    conn.pool.query<{ tool: string }>(
      "SELECT DISTINCT body::jsonb ->> 'tool' AS tool FROM exarch.journal WHERE run_id = $1 AND type = 'approval' AND body::jsonb ->> 'decision' = 'always'",
      [runId],
    ),
  );
  return new Set(rows.map((r) => r.tool));
}

/**
 * Runs in PostgreSQL: the store a pool of workers shares. Same contract as `SqliteRunStore`
 * (every method answers with a promise): the schema is created or brought up to date on first
 * use, and a database written by a newer exarch is refused (`StoreError` 'newer-schema') without
 * a byte written. What is written is redacted, as in the SQLite store.
 *
 * A call that finds the server gone (restarting) is tried again until `reconnectMs`; an append
 * whose commit was lost with the connection is recognised on the retry (its rows are there, as
 * written) and not reported as a conflict.
 *
 * This class is the store's face; each method's SQL is kept with its concern: runs and their
 * leases (postgresRuns.ts), the journal (postgresJournal.ts), sessions' claims
 * (postgresLeases.ts), the two steering channels (postgresSteering.ts), span records
 * (postgresSpans.ts) and the queries of a spread run's workers (postgresWorkerQueries.ts), all
 * through one `PostgresConnection` (postgresConnection.ts) on the schema of postgresSchema.ts.
 */
export class PostgresRunStore implements RunStore {
  /** The URL without its secrets (`redactUrl`): what messages name. */
  readonly file: string;
  readonly pool: pg.Pool;
  private readonly conn: PostgresConnection;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.conn = new PostgresConnection(url, options);
    this.file = this.conn.file;
    this.pool = this.conn.pool;
  }

  /**
   * Connects and creates or checks the schema now, rather than at the first call: a command that
   * must not go on without the store (one that queues a run next) hears the store's one line first.
   */
  async open(): Promise<void> {
    await this.conn.schema();
  }

  close(): Promise<void> {
    return this.conn.close();
  }

  createRun(run: NewRun): Promise<void> {
    return createRun(this.conn, run);
  }

  getRun(id: string): Promise<RunRow | undefined> {
    return getRun(this.conn, id);
  }

  listRuns(): Promise<RunListing[]> {
    return listRuns(this.conn);
  }

  /** The run's row locked (FOR UPDATE) while the holder is judged: two claimants never both win. */
  claim(runId: string, owner: RunOwner, leaseMs: number): Promise<ClaimResult> {
    return claim(this.conn, runId, owner, leaseMs);
  }

  renew(runId: string, owner: RunOwner, leaseMs: number): Promise<boolean> {
    return renew(this.conn, runId, owner, leaseMs);
  }

  /** Lets go of the run and writes its totals (summed by the server), so `listRuns` need not sum them again. */
  release(runId: string, owner: RunOwner, status: RunStatus): Promise<void> {
    return release(this.conn, runId, owner, status);
  }

  /** Ends a run whose sessions ran as jobs of their own (no process holds the run as a whole); see postgresRuns.ts. */
  endRun(runId: string, status: RunStatus): Promise<void> {
    return endRun(this.conn, runId, status);
  }

  /** One INSERT of the whole batch: a taken (run, seq) rolls all of it back. */
  append(rows: readonly JournalRow[]): Promise<void> {
    return append(this.conn, rows);
  }

  /** Appends rows of sessions that other processes append to as well (a spread run); see postgresJournal.ts. */
  appendShared(
    rows: readonly JournalRow[],
    also?: (db: SqlExecutor) => Promise<unknown>,
    releasing?: { readonly session: string; readonly owner: RunOwner },
  ): Promise<void> {
    return appendShared(this.conn, rows, also, releasing);
  }

  journal(runId: string): Promise<JournalRow[]> {
    return journalAfter(this.conn, runId, 0);
  }

  /** The run's records after `afterSeq`, in order: what a follower polls for. */
  journalAfter(runId: string, afterSeq: number): Promise<JournalRow[]> {
    return journalAfter(this.conn, runId, afterSeq);
  }

  /** Takes one session of a run for `owner`, as `claim` takes a run; see postgresLeases.ts. */
  claimSession(runId: string, session: string, owner: RunOwner, leaseMs: number, job?: string): Promise<SessionClaim> {
    return claimSession(this.conn, runId, session, owner, leaseMs, job);
  }

  /** Extends `owner`'s leases on these sessions; returns those it no longer holds. */
  renewSessions(runId: string, sessions: readonly string[], owner: RunOwner, leaseMs: number): Promise<string[]> {
    return renewSessions(this.conn, runId, sessions, owner, leaseMs);
  }

  /** Lets go of a session `owner` holds. */
  releaseSession(runId: string, session: string, owner: RunOwner): Promise<void> {
    return releaseSession(this.conn, runId, session, owner);
  }

  /** Sends a steering line to whichever worker runs the run; returns its number. See postgresSteering.ts. */
  sendCommand(runId: string, line: string): Promise<number> {
    return sendCommand(this.conn, runId, line);
  }

  /** The run's unanswered steering lines, now taken by `taker`, in the order sent. */
  takeCommands(runId: string, taker: string): Promise<{ readonly seq: number; readonly line: string }[]> {
    return takeCommands(this.conn, runId, taker);
  }

  /** What the worker said to a steering line. */
  answerCommand(seq: number, answer: string): Promise<void> {
    return answerCommand(this.conn, seq, answer);
  }

  /** Lets go of `taker`'s unanswered lines but `keep`. */
  releaseCommands(runId: string, taker: string, keep: readonly number[]): Promise<void> {
    return releaseCommands(this.conn, runId, taker, keep);
  }

  /** The answers given so far to the lines `seqs`. */
  answers(seqs: readonly number[]): Promise<{ readonly seq: number; readonly answer: string }[]> {
    return answers(this.conn, seqs);
  }

  /** Takes back the lines of `seqs` that no worker took; returns how many. */
  withdrawCommands(seqs: readonly number[]): Promise<number> {
    return withdrawCommands(this.conn, seqs);
  }

  /** Asks that a session be cancelled, wherever it runs or next runs; the first reason stands. `also` as in `appendShared`. */
  requestCancel(runId: string, session: string, reason: string, also?: (db: SqlExecutor) => Promise<unknown>): Promise<void> {
    return requestCancel(this.conn, runId, session, reason, also);
  }

  /** Sends a user message to `session` of a spread run from elsewhere; see postgresSteering.ts. */
  sendMessage(runId: string, session: string, host: string, text: string, also?: (db: SqlExecutor) => Promise<unknown>): Promise<void> {
    return sendMessage(this.conn, runId, session, host, text, also);
  }

  /** What was asked of these sessions from elsewhere (and of every session below those of `subtrees`). */
  sessionSignals(
    runId: string,
    sessions: readonly string[],
    subtrees: readonly string[] = [],
  ): Promise<Map<string, { readonly cancel?: string; readonly messageSeq?: number }>> {
    return sessionSignals(this.conn, runId, sessions, subtrees);
  }

  /** The cancels asked of these sessions, by session. */
  cancelRequests(runId: string, sessions: readonly string[]): Promise<Map<string, string>> {
    return cancelRequests(this.conn, runId, sessions);
  }

  /** Records the span a session's agent span was opened as (`traceparent`); the first one recorded stands. */
  recordSpan(runId: string, session: string, traceparent: string): Promise<void> {
    return recordSpan(this.conn, runId, session, traceparent);
  }

  /** The spans recorded for these sessions (all of the run's without `sessions`), by session. */
  spansOf(runId: string, sessions?: readonly string[]): Promise<Map<string, string>> {
    return spansOf(this.conn, runId, sessions);
  }

  /** One session's records, in order; with `subtree`, those of every session below it too. */
  sessionJournal(runId: string, session: string, options: { readonly subtree?: boolean } = {}): Promise<JournalRow[]> {
    return sessionJournal(this.conn, runId, session, options);
  }

  /** The sub-agents of a run started and not ended, in the order they were started. */
  liveSubAgents(runId: string): Promise<string[]> {
    return liveSubAgents(this.conn, runId);
  }

  /** Whether a session has begun (its `session` record is in the journal). */
  hasBegun(runId: string, session: string): Promise<boolean> {
    return hasBegun(this.conn, runId, session);
  }

  /** The `queued` records (user messages) of a session, with `subtree` of every session below it too, after seq `after`. */
  queuedAfter(runId: string, session: string, after: number, options: { readonly subtree?: boolean } = {}): Promise<JournalRow[]> {
    return queuedAfter(this.conn, runId, session, after, options);
  }

  /** The `spawn` records that started these sessions (each in its parent's journal), in order. */
  spawnsOf(runId: string, sessions: readonly string[]): Promise<JournalRow[]> {
    return spawnsOf(this.conn, runId, sessions);
  }

  /** The `outcome` records of those of `sessions` that ended. */
  outcomes(runId: string, sessions: readonly string[]): Promise<JournalRow[]> {
    return outcomes(this.conn, runId, sessions);
  }

  /** Whether nothing in a spread run can move until a person answers; see postgresWorkerQueries.ts. */
  spreadWaiting(runId: string): Promise<boolean> {
    return spreadWaiting(this.conn, runId);
  }

  /** The tools a person approved for the rest of a run (`always`), in any session's journal. */
  approvedAlways(runId: string): Promise<Set<string>> {
    return approvedAlways(this.conn, runId);
  }
}

/** Opens a store on the server at `url` (connecting lazily, on first use); see `PostgresRunStore`. */
export function openPostgresStore(url: string, options: PostgresStoreOptions = {}): PostgresRunStore {
  return new PostgresRunStore(url, options);
}
