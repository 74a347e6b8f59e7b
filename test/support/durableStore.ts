import type { MemoryRunStore } from '../../src/store/memoryStore.js';
import type { ClaimResult, JournalRow, NewRun, RunOwner, RunRow, RunStatus, RunStore, RunSummary } from '../../src/store/runStore.js';

/**
 * Crash points for durability tests.
 *
 * A durable run writes its journal in bursts, one atomic `store.append` each, and a process can
 * only die between two of them (src/store/runJournal.ts). So the store as it is right after
 * append k IS what a crash just before append k+1 leaves behind: `RecordingStore` keeps a frozen
 * copy of the store after every append, and a test "crashes" the run at k by resuming a copy of
 * frozen copy k while the original process is stopped (or simply ignored).
 */
export interface FrozenStore {
  /** 1-based: the store as it was right after the k-th append. */
  readonly append: number;
  /** The rows that append wrote (one burst). */
  readonly rows: readonly JournalRow[];
  /** A deep copy of the whole store at that instant: clone it again before resuming from it. */
  readonly store: MemoryRunStore;
}

/**
 * Wraps a `MemoryRunStore`; every append is kept as a frozen copy (see the note above).
 *
 * `asynchronous`: appends answer with a promise, and the rows are written (and frozen) only when
 * it settles, a macrotask later, as a networked store would: the journal must then hold every
 * effect back until the records that planned it are written.
 */
export class RecordingStore implements RunStore {
  readonly frozen: FrozenStore[] = [];
  /** Called after each append (with its frozen copy), synchronously, inside the journal's write. */
  onAppend: ((frozen: FrozenStore) => void) | undefined;

  constructor(
    readonly inner: MemoryRunStore,
    private readonly options: { readonly asynchronous?: boolean } = {},
  ) {}

  append(rows: readonly JournalRow[]): void | Promise<void> {
    if (!this.options.asynchronous) return this.write(rows);
    const copy = structuredClone(rows);
    return new Promise((resolve, reject) => {
      setImmediate(() => {
        try {
          this.write(copy);
          resolve();
        } catch (error) {
          reject(error instanceof Error ? error : new Error(String(error)));
        }
      });
    });
  }

  private write(rows: readonly JournalRow[]): void {
    this.inner.append(rows);
    const frozen: FrozenStore = { append: this.frozen.length + 1, rows: structuredClone(rows), store: this.inner.clone() };
    this.frozen.push(frozen);
    this.onAppend?.(frozen);
  }

  get appends(): number {
    return this.frozen.length;
  }

  /** The store right after the run was created, before any append: a crash at append 0. */
  created: MemoryRunStore | undefined;

  createRun(run: NewRun): void {
    this.inner.createRun(run);
    this.created = this.inner.clone();
  }
  getRun(id: string): RunRow | undefined {
    return this.inner.getRun(id);
  }
  listRuns(): RunSummary[] {
    return this.inner.listRuns();
  }
  journal(runId: string): JournalRow[] {
    return this.inner.journal(runId);
  }
  claim(runId: string, owner: RunOwner, leaseMs: number): ClaimResult {
    return this.inner.claim(runId, owner, leaseMs);
  }
  renew(runId: string, owner: RunOwner, leaseMs: number): boolean {
    return this.inner.renew(runId, owner, leaseMs);
  }
  release(runId: string, owner: RunOwner, status: RunStatus): void {
    this.inner.release(runId, owner, status);
  }
  close(): void {
    this.inner.close();
  }
}

/**
 * A clock for stores whose runs are resumed in the same process that 'crashed': the crashed
 * owner is this very (live) process, so its lease must be made to look expired. Stores made
 * with `clock.now` see the time `skew` ahead; `expireLeases()` moves it past every lease.
 */
export class SkewedClock {
  private skew = 0;
  readonly now = (): number => Date.now() + this.skew;
  expireLeases(): void {
    this.skew += 3_600_000;
  }
}
