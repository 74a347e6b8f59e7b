import type Database from 'better-sqlite3';
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Copies a SQLite store's write-ahead log back into its file off the event loop.
 *
 * SQLite's own automatic checkpoint runs inside the commit that crosses the threshold, on the
 * thread that commits: a run's event loop stalls while megabytes are copied and synced, and on
 * average it was a third of a journal write's cost. Here the writing connection never checkpoints
 * by itself (`wal_autocheckpoint = 0`); once about `everyPages` pages have been committed, a worker
 * thread with a connection of its own runs a PASSIVE checkpoint, which never blocks the writer nor
 * a reader: the copying and syncing happen there, and the writer finishes the job now and then
 * (see `inline`), so the WAL stays bounded.
 *
 * Hand-written because neither better-sqlite3 nor SQLite offers a background checkpointer, and
 * the WAL hook that would count frames exactly is not exposed: pages are estimated from what was
 * written (one per commit plus the rows' bytes in 4 KiB pages), which only shifts when a checkpoint
 * runs. If the worker cannot run (it failed to start or open the file), the writing connection
 * checkpoints inline, as SQLite would have.
 */
export class WalCheckpointer {
  /** Pages committed since the last checkpoint was asked for (an estimate). */
  private pages = 0;
  private worker: Worker | undefined;
  private running = false;
  private failed = false;
  /**
   * One word shared with the worker: IDLE, CHECKPOINTING or CLOSED. `close` waits on it for a
   * checkpoint in progress, so the store's closing checkpoint does not find the log locked.
   */
  private readonly state = new Int32Array(new SharedArrayBuffer(4));

  /**
   * @param db the writing connection; its automatic checkpoints are turned off here.
   * @param file the database file the worker opens.
   * @param everyPages pages committed between two checkpoints (SQLite's default is 1,000).
   */
  constructor(
    private readonly db: Database.Database,
    private readonly file: string,
    private readonly everyPages = 1_000,
  ) {
    db.pragma('wal_autocheckpoint = 0');
  }

  /** Counts a commit of `bytes` bytes of rows; starts a checkpoint when one is due. */
  committed(bytes: number): void {
    this.pages += 1 + Math.ceil(bytes / PAGE_BYTES);
    if (this.pages < this.everyPages) return;
    if (this.failed) {
      this.inline();
      return;
    }
    if (this.running) return;
    this.running = true;
    this.pages = 0;
    this.start().postMessage('checkpoint');
  }

  /**
   * Stops the worker; its connection closes with it. Returns once no checkpoint of the worker's
   * runs (waiting at most `waitMs` for one in progress): SQLite lets one checkpoint run at a time
   * and fails any other at once, so the store's closing checkpoint, which empties the WAL, would
   * otherwise leave a WAL of up to `CATCH_UP_AFTER` × `everyPages` pages behind at random.
   */
  close(waitMs = CLOSE_WAIT_MS): void {
    const worker = this.worker;
    this.worker = undefined;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const was = Atomics.compareExchange(this.state, 0, IDLE, CLOSED);
      if (was !== CHECKPOINTING) break;
      const left = deadline - Date.now();
      if (left <= 0) break;
      Atomics.wait(this.state, 0, CHECKPOINTING, left);
    }
    void worker?.terminate();
  }

  /**
   * A checkpoint on the writing connection. Under a writer that never pauses, the worker's
   * checkpoints never reach the WAL's end (each commit lands after the snapshot they copy), and
   * SQLite restarts the WAL only once all of it is in the file: the writer then copies the
   * little the worker left over itself, between two of its own commits, so the WAL starts over.
   * It does so once the worker finds the WAL `CATCH_UP_AFTER` times the checkpoint interval long.
   */
  private inline(): void {
    this.pages = 0;
    try {
      if (this.db.open) this.db.pragma('wal_checkpoint(PASSIVE)');
    } catch {
      // A checkpoint that cannot write (a full disk, a file-size limit) copies nothing: the WAL
      // keeps every commit, and the next checkpoint tries again. It must not fail the commit that
      // asked for it, nor throw from the worker's message.
    }
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { driver: DRIVER, file: this.file, state: this.state } });
    worker.on('message', (walFrames: number) => {
      this.running = false;
      if (walFrames >= this.everyPages * CATCH_UP_AFTER) this.inline();
    });
    const fail = (): void => {
      this.failed = true;
      this.running = false;
      if (this.worker === worker) this.worker = undefined;
    };
    worker.on('error', fail);
    worker.on('exit', fail);
    // A checkpoint is housekeeping: it never keeps the process alive. (After the listeners: adding
    // one refs the worker again.)
    worker.unref();
    this.worker = worker;
    return worker;
  }
}

/** A WAL this many times `everyPages` frames long is finished by the writer (about 16 MB). */
const CATCH_UP_AFTER = 4;

/** The shared state word's values. */
const IDLE = 0;
const CHECKPOINTING = 1;
const CLOSED = 2;

/** How long `close` waits for the worker's checkpoint in progress (one copies at most about 16 MB). */
const CLOSE_WAIT_MS = 5_000;

/** SQLite's default page size; what a commit writes is estimated in pages of it. */
const PAGE_BYTES = 4096;

/** The driver's entry, resolved here so the worker loads the very module this process uses. */
const DRIVER = createRequire(import.meta.url).resolve('better-sqlite3');

/**
 * The worker: its own connection to the file, a PASSIVE checkpoint per request unless the store
 * is closing (the state word taken from IDLE to CHECKPOINTING and back), and when done, the WAL's
 * length in frames as it found it. An error (the file gone, a busy lock) ends the worker; the
 * store then checkpoints inline. Plain CommonJS so the same text runs from `src/` under vitest and from `dist/`.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true, timeout: 1000 });
const state = workerData.state;
parentPort.on('message', () => {
  if (Atomics.compareExchange(state, 0, ${IDLE}, ${CHECKPOINTING}) !== ${IDLE}) return;
  let log = 0;
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    log = result ? result.log : 0;
  } finally {
    Atomics.store(state, 0, ${IDLE});
    Atomics.notify(state, 0);
  }
  parentPort.postMessage(log);
});
`;
