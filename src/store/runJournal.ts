import type { JournalRecord } from '../engine/log/journalRecord.js';
import type { JournalRow, RunStore } from './runStore.js';

/** One session's way into its run's journal. */
export interface SessionJournal {
  append(record: JournalRecord): void;
  /** The session has stopped and appends nothing more (see `RunJournal.barrier`). */
  close(): void;
}

/**
 * Records a burst holds at most: past this, the burst is written at once, mid-turn. A wave of
 * 10,000 sub-agents answered together appends 18,000 records in one turn; buffered until its end,
 * all of them (and every session's step, waiting on one barrier) lived through the turn's
 * scavenges into the old generation, and a sub-agent cost 1.4× more at 10,000 than at 200
 * (measured). Written in slices, a wave costs the same per sub-agent at any width; each slice is
 * one more commit, which in WAL mode with synchronous=NORMAL is cheap.
 */
const MAX_BURST_RECORDS = 128;

/**
 * The write side of a durable run: sessions append records as they make them, and the journal
 * writes them to the store in bursts, each burst one atomic `append`.
 *
 * A burst is everything the sessions did in one turn of the event loop: it is written by a
 * `setImmediate`, once every callback of that turn (each with its macrosteps) has run, or as soon
 * as it holds MAX_BURST_RECORDS records. Model requests and tool batches wait for it (`barrier`): no tool runs before the records that planned
 * it are stored, no request shows the model what the journal does not hold, and a crash leaves the
 * store at the boundary between two bursts, never inside one. Sessions that act
 * in the same turn (a wave of sub-agents answered together) share one write: a commit is most of a
 * step's cost, and a microtask per burst made one commit per sub-agent per step. A run down to one
 * session writes when that session waits (see `barrier`), without waiting for the turn's end. Records are a
 * step's new content only (a committed message, a tool result, a delivery): the bytes written per
 * step do not grow with the history.
 */
export class RunJournal {
  private buffer: JournalRow[] = [];
  /**
   * Resolves once the buffered burst is written (made with the burst's first record); `timer`
   * writes it at the end of this turn of the event loop, unless it is written sooner.
   */
  private burst: { readonly written: Promise<void>; readonly resolve: () => void; timer: NodeJS.Immediate | undefined } | undefined;
  /** Sessions opened and not closed: the ones that may still append. */
  private openSessions = 0;
  private pending: Promise<void> | undefined;
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
  ) {}

  /** The journal of one session (by agent id). */
  open(agentId: string): SessionJournal {
    this.openSessions++;
    let open = true;
    return {
      append: (record) => this.push(agentId, record),
      close: () => {
        if (!open) return;
        open = false;
        this.openSessions--;
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
    if (this.buffer.length >= MAX_BURST_RECORDS) {
      void this.flush();
      return;
    }
    if (!this.burst) {
      let resolve = (): void => undefined;
      const written = new Promise<void>((done) => (resolve = done));
      this.burst = { written, resolve, timer: setImmediate(this.flushBurst) };
    }
  }

  private readonly flushBurst = (): void => {
    void this.flush();
  };

  /**
   * Writes what is buffered now. For a synchronous store it is written when this returns; a
   * store that answers with a promise is written in order, one burst after the other, and the
   * promise returned settles when this burst is.
   */
  flush(): Promise<void> | undefined {
    const burst = this.burst;
    this.burst = undefined;
    if (burst?.timer) clearImmediate(burst.timer);
    if (this.buffer.length === 0 || this.failure) {
      burst?.resolve();
      return this.pending;
    }
    const rows = this.buffer;
    this.buffer = [];
    const write = (): Promise<void> | undefined => {
      try {
        const written = this.store.append(rows);
        if (written) return written.catch((error: unknown) => this.fail(error));
      } catch (error) {
        this.fail(error);
      }
      return undefined;
    };
    const after = this.pending;
    const written = after ? after.then(write) : write();
    if (!written) {
      burst?.resolve();
      return undefined;
    }
    const current = written.finally(() => {
      if (this.pending === current) this.pending = undefined;
      burst?.resolve();
    });
    this.pending = current;
    return current;
  }

  /**
   * What a model request or a tool batch waits for before it starts: the burst being made (written
   * at the end of this turn of the event loop, or in a microtask when one session is left), or a
   * write still under way; undefined when everything recorded is written. It also settles if the
   * write fails (the run is then being cancelled: `onError`).
   */
  barrier(): Promise<void> | undefined {
    const burst = this.burst;
    // A run down to one session has no other session to share the write with: the burst is
    // written as soon as the step that asks has made its records (a microtask, after the
    // macrostep that asks), not a turn of the event loop later. That turn was 4–5 µs of a
    // durable step (measured, single-agent loop).
    if (burst?.timer && this.openSessions <= 1) {
      clearImmediate(burst.timer);
      burst.timer = undefined;
      queueMicrotask(this.flushBurst);
    }
    return burst?.written ?? this.pending;
  }

  /** Set once the store could not be written. */
  get error(): Error | undefined {
    return this.failure;
  }

  private fail(error: unknown): void {
    if (this.failure) return;
    this.failure = error instanceof Error ? error : new Error(String(error));
    this.buffer = [];
    this.onError(this.failure);
  }
}
