import type { JobQueue, Queued, QueuedJob } from './jobStore.js';
import type { JournalRow } from './runStore.js';
import { concernsOneRun } from './storeError.js';

/** Writes rows (of any runs) and the jobs they queue in one transaction: `appendShared` over a store's connection. */
export type CommitWrite = (rows: readonly JournalRow[], queued: readonly Queued[]) => Promise<void>;

interface Waiting {
  readonly rows: readonly JournalRow[];
  readonly queued: Queued | undefined;
  readonly resolve: () => void;
  readonly reject: (error: unknown) => void;
}

/**
 * Group commit for the sessions of spread runs (`JobStore.commit`): each session is a job with a
 * journal of its own, and each committed alone — a worker holding hundreds of sessions made a
 * round trip and a transaction per session per step. Here the commits asked for in one turn of the
 * event loop, and those asked for while a write is under way, go in one transaction: the rows of
 * every session (each run's numbered in commit order) and every job they queue.
 *
 * Each caller's promise settles when its own rows are committed (or refused), as `commit`'s did:
 * the guarantee each session waits on is unchanged. One write at a time; a group refused for one
 * run's sake (its row gone, a seq taken) is written again caller by caller, so that run's
 * sessions alone are refused.
 */
export class SharedCommits {
  private waiting: Waiting[] = [];
  private timer: NodeJS.Immediate | undefined;
  private inFlight = false;

  constructor(private readonly write: CommitWrite) {}

  /** Commits `rows` with the jobs `queued`, with whatever else is committed in this turn. */
  commit(rows: readonly JournalRow[], queued?: Queued): Promise<void> {
    // As `commit` alone: no rows, nothing written (the jobs a commit queues are started by its rows).
    if (rows.length === 0) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ rows, queued, resolve, reject });
      if (!this.timer && !this.inFlight) this.timer = setImmediate(this.flush);
    });
  }

  private readonly flush = (): void => {
    this.timer = undefined;
    if (this.inFlight || this.waiting.length === 0) return;
    const group = this.waiting;
    this.waiting = [];
    this.inFlight = true;
    void this.writeGroup(group).finally(() => {
      this.inFlight = false;
      // What was asked for while the write was under way goes now, in one write.
      if (this.waiting.length > 0) this.flush();
    });
  };

  private async writeGroup(group: readonly Waiting[]): Promise<void> {
    try {
      await this.write(
        group.length === 1 ? (group[0] as Waiting).rows : group.flatMap((one) => one.rows),
        group.flatMap((one) => (one.queued ? [one.queued] : [])),
      );
    } catch (error) {
      if (group.length === 1 || !concernsOneRun(error)) {
        for (const one of group) one.reject(error);
        return;
      }
      for (const one of group) {
        try {
          await this.write(one.rows, one.queued ? [one.queued] : []);
          one.resolve();
        } catch (own) {
          one.reject(own);
        }
      }
      return;
    }
    for (const one of group) one.resolve();
  }
}

/** The jobs of several commits, each queue's in one `insert`, in the order they were asked for. */
export function jobsByQueue(queued: readonly Queued[]): Map<JobQueue, QueuedJob[]> {
  const byQueue = new Map<JobQueue, QueuedJob[]>();
  for (const { queue, jobs } of queued) {
    const list = byQueue.get(queue);
    if (list) list.push(...jobs);
    else byQueue.set(queue, [...jobs]);
  }
  return byQueue;
}
