import type { RunOwner } from './runStore.js';
import { MAX_OPTIONS_CHARS } from './storedRun.js';

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
export const MIGRATIONS: Readonly<Record<number, string>> = {
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
export const MIGRATION_LOCK = 0x45584152;

/** A run's totals, summed from its journal by the server (as `requestSpend` counts one record: kept requests and `lost` ones). */
export const TOTALS = `
  count(*) FILTER (WHERE j.type = 'session')::int AS agents,
  coalesce(sum(CASE j.type WHEN 'usage' THEN coalesce((j.body::jsonb #>> '{requests}')::int, 1) WHEN 'lost' THEN (j.body::jsonb #>> '{requests}')::int END), 0)::int AS requests,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,inputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,inputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,inputTokens}')::bigint END), 0)::bigint AS input_tokens,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,outputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,outputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,outputTokens}')::bigint END), 0)::bigint AS output_tokens,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,cacheCreationInputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,cacheCreationInputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,cacheCreationInputTokens}')::bigint END), 0)::bigint AS cache_creation_input_tokens,
  coalesce(sum(CASE j.type WHEN 'usage' THEN (j.body::jsonb #>> '{request,cacheReadInputTokens}')::bigint + coalesce((j.body::jsonb #>> '{lost,cacheReadInputTokens}')::bigint, 0) WHEN 'lost' THEN (j.body::jsonb #>> '{usage,cacheReadInputTokens}')::bigint END), 0)::bigint AS cache_read_input_tokens`;

/** The rest of an UPDATE of `runs AS r` that lets go of a run (`$1`) and writes its totals, summed from its journal. */
export const LET_GO_WITH_TOTALS = `owner_host = NULL, owner_pid = NULL, owner_token = NULL, lease_until = 0,
  agents = t.agents, requests = t.requests, input_tokens = t.input_tokens, output_tokens = t.output_tokens,
  cache_creation_input_tokens = t.cache_creation_input_tokens, cache_read_input_tokens = t.cache_read_input_tokens
  FROM (SELECT ${TOTALS} FROM exarch.journal AS j WHERE j.run_id = $1) AS t`;

/**
 * A run's columns (of `runs AS r`), `options` left out (null) past MAX_OPTIONS_CHARS: a value that
 * large is no run's, and is not read into memory to be refused.
 */
export const RUN_COLUMNS = `r.id, r.task, r.cwd, CASE WHEN length(r.options) > ${MAX_OPTIONS_CHARS} THEN NULL ELSE r.options END AS options,
  length(r.options) AS options_chars, r.started_at, r.status, r.owner_host, r.owner_pid, r.owner_token, r.lease_until, r.ended_at`;

/** Released runs carry their totals; the others are summed from their journal, by key. */
export const LIST_RUNS = `
  SELECT ${RUN_COLUMNS},
    coalesce(r.agents, t.agents) AS agents, coalesce(r.requests, t.requests) AS requests,
    coalesce(r.input_tokens, t.input_tokens) AS input_tokens, coalesce(r.output_tokens, t.output_tokens) AS output_tokens,
    coalesce(r.cache_creation_input_tokens, t.cache_creation_input_tokens) AS cache_creation_input_tokens,
    coalesce(r.cache_read_input_tokens, t.cache_read_input_tokens) AS cache_read_input_tokens
  FROM exarch.runs AS r
  LEFT JOIN LATERAL (SELECT ${TOTALS} FROM exarch.journal AS j WHERE j.run_id = r.id AND r.agents IS NULL) AS t ON true
  ORDER BY r.started_at DESC, r.id DESC`;

/** LIST_RUNS without the totals summed from journals: when one of them cannot be summed, each run's are asked for apart. */
export const LIST_RUN_ROWS = `
  SELECT ${RUN_COLUMNS}, r.agents, r.requests, r.input_tokens, r.output_tokens, r.cache_creation_input_tokens, r.cache_read_input_tokens
  FROM exarch.runs AS r ORDER BY r.started_at DESC, r.id DESC`;

/** A `runs` row as pg returns it (BIGINT comes back as a string: parsed in `toRunRow`). */
export interface RunColumns {
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

export interface TotalsColumns {
  readonly agents: number;
  readonly requests: number;
  readonly input_tokens: string;
  readonly output_tokens: string;
  readonly cache_creation_input_tokens: string;
  readonly cache_read_input_tokens: string;
}

export function ownerOf(r: Pick<RunColumns, 'owner_host' | 'owner_pid' | 'owner_token'>): RunOwner | null {
  return r.owner_token === null ? null : { host: r.owner_host ?? '', pid: r.owner_pid ?? 0, token: r.owner_token };
}
