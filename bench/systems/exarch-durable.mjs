// exarch with durability on: each run is a durable run (`startRun`) journaled into a SQLite store
// (better-sqlite3, WAL, synchronous=NORMAL), with exarch's own workloads, providers and tools.
//
// The store: one fresh file per cell process, in a temporary directory on the machine's disk,
// opened by the first run (in the warm-up) and removed when the process exits. Every run is a new
// run in it, as a host's `.exarch/exarch.db` holds one run after another: opening the file and
// creating its schema are not counted per step, while everything a run writes is (its `runs` row,
// every journal burst, the write-ahead log's checkpoints when they fall due, the final release).
//
// `written('loop', steps)` measures what one run writes, on a store of its own (not timed).
// The library's own better-sqlite3 (bench/node_modules holds another, LangGraph's), so the cell loads one copy.
import Database from '../../node_modules/better-sqlite3/lib/index.js';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { startRun } from '../../dist/src/index.js';
import { benchTmp, bytesWritten, sizeOf } from '../durableFigures.mjs';
import { openSqliteStore } from '../../dist/src/store/sqliteStore.js';
import { workloadsWith } from './exarch.mjs';

export const label = 'exarch, durable (SQLite)';
export const packages = ['better-sqlite3'];
/** What a step stores (bench/run.mjs prints it under the durable table), and the system it adds durability to. */
export const checkpoints =
  "a journal burst per turn: the records the turn adds (the model's message and usage, each tool call and its result), appended in one commit shared by every session and run that stepped in that turn (group commit); nothing written before is written again";
export const inMemory = 'exarch';

/** Temporary directories this process made, removed on exit (a killed cell's go with the directory bench/run.mjs gave it). */
const made = [];
process.on('exit', () => {
  for (const { dir, store } of made) {
    store?.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

function freshStore() {
  const dir = mkdtempSync(join(benchTmp(), 'exarch-bench-durable-'));
  const file = join(dir, 'exarch.db');
  const entry = { dir, file, store: openSqliteStore(file) };
  made.push(entry);
  return entry;
}

/** Runs a session's input as a durable run on `store`; resolves once the run has settled and its journal is written. */
export function durableOn(store, onRun) {
  return async ({ task, ...session }) => {
    const run = await startRun(task, session, { store });
    onRun?.(run.id);
    const result = await run.result;
    if (result.status !== 'done')
      throw new Error(`exarch durable: run ${run.id} ended ${result.status}${result.storeError ? ` (${result.storeError.message})` : ''}`);
    // The tree is stopped by now; the root still holds the session (transcript), as exarch's does.
    return run.actor;
  };
}

/** The cell's store, opened by its first run. */
let durable;
const timed = workloadsWith((input) => (durable ??= durableOn(freshStore().store))(input));

export const loop = timed.loop;
export const fanout = timed.fanout;
export const stream = timed.stream;

/**
 * What one run of the loop writes, on a fresh store (other workloads: undefined): its counts, and
 * - `journalRows`, `journalBytes`: the run's journal rows and the bytes of their bodies (the JSON
 *   records), as SQLite counts them;
 * - `fileBytes`: how much the database file grew, once closed (closing checkpoints the write-ahead
 *   log into it and removes the log: the size right after a run is the log's high-water mark,
 *   which SQLite caps and reuses, not growth);
 * - `diskBytes`: the bytes handed to write(2) during the run (log frames, whole pages, and any
 *   checkpoint that fell due), Linux only.
 * Throws if the journal holds nothing for the run: a durable run that did not journal is skipped work.
 */
export async function written(workload, size) {
  if (workload !== 'loop') return undefined;
  const { dir, file, store } = freshStore();
  let runId;
  const before = { file: sizeOf(file) + sizeOf(`${file}-wal`), disk: bytesWritten() };
  const { keep, ...counts } = await workloadsWith(durableOn(store, (id) => (runId = id)))[workload](size);
  const disk = bytesWritten();
  keep?.stop();
  store.close();
  const fileBytes = sizeOf(file) + sizeOf(`${file}-wal`) - before.file;
  const db = new Database(file, { readonly: true, fileMustExist: true });
  let rows;
  try {
    rows = db.prepare('SELECT count(*) AS n, coalesce(sum(length(CAST(body AS BLOB))), 0) AS bytes FROM journal WHERE run_id = ?').get(runId);
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
  if (!(rows.n > 0 && rows.bytes > 0)) throw new Error(`exarch durable: run ${runId} journaled ${rows.n} rows (${rows.bytes} bytes)`);
  return {
    counts,
    journalRows: rows.n,
    journalBytes: rows.bytes,
    fileBytes,
    ...(before.disk !== undefined && disk !== undefined ? { diskBytes: disk - before.disk } : {}),
  };
}
