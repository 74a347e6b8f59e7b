import { MAX_OPTIONS_CHARS, type RunColumns as StoredRunColumns } from './storedRun.js';
import type { JournalRow } from './runStore.js';

/** A `runs` row as SQLite returns it. */
export interface RunColumns {
  readonly id: string;
  readonly task: string;
  readonly cwd: string;
  readonly options: string;
  readonly started_at: number;
  readonly status: string;
  readonly owner_host: string | null;
  readonly owner_pid: number | null;
  readonly owner_token: string | null;
  readonly lease_until: number;
  readonly ended_at: number | null;
  /** The run's share of the `bursts` keys (see SEQ_SPAN); set for every run since schema 3. */
  readonly num: number;
}

/** A run's totals: in `runs` once it is released (null before), or from its journal. */
export interface TotalsColumns {
  readonly agents: number;
  readonly requests: number;
  readonly input_tokens: number;
  readonly output_tokens: number;
  readonly cache_creation_input_tokens: number;
  readonly cache_read_input_tokens: number;
}

export type SummaryColumns = StoredRunColumns & { readonly num: unknown; readonly options_chars: unknown } & { readonly [K in keyof TotalsColumns]: unknown };

/** A `bursts` row as SQLite returns it (`records` is meant to be JSON text; a damaged file may hold anything). */
export interface BurstColumns {
  readonly seq: number;
  readonly records: unknown;
}

/** One record of a burst, as stored: [session, ts, record]. */
export type StoredRecord = [string, number, JournalRow['record']];

/**
 * A row's columns, `options` left out (null) past MAX_OPTIONS_CHARS: a value that large is no
 * run's, and is not read into memory to be refused.
 */
export const RUN_COLUMNS = `id, task, cwd, CASE WHEN length(options) > ${MAX_OPTIONS_CHARS} THEN NULL ELSE options END AS options,
  length(options) AS options_chars, started_at, status, owner_host, owner_pid, owner_token, lease_until, ended_at, num`;

export const LIST_RUNS = `SELECT ${RUN_COLUMNS}, agents, requests, input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens
  FROM runs ORDER BY started_at DESC, id DESC`;

/**
 * One run's totals, from its journal rows (by key): every request that reached the provider, kept
 * (`usage`, with what its retries spent) or not (`lost`), as `requestSpend` counts one record.
 */
export const RUN_TOTALS = `
  SELECT
    count(*) FILTER (WHERE type = 'session') AS agents,
    coalesce(sum(CASE type WHEN 'usage' THEN coalesce(json_extract(body, '$.requests'), 1) WHEN 'lost' THEN json_extract(body, '$.requests') END), 0) AS requests,
    coalesce(sum(CASE type WHEN 'usage' THEN json_extract(body, '$.request.inputTokens') + coalesce(json_extract(body, '$.lost.inputTokens'), 0) WHEN 'lost' THEN json_extract(body, '$.usage.inputTokens') END), 0) AS input_tokens,
    coalesce(sum(CASE type WHEN 'usage' THEN json_extract(body, '$.request.outputTokens') + coalesce(json_extract(body, '$.lost.outputTokens'), 0) WHEN 'lost' THEN json_extract(body, '$.usage.outputTokens') END), 0) AS output_tokens,
    coalesce(sum(CASE type WHEN 'usage' THEN json_extract(body, '$.request.cacheCreationInputTokens') + coalesce(json_extract(body, '$.lost.cacheCreationInputTokens'), 0) WHEN 'lost' THEN json_extract(body, '$.usage.cacheCreationInputTokens') END), 0) AS cache_creation_input_tokens,
    coalesce(sum(CASE type WHEN 'usage' THEN json_extract(body, '$.request.cacheReadInputTokens') + coalesce(json_extract(body, '$.lost.cacheReadInputTokens'), 0) WHEN 'lost' THEN json_extract(body, '$.usage.cacheReadInputTokens') END), 0) AS cache_read_input_tokens
  FROM journal WHERE run_id = ?`;
