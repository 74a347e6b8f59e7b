import { hostname } from 'node:os';
import type { Redactor } from '../engine/redact.js';
import { StoreError } from './storeError.js';
import { requestSpend } from './requestSpend.js';
import type { ClaimResult, JournalRow, NewRun, RunOwner, RunRow, RunStatus, RunStore, RunSummary } from './runStore.js';

/** What both stores take besides their file: a clock, so tests can move leases past expiry. */
export interface StoreOptions {
  /** Milliseconds since the epoch; `Date.now` by default. */
  readonly now?: () => number;
  /**
   * Secrets kept out of what a store writes to disk (default: those of `process.env`; see
   * redact.ts). A store in memory keeps values as they are: nothing leaves the process.
   */
  readonly redactor?: Redactor;
}

/**
 * Whether a process with this pid exists on this host. `kill(pid, 0)` sends nothing: ESRCH says
 * there is no such process; EPERM says there is one we may not signal (alive). A pid that cannot
 * name one process (0 and negatives address process groups) is no owner.
 */
function processAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/**
 * The one liveness rule both stores share: an owner holds its run while its lease runs and, when
 * it is on this host, while its process exists. A process on another host is taken at its lease's
 * word: its pid means nothing here.
 */
function isOwnerAlive(owner: RunOwner | null, leaseUntil: number, now: number, host: string = hostname()): boolean {
  if (owner === null || leaseUntil < now) return false;
  return owner.host !== host || processAlive(owner.pid);
}

/** A claim succeeds over a dead holder, and for the holder itself (same token: a re-claim). */
export function mayClaim(holder: RunOwner | null, leaseUntil: number, claimant: RunOwner, now: number): boolean {
  return holder === null || holder.token === claimant.token || !isOwnerAlive(holder, leaseUntil, now);
}

/** The status `listRuns` shows: `running` with no live owner is a run a SIGKILL left behind. */
export function reportedStatus(run: RunRow, now: number): RunStatus {
  return run.status === 'running' && !isOwnerAlive(run.owner, run.leaseUntil, now) ? 'interrupted' : run.status;
}

/**
 * Runs kept in memory: for tests and for hosts that want no file. Same semantics as
 * `SqliteRunStore` (conflicts, liveness, aggregates, ordering); values are copied in and out, as a
 * database would, so a caller's later mutation never reaches the store.
 */
export class MemoryRunStore implements RunStore {
  private runs = new Map<string, RunRow>();
  /** Journal rows by run id, then seq. */
  private rows = new Map<string, Map<number, JournalRow>>();

  constructor(private readonly options: StoreOptions = {}) {}

  /** A deep copy of every row: crash tests freeze the store at a point and resume from the copy. */
  clone(): MemoryRunStore {
    const copy = new MemoryRunStore(this.options);
    copy.runs = structuredClone(this.runs);
    copy.rows = structuredClone(this.rows);
    return copy;
  }

  createRun(run: NewRun): void {
    if (this.runs.has(run.id)) throw new StoreError('conflict', undefined, `run ${run.id}`);
    const { id, task, cwd, options, startedAt, owner, leaseMs } = run;
    const row: RunRow = { id, task, cwd, options, startedAt, status: 'running', owner, leaseUntil: this.now() + leaseMs, endedAt: null };
    this.runs.set(id, structuredClone(row));
  }

  getRun(id: string): RunRow | undefined {
    const run = this.runs.get(id);
    return run && structuredClone(run);
  }

  listRuns(): RunSummary[] {
    const now = this.now();
    const runs = [...this.runs.values()].sort((a, b) => b.startedAt - a.startedAt || (a.id < b.id ? 1 : a.id > b.id ? -1 : 0));
    return runs.map((run) => {
      const usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
      let agents = 0;
      let requests = 0;
      for (const { record } of this.rows.get(run.id)?.values() ?? []) {
        if (record.type === 'session') agents++;
        const spend = requestSpend(record);
        if (!spend) continue;
        requests += spend.requests;
        for (const key of Object.keys(usage) as (keyof typeof usage)[]) usage[key] += spend.usage[key] ?? 0;
      }
      return { ...structuredClone(run), status: reportedStatus(run, now), agents, requests, usage };
    });
  }

  /** All or nothing: every row is checked for a taken (runId, seq) before any is kept. */
  append(rows: readonly JournalRow[]): void {
    const batch = new Set<string>();
    for (const { runId, seq } of rows) {
      const key = `${runId}\u0000${seq}`;
      if (batch.has(key) || this.rows.get(runId)?.has(seq)) throw new StoreError('conflict', undefined, `journal row ${seq} of run ${runId}`);
      batch.add(key);
    }
    for (const row of rows) {
      let journal = this.rows.get(row.runId);
      if (!journal) this.rows.set(row.runId, (journal = new Map()));
      journal.set(row.seq, structuredClone(row));
    }
  }

  journal(runId: string): JournalRow[] {
    const rows = [...(this.rows.get(runId)?.values() ?? [])];
    return structuredClone(rows.sort((a, b) => a.seq - b.seq));
  }

  claim(runId: string, owner: RunOwner, leaseMs: number): ClaimResult {
    const run = this.runs.get(runId);
    if (!run) throw new StoreError('unknown-run', undefined, runId);
    const now = this.now();
    if (run.owner !== null && !mayClaim(run.owner, run.leaseUntil, owner, now)) {
      return { ok: false, holder: structuredClone(run.owner), leaseUntil: run.leaseUntil };
    }
    this.runs.set(runId, { ...run, status: 'running', owner: structuredClone(owner), leaseUntil: now + leaseMs, endedAt: null });
    return { ok: true };
  }

  renew(runId: string, owner: RunOwner, leaseMs: number): boolean {
    const run = this.runs.get(runId);
    if (!run || run.owner?.token !== owner.token) return false;
    this.runs.set(runId, { ...run, leaseUntil: this.now() + leaseMs });
    return true;
  }

  release(runId: string, owner: RunOwner, status: RunStatus): void {
    const run = this.runs.get(runId);
    if (!run || run.owner?.token !== owner.token) return;
    const endedAt = status === 'running' ? null : this.now();
    this.runs.set(runId, { ...run, status, owner: null, leaseUntil: 0, endedAt });
  }

  close(): void {}

  private now(): number {
    return (this.options.now ?? Date.now)();
  }
}
