import Database from 'better-sqlite3';
import { resolve } from 'node:path';
import { stringifyBounded } from '../engine/nesting.js';
import { Redactor } from '../engine/redact.js';
import { mayClaim, reportedStatus, type StoreOptions } from './memoryStore.js';
import { StoreError } from './storeError.js';
import { requestSpend } from './requestSpend.js';
import { WalCheckpointer } from './walCheckpointer.js';
import { parseJson, readJournalRow, readRunColumns, readTotals, unreadableRun, type RunColumns as StoredRunColumns } from './storedRun.js';
import type { ClaimResult, JournalRow, NewRun, RunListing, RunOwner, RunRow, RunStatus, RunStore } from './runStore.js';
import { MAX_RUN_NUMBER, SEQ_SPAN } from './sqliteSchema.js';
import { openChecked } from './sqliteOpen.js';
import { writeFailure } from './sqliteFailures.js';
import {
  LIST_RUNS,
  RUN_COLUMNS,
  RUN_TOTALS,
  type BurstColumns,
  type RunColumns,
  type StoredRecord,
  type SummaryColumns,
  type TotalsColumns,
} from './sqliteQueries.js';

// `exarch/sqlite` says which databases are exarch's, at which schema.
export { EXARCH_APPLICATION_ID, SCHEMA_VERSION } from './sqliteSchema.js';

/** Where the CLI keeps its runs, relative to the working directory (callers resolve it). */
export const DEFAULT_STORE_PATH = '.exarch/exarch.db';

/**
 * Runs in one SQLite file (WAL): the store the CLI uses. Every method answers synchronously.
 * Opening refuses, without writing a byte, a file that is not an exarch database, is corrupt, or
 * was written by a newer schema (see `StoreError`).
 */
export class SqliteRunStore implements RunStore {
  /** The absolute path of the database. */
  readonly file: string;
  private readonly db: Database.Database;
  private readonly now: () => number;
  /** What is written is redacted (a task, an error's reason, a tool's output may hold a secret). */
  private readonly redactor: Redactor;
  /** Inserts a run and returns its number (IMMEDIATE: numbered under the write lock); rolled back past MAX_RUN_NUMBER. */
  private readonly insertRun: Database.Transaction<(params: Record<string, unknown>) => number>;
  private readonly selectRun: Database.Statement<[string], RunColumns>;
  private readonly selectStoredRun: Database.Statement<[string], StoredRunColumns>;
  private readonly selectSummaries: Database.Statement<[], SummaryColumns>;
  private readonly selectJournal: Database.Statement<[{ base: number; end: number }], BurstColumns>;
  private readonly selectNumber: Database.Statement<[string], { num: unknown }>;
  /** Each run's number (see SEQ_SPAN), as this store has looked it up: it never changes. */
  private readonly numbers = new Map<string, number>();
  private readonly takeRun: Database.Statement<[Record<string, unknown>]>;
  private readonly extendLease: Database.Statement<[Record<string, unknown>]>;
  private readonly letGo: Database.Statement<[Record<string, unknown>]>;
  private readonly selectTotals: Database.Statement<[string], TotalsColumns>;
  private readonly letGoWithTotals: Database.Transaction<(runId: string, owner: RunOwner, status: RunStatus) => void>;
  /** Appends the rows' bursts atomically; returns the bytes of records written. */
  private readonly appendAll: (rows: readonly JournalRow[]) => number;
  private readonly checkpointer: WalCheckpointer;
  /**
   * The totals of the runs this store writes (created or claimed here), kept up as it appends, so
   * releasing a run does not read its whole journal back: at schema 2 that meant parsing every
   * burst, O(history) at the end of every run. Only the run's owner appends to it.
   */
  private readonly running = new Map<string, { -readonly [K in keyof TotalsColumns]: TotalsColumns[K] }>();
  private readonly claimRun: Database.Transaction<(runId: string, owner: RunOwner, leaseMs: number) => ClaimResult>;

  constructor(file: string, options: StoreOptions = {}) {
    this.file = resolve(file);
    this.now = options.now ?? Date.now;
    this.redactor = options.redactor ?? Redactor.fromEnv();
    this.db = openChecked(this.file);
    const db = this.db;
    // The next number is taken inside the insert, under the write lock: two processes creating
    // runs at once never share one. Numbers are never reused (runs are never deleted).
    const insertRunRow = db.prepare<[Record<string, unknown>], { num: number }>(`INSERT INTO runs (id, task, cwd, options, started_at, status,
      owner_host, owner_pid, owner_token, lease_until, ended_at, num)
      VALUES (@id, @task, @cwd, @options, @startedAt, 'running', @host, @pid, @token, @leaseUntil, NULL, (SELECT coalesce(max(num), 0) + 1 FROM runs))
      RETURNING num`);
    this.insertRun = db.transaction((params: Record<string, unknown>): number => {
      const { num } = insertRunRow.get(params) as { num: number };
      if (num > MAX_RUN_NUMBER) throw new StoreError('full', this.file, `${MAX_RUN_NUMBER} runs`);
      return num;
    });
    this.selectRun = db.prepare('SELECT * FROM runs WHERE id = ?');
    this.selectStoredRun = db.prepare(`SELECT ${RUN_COLUMNS} FROM runs WHERE id = ?`);
    this.selectSummaries = db.prepare(LIST_RUNS);
    this.selectJournal = db.prepare('SELECT key - @base AS seq, records FROM bursts WHERE key >= @base AND key < @end ORDER BY key');
    this.selectNumber = db.prepare('SELECT num FROM runs WHERE id = ?');
    this.takeRun = db.prepare(`UPDATE runs SET status = 'running', owner_host = @host, owner_pid = @pid, owner_token = @token,
      lease_until = @leaseUntil, ended_at = NULL, agents = NULL WHERE id = @id`);
    this.extendLease = db.prepare('UPDATE runs SET lease_until = @leaseUntil WHERE id = @id AND owner_token = @token');
    this.letGo = db.prepare(`UPDATE runs SET status = @status, ended_at = @endedAt, owner_host = NULL, owner_pid = NULL,
      owner_token = NULL, lease_until = 0, agents = @agents, requests = @requests, input_tokens = @input_tokens,
      output_tokens = @output_tokens, cache_creation_input_tokens = @cache_creation_input_tokens,
      cache_read_input_tokens = @cache_read_input_tokens WHERE id = @id AND owner_token = @token`);
    this.selectTotals = db.prepare(RUN_TOTALS);
    this.letGoWithTotals = db.transaction((runId: string, owner: RunOwner, status: RunStatus) => {
      this.letGo.run({
        id: runId,
        token: owner.token,
        status,
        endedAt: status === 'running' ? null : this.now(),
        ...(this.running.get(runId) ?? this.totalsOf(runId)),
      });
    });
    // Bursts of one run never overlap: a seq taken by any of them is a conflict, as a key would be.
    // The last burst that starts at or before this one's end is the only one that could overlap it
    // (bursts never overlap one another); the insert happens only if that one ends before this one
    // starts. One statement rather than a read then a write: a lone statement is its own
    // transaction, so the usual append (one burst) needs no BEGIN and COMMIT around it either.
    const insertBurst = db.prepare<{ base: number; seq: number; last: number; records: string }>(`
      INSERT INTO bursts (key, last, records)
      SELECT @base + @seq, @last, @records
      WHERE coalesce((SELECT last FROM bursts WHERE key >= @base AND key <= @base + @last ORDER BY key DESC LIMIT 1), -1) < @seq`);
    const insert = (burst: readonly JournalRow[]): number => {
      const first = burst[0] as JournalRow;
      const last = first.seq + burst.length - 1;
      if (!(Number.isSafeInteger(first.seq) && first.seq >= 0 && last < SEQ_SPAN)) {
        throw new StoreError('full', this.file, `journal rows ${first.seq}..${last} of run ${first.runId}: seqs run from 0 to ${SEQ_SPAN - 1}`);
      }
      const base = this.numberOf(first.runId) * SEQ_SPAN;
      // Bounded (a record may hold what a model sent, at any depth; see nesting.ts) and redacted.
      const records = this.redactor.json(stringifyBounded(burst.map((row): StoredRecord => [row.session, row.ts, row.record])));
      if (insertBurst.run({ base, seq: first.seq, last, records }).changes !== 1) {
        throw new StoreError('conflict', this.file, `journal row ${first.seq}..${last} of run ${first.runId}`);
      }
      return records.length;
    };
    const insertAll = db.transaction((bursts: readonly (readonly JournalRow[])[]) => bursts.reduce((bytes, burst) => bytes + insert(burst), 0));
    this.appendAll = (rows: readonly JournalRow[]): number => {
      const bursts = burstsOf(rows);
      return bursts.length === 1 ? insert(bursts[0] as JournalRow[]) : insertAll(bursts);
    };
    this.checkpointer = new WalCheckpointer(db, this.file);
    // IMMEDIATE: the write lock is taken before the holder is read, so two claimants never both win.
    this.claimRun = db.transaction((runId: string, owner: RunOwner, leaseMs: number): ClaimResult => {
      const run = this.selectRun.get(runId);
      if (!run) throw new StoreError('unknown-run', this.file, runId);
      const now = this.now();
      const holder = ownerOf(run);
      if (holder !== null && !mayClaim(holder, run.lease_until, owner, now)) return { ok: false, holder, leaseUntil: run.lease_until };
      this.takeRun.run({ id: runId, ...ownerParams(owner), leaseUntil: now + leaseMs });
      return { ok: true };
    });
  }

  createRun(run: NewRun): void {
    const { id, task, cwd, startedAt, owner } = run;
    try {
      // The working directory is not redacted: it is where the run may be resumed, and no secret is a path.
      const options = this.optionsText(run.options);
      const num = this.insertRun.immediate({
        id,
        task: this.redactor.text(task),
        cwd,
        options,
        startedAt,
        ...ownerParams(owner),
        leaseUntil: this.now() + run.leaseMs,
      });
      this.numbers.set(id, num);
    } catch (error) {
      throw this.conflict(error, `run ${id}`);
    }
    this.running.set(id, { agents: 0, requests: 0, input_tokens: 0, output_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 });
  }

  /**
   * `options` as `createRun` stores them, bounded and redacted: what `getRun` gives back. (The CLI
   * signs this form, so that a record that holds a secret still verifies once it is redacted.)
   */
  storedOptions(options: NewRun['options']): RunRow['options'] {
    return JSON.parse(this.optionsText(options)) as RunRow['options'];
  }

  private optionsText(options: NewRun['options']): string {
    return this.redactor.json(stringifyBounded(options));
  }

  getRun(id: string): RunRow | undefined {
    const r = this.selectStoredRun.get(id);
    if (!r) return undefined;
    const read = readRunColumns(r);
    if (!read.ok) throw new StoreError('damaged', this.file, `run ${id}: ${read.problem}`);
    return read.run;
  }

  listRuns(): RunListing[] {
    const now = this.now();
    return this.selectSummaries.all().map((r): RunListing => {
      const read = readRunColumns(r);
      if (!read.ok) return unreadableRun(r, read.problem);
      const run = read.run;
      let totals: ReturnType<typeof readTotals>;
      try {
        totals = readTotals(r.agents === null ? this.totalsOf(run.id) : r);
      } catch (error) {
        if (!(error instanceof StoreError) || error.kind !== 'damaged') throw error;
        return unreadableRun(r, 'its journal is not JSON');
      }
      if (!totals) return unreadableRun(r, 'its totals are not counts');
      return { ...run, status: reportedStatus(run, now), ...totals };
    });
  }

  /** One transaction for the batch: a taken (runId, seq) rolls all of it back. */
  append(rows: readonly JournalRow[]): void {
    try {
      this.checkpointer.committed(this.appendAll(rows));
    } catch (error) {
      throw this.conflict(error, 'a journal row of this batch (run and seq)');
    }
    // Counted once the rows are committed, as RUN_TOTALS would count them.
    for (const { runId, record } of rows) {
      const totals = this.running.get(runId);
      if (!totals) continue;
      if (record.type === 'session') totals.agents += 1;
      const spend = requestSpend(record);
      if (!spend) continue;
      totals.requests += spend.requests;
      totals.input_tokens += spend.usage.inputTokens;
      totals.output_tokens += spend.usage.outputTokens;
      totals.cache_creation_input_tokens += spend.usage.cacheCreationInputTokens;
      totals.cache_read_input_tokens += spend.usage.cacheReadInputTokens;
    }
  }

  journal(runId: string): JournalRow[] {
    const rows: JournalRow[] = [];
    const num = this.numberOf(runId, false);
    if (num === undefined) return rows;
    const damaged = (detail: string): StoreError => new StoreError('damaged', this.file, `run ${runId}: ${detail}`);
    for (const burst of this.selectJournal.all({ base: num * SEQ_SPAN, end: (num + 1) * SEQ_SPAN })) {
      const parsed = typeof burst.records === 'string' ? parseJson(burst.records) : undefined;
      if (!parsed) throw damaged(`its journal is not JSON from record ${burst.seq} on`);
      if (!Array.isArray(parsed.value)) throw damaged(`its journal is not a list of records from record ${burst.seq} on`);
      for (const [i, stored] of (parsed.value as unknown[]).entries()) {
        const seq = burst.seq + i;
        if (!Array.isArray(stored) || stored.length !== 3) throw damaged(`journal record ${seq}: not [session, time, record]`);
        const read = readJournalRow(runId, seq, stored[0], stored[1], stored[2]);
        if ('problem' in read) throw damaged(read.problem);
        rows.push(read.row);
      }
    }
    return rows;
  }

  claim(runId: string, owner: RunOwner, leaseMs: number): ClaimResult {
    let claimed: ClaimResult;
    try {
      claimed = this.claimRun.immediate(runId, owner, leaseMs);
    } catch (error) {
      throw writeFailure(error, this.file);
    }
    if (claimed.ok) this.running.set(runId, { ...this.totalsOf(runId) });
    return claimed;
  }

  renew(runId: string, owner: RunOwner, leaseMs: number): boolean {
    return this.extendLease.run({ id: runId, token: owner.token, leaseUntil: this.now() + leaseMs }).changes === 1;
  }

  /** Lets go of the run and writes its totals, so `listRuns` need not read its journal again. */
  release(runId: string, owner: RunOwner, status: RunStatus): void {
    try {
      this.letGoWithTotals(runId, owner, status);
    } catch (error) {
      throw writeFailure(error, this.file);
    }
    this.running.delete(runId);
  }

  /** The run's number (see SEQ_SPAN); a run this store has no row for is `unknown-run`, or undefined if not `required`. */
  private numberOf(runId: string): number;
  private numberOf(runId: string, required: false): number | undefined;
  private numberOf(runId: string, required = true): number | undefined {
    let num = this.numbers.get(runId);
    if (num === undefined) {
      const row = this.selectNumber.get(runId);
      if (row === undefined) {
        if (required) throw new StoreError('unknown-run', this.file, runId);
        return undefined;
      }
      // Where the run's journal lies: a number of another type would find no journal, and a resume would start the run afresh.
      const stored = row.num;
      if (typeof stored !== 'number' || !Number.isSafeInteger(stored) || stored < 1 || stored > MAX_RUN_NUMBER)
        throw new StoreError('damaged', this.file, `run ${runId}: its number is not a count`);
      num = stored;
      this.numbers.set(runId, num);
    }
    return num;
  }

  private totalsOf(runId: string): TotalsColumns {
    try {
      return this.selectTotals.get(runId) as TotalsColumns;
    } catch (error) {
      // SQLite's JSON functions refuse a burst that is not JSON: that run's journal is damaged, not the store.
      if (error instanceof Database.SqliteError && /malformed JSON/i.test(error.message))
        throw new StoreError('damaged', this.file, `run ${runId}: its journal is not JSON`, { cause: error });
      throw error;
    }
  }

  close(): void {
    this.checkpointer.close();
    if (!this.db.open) return;
    // What SQLite does when the last connection closes, which this one may not be (the worker's
    // closes on its own time): the WAL copied back and emptied. Without waiting: if another
    // process reads the file now, the WAL stays for the next checkpoint.
    try {
      this.db.pragma('busy_timeout = 0');
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    } catch {
      // Busy or read-only: the WAL is still part of the database; nothing is lost.
    }
    this.db.close();
  }

  /** A primary key taken is the caller's conflict; a corrupt page, the file's; no room, `unwritable`; anything else, as SQLite said. */
  private conflict(error: unknown, what: string): unknown {
    if (!(error instanceof Database.SqliteError)) return error;
    if (error.code === 'SQLITE_CONSTRAINT_PRIMARYKEY') return new StoreError('conflict', this.file, what, { cause: error });
    if (error.code.startsWith('SQLITE_CORRUPT')) return new StoreError('corrupt', this.file, error.message, { cause: error });
    return writeFailure(error, this.file);
  }
}

/** Opens (or creates) the store at `file`; see `SqliteRunStore`. */
export function openSqliteStore(file: string, options: StoreOptions = {}): SqliteRunStore {
  return new SqliteRunStore(file, options);
}

/** `rows` cut where the run changes or seqs stop being consecutive: each piece is one stored burst. */
function burstsOf(rows: readonly JournalRow[]): JournalRow[][] {
  const bursts: JournalRow[][] = [];
  let current: JournalRow[] = [];
  for (const row of rows) {
    const previous = current.at(-1);
    if (previous && (previous.runId !== row.runId || previous.seq + 1 !== row.seq)) {
      bursts.push(current);
      current = [];
    }
    current.push(row);
  }
  if (current.length > 0) bursts.push(current);
  return bursts;
}

/** Exactly the owner's three columns: a caller's owner object may carry more. */
function ownerParams({ host, pid, token }: RunOwner): { host: string; pid: number; token: string } {
  return { host, pid, token };
}

function ownerOf(r: RunColumns): RunOwner | null {
  return r.owner_token === null ? null : { host: r.owner_host ?? '', pid: r.owner_pid ?? 0, token: r.owner_token };
}
