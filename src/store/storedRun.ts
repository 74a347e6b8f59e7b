import { RUN_STATUSES, type JournalRow, type RunOwner, type RunRow, type RunStatus, type RunSummary, type UnreadableRun } from './runStore.js';
import { asJournalRecord } from './journalSchema.js';

/**
 * Reading a store's rows back, for every store (SQLite, Postgres): each column is taken as
 * anything, since whoever can write the file can write any value into any column (SQLite keeps a
 * column's declared type only as a hint). A run whose row cannot be read is that run's problem,
 * said in one line (`its options are not JSON`); the store's other runs are read as usual.
 */

/** Characters of `options` a store reads back: far above any run's (flags and the declared agents' config), far below what would stall a listing. */
export const MAX_OPTIONS_CHARS = 16 * 1024 * 1024;

/** A `runs` row's columns as a driver returns them. BIGINT columns may come back as decimal strings (pg). */
export interface RunColumns {
  readonly id: unknown;
  readonly task: unknown;
  readonly cwd: unknown;
  /** JSON text; null when the store left out a value longer than MAX_OPTIONS_CHARS (see `options_chars`). */
  readonly options: unknown;
  /** The length of `options` in characters, when the store selected it. */
  readonly options_chars?: unknown;
  readonly started_at: unknown;
  readonly status: unknown;
  readonly owner_host: unknown;
  readonly owner_pid: unknown;
  readonly owner_token: unknown;
  readonly lease_until: unknown;
  readonly ended_at: unknown;
}

/** A run's totals as the store counted them (its columns once released, else summed from its journal). */
export interface TotalsColumns {
  readonly agents: unknown;
  readonly requests: unknown;
  readonly input_tokens: unknown;
  readonly output_tokens: unknown;
  readonly cache_creation_input_tokens: unknown;
  readonly cache_read_input_tokens: unknown;
}

export type ReadRun = { readonly ok: true; readonly run: RunRow } | { readonly ok: false; readonly problem: string };

/** The row as a `RunRow`, or what is wrong with it (one line, without the run's id). */
export function readRunColumns(r: RunColumns): ReadRun {
  const fail = (problem: string): ReadRun => ({ ok: false, problem });
  if (typeof r.id !== 'string') return fail('its id is not text');
  if (typeof r.task !== 'string') return fail('its task is not text');
  if (typeof r.cwd !== 'string') return fail('its working directory is not text');
  if (!isRunStatus(r.status)) return fail(`its status is not one of ${RUN_STATUSES.join(', ')}`);
  const startedAt = integer(r.started_at);
  if (startedAt === undefined) return fail('its start time is not a number of milliseconds');
  const leaseUntil = integer(r.lease_until);
  if (leaseUntil === undefined) return fail('its lease is not a number of milliseconds');
  const endedAt = r.ended_at === null ? null : integer(r.ended_at);
  if (endedAt === undefined) return fail('its end time is not a number of milliseconds');
  const owner = ownerOf(r);
  if (owner === undefined) return fail('its owner is not a host, a process id and a token');
  const options = optionsOf(r);
  if (typeof options === 'string') return fail(options);
  return { ok: true, run: { id: r.id, task: r.task, cwd: r.cwd, options, startedAt, status: r.status, owner, leaseUntil, endedAt } };
}

/** The totals, or undefined when one of them is not a count. */
export function readTotals(t: TotalsColumns): Pick<RunSummary, 'agents' | 'requests' | 'usage'> | undefined {
  const [agents, requests, inputTokens, outputTokens, cacheCreationInputTokens, cacheReadInputTokens] = [
    t.agents,
    t.requests,
    t.input_tokens,
    t.output_tokens,
    t.cache_creation_input_tokens,
    t.cache_read_input_tokens,
  ].map((value) => {
    const n = integer(value);
    return n !== undefined && n >= 0 ? n : undefined;
  });
  if (agents === undefined || requests === undefined || inputTokens === undefined || outputTokens === undefined) return undefined;
  if (cacheCreationInputTokens === undefined || cacheReadInputTokens === undefined) return undefined;
  return { agents, requests, usage: { inputTokens, outputTokens, cacheCreationInputTokens, cacheReadInputTokens } };
}

/**
 * What `listRuns` shows of a run it cannot read: as much of the row as is readable, and why. Its
 * id is shown with control characters replaced (`?`): a line that names it stays one line.
 */
export function unreadableRun(r: Pick<RunColumns, 'id' | 'task' | 'started_at'>, problem: string): UnreadableRun {
  const startedAt = integer(r.started_at);
  return {
    id: typeof r.id === 'string' ? r.id.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?') : `(${r.id === null ? 'no' : 'a damaged'} id)`,
    status: 'unreadable',
    problem,
    ...(startedAt === undefined ? {} : { startedAt }),
    ...(typeof r.task === 'string' ? { task: r.task } : {}),
  };
}

/** The stored parts of one journal record ([session, ts, record] in a burst, or columns), as a row; or what is wrong with them. */
export function readJournalRow(
  runId: string,
  seq: number,
  session: unknown,
  ts: unknown,
  record: unknown,
): { readonly row: JournalRow } | { readonly problem: string } {
  if (typeof session !== 'string') return { problem: `journal record ${seq}: its session is not text` };
  const time = typeof ts === 'string' ? Number(ts) : ts;
  if (typeof time !== 'number' || !Number.isFinite(time)) return { problem: `journal record ${seq}: its time is not a number` };
  const read = asJournalRecord(record);
  if ('problem' in read) return { problem: `journal record ${seq}${session === '' ? '' : ` (session ${session})`}: ${read.problem}` };
  return { row: { runId, seq, session, ts: time, record: read.record } };
}

/** JSON text, parsed; or undefined when it is not JSON. */
export function parseJson(text: string): { readonly value: unknown } | undefined {
  try {
    return { value: JSON.parse(text) as unknown };
  } catch {
    return undefined;
  }
}

function optionsOf(r: RunColumns): RunRow['options'] | string {
  const chars = r.options_chars === undefined ? undefined : integer(r.options_chars);
  if (r.options === null && chars !== undefined && chars > MAX_OPTIONS_CHARS) return `its options are longer than ${MAX_OPTIONS_CHARS} characters`;
  if (typeof r.options !== 'string') return 'its options are not text';
  const parsed = parseJson(r.options);
  if (!parsed) return 'its options are not JSON';
  const options = parsed.value;
  if (typeof options !== 'object' || options === null || Array.isArray(options)) return 'its options are not a JSON object';
  const tools = (options as Record<string, unknown>)['tools'];
  if (!Array.isArray(tools) || !tools.every((tool) => typeof tool === 'string')) return 'its options do not list its tools';
  return options as RunRow['options'];
}

/** An integer column: a number, or the decimal text pg gives a BIGINT as; undefined for anything else. */
function integer(value: unknown): number | undefined {
  const n = typeof value === 'string' && /^-?\d{1,16}$/.test(value) ? Number(value) : value;
  return typeof n === 'number' && Number.isSafeInteger(n) ? n : undefined;
}

/** The owner's three columns: null without a token, undefined when they are not of their types. */
function ownerOf(r: RunColumns): RunOwner | null | undefined {
  if (r.owner_token === null) return null;
  if (typeof r.owner_token !== 'string') return undefined;
  const host = r.owner_host ?? '';
  const pid = r.owner_pid === null ? 0 : integer(r.owner_pid);
  if (typeof host !== 'string' || pid === undefined) return undefined;
  return { host, pid, token: r.owner_token };
}

function isRunStatus(status: unknown): status is RunStatus {
  return (RUN_STATUSES as readonly unknown[]).includes(status);
}
