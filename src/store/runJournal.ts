import type { JournalRecord } from '../engine/log/journalRecord.js';
import { type GroupMember, groupCommitOf, type GroupCommit } from './groupCommit.js';
import type { JournalRow, RunStore } from './runStore.js';

/** One session's way into its run's journal. */
export interface SessionJournal {
  append(record: JournalRecord): void;
  /** The session has stopped and appends nothing more (see `RunJournal.barrier`). */
  close(): void;
}

/**
 * The write side of a durable run: sessions append records as they make them, and the journal
 * writes them to the store in bursts, with the bursts of every other run on the same store in
 * this process (`GroupCommit`): one atomic `append` for all of them.
 *
 * A burst is everything the sessions did in one turn of the event loop: it is written by a
 * `setImmediate`, once every callback of that turn (each with its macrosteps) has run, or as soon
 * as the group holds 128 records. Model requests and tool batches wait for it (`barrier`): no
 * tool runs before the records that planned it are stored, no request shows the model what the
 * journal does not hold, and a crash leaves the store at the boundary between two writes, never
 * inside one. Sessions that act in the same turn (a wave of sub-agents answered together, the
 * runs of a worker) share one write: a commit is most of a step's cost. A store down to one open
 * session writes when that session waits (see `barrier`), without waiting for the turn's end.
 * Records are a step's new content only (a committed message, a tool result, a delivery): the
 * bytes written per step do not grow with the history.
 */
export class RunJournal {
  private buffer: JournalRow[] = [];
  /** Resolves once the buffered rows are written; made with the burst's first record. */
  private burst: Deferred | undefined;
  /** The rows handed to a group write that has not settled yet. */
  private handed: Deferred | undefined;
  private readonly group: GroupCommit;
  private readonly member: GroupMember = {
    take: () => {
      const rows = this.buffer;
      this.buffer = [];
      this.handed = this.burst;
      this.burst = undefined;
      return rows;
    },
    written: () => this.settleHanded(),
    failed: (error) => {
      this.fail(error);
      this.settleHanded();
    },
  };
  private failure: Error | undefined;
  private sealed = false;

  /**
   * @param nextSeq the seq of the next record (1 for a new run; one past the last for a resume).
   * @param onError called once if the store cannot be written; the run cannot stay durable then.
   */
  constructor(
    readonly store: Pick<RunStore, 'append'>,
    readonly runId: string,
    private nextSeq: number,
    private readonly onError: (error: Error) => void = (error) => {
      throw error;
    },
  ) {
    this.group = groupCommitOf(store);
  }

  /** The journal of one session (by agent id). */
  open(agentId: string): SessionJournal {
    this.group.openSessions++;
    let open = true;
    return {
      append: (record) => this.push(agentId, record),
      close: () => {
        if (!open) return;
        open = false;
        this.group.openSessions--;
      },
    };
  }

  /** A run-level record (interrupt, resume). */
  mark(record: JournalRecord): void {
    this.push('', record);
  }

  /**
   * Takes no more records; those made before are still written (`flush`). For a session set down
   * where its journal stands, to be taken up from there (parked, or handed back by a stopping
   * worker): stopping its actor would otherwise record it as cancelled, and its open calls answered.
   */
  seal(): void {
    this.sealed = true;
  }

  private push(session: string, record: JournalRecord): void {
    if (this.failure || this.sealed) return;
    this.buffer.push({ runId: this.runId, seq: this.nextSeq++, session, ts: Date.now(), record });
    if (!this.burst) {
      this.burst = deferred();
      this.group.add(this.member);
    }
    this.group.counted();
  }

  private settleHanded(): void {
    const handed = this.handed;
    this.handed = undefined;
    handed?.resolve();
  }

  /**
   * Writes what is buffered now, with what the other journals of its store buffered. For a
   * synchronous store it is written when this returns; a store that answers with a promise is
   * written in order, one write after the other, and the promise returned settles when this
   * journal's rows are.
   */
  flush(): Promise<void> | undefined {
    this.group.flush();
    return this.barrier();
  }

  /**
   * What a model request or a tool batch waits for before it starts: the burst being made (written
   * at the end of this turn of the event loop, or in a microtask when one session is left on the
   * store), or a write still under way; undefined when everything recorded is written. It also
   * settles if the write fails (the run is then being cancelled: `onError`).
   */
  barrier(): Promise<void> | undefined {
    // A store down to one session has no other session to share the write with: the burst is
    // written as soon as the step that asks has made its records (a microtask, after the
    // macrostep that asks), not a turn of the event loop later. That turn was 4–5 µs of a
    // durable step (measured, single-agent loop).
    if (this.burst && this.group.openSessions <= 1) this.group.flushSoon();
    return (this.burst ?? this.handed)?.promise;
  }

  /** Set once the store could not be written. */
  get error(): Error | undefined {
    return this.failure;
  }

  private fail(error: Error): void {
    if (this.failure) return;
    this.failure = error;
    this.buffer = [];
    const burst = this.burst;
    this.burst = undefined;
    burst?.resolve();
    this.onError(this.failure);
  }
}

interface Deferred {
  readonly promise: Promise<void>;
  readonly resolve: () => void;
}

function deferred(): Deferred {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}
