// LangGraph with its SQLite checkpointer (@langchain/langgraph-checkpoint-sqlite's SqliteSaver,
// better-sqlite3): the graphs of systems/langgraph.mjs, each run a new thread checkpointed at every
// super-step (durability 'sync', see workloadsWith there).
//
// The store, as systems/exarch-durable.mjs keeps exarch's: one fresh file per cell process, in a
// temporary directory on the machine's disk, opened by the first run (in the warm-up) and removed
// when the process exits; every run is a new thread in it. The database is opened as exarch opens
// its own, WAL with synchronous=NORMAL (SqliteSaver turns WAL on itself; it leaves synchronous at
// SQLite's FULL, an fsync per commit, which exarch does not pay), so the two pay the same disk.
//
// `written('loop', steps)` measures what one run writes, on a store of its own (not timed).
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { benchTmp, bytesWritten, sizeOf } from '../durableFigures.mjs';
import { workloadsWith } from './langgraph.mjs';

export const label = 'LangGraph, durable (SQLite)';
export const packages = ['@langchain/langgraph-checkpoint-sqlite', 'better-sqlite3'];
/** What a step stores (bench/run.mjs prints it under the durable table), and the system it adds durability to. */
export const checkpoints =
  "a checkpoint per super-step (the model node, then the tools node: two per loop step): the whole state, its message list written again in full each time, and each task's pending writes";
export const inMemory = 'langgraph';

/** Temporary directories this process made, removed on exit (a killed cell's go with the directory bench/run.mjs gave it). */
const made = [];
process.on('exit', () => {
  for (const { dir, db } of made) {
    if (db.open) db.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

function freshSaver() {
  const dir = mkdtempSync(join(benchTmp(), 'exarch-bench-langgraph-'));
  const file = join(dir, 'checkpoints.db');
  const db = new Database(file);
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  const entry = { dir, file, db, saver: new SqliteSaver(db) };
  made.push(entry);
  return entry;
}

/** The cell's store, opened by its first run. */
let cellSaver;
const timed = workloadsWith({ checkpointer: () => (cellSaver ??= freshSaver().saver) });

export const loop = timed.loop;
export const fanout = timed.fanout;
export const stream = timed.stream;

/**
 * What one run of the loop writes, on a fresh store (other workloads: undefined), the figures of
 * systems/exarch-durable.mjs's `written`: `journalRows` and `journalBytes` are the thread's
 * checkpoint and pending-write rows and the bytes of their serialised bodies (checkpoint, metadata,
 * write value); `fileBytes` the file's growth once closed; `diskBytes` the bytes handed to write(2).
 * Throws if the thread holds nothing: a durable run that did not checkpoint is skipped work.
 */
export async function written(workload, size) {
  if (workload !== 'loop') return undefined;
  const { dir, file, db, saver } = freshSaver();
  let threadId;
  const before = { file: sizeOf(file) + sizeOf(`${file}-wal`), disk: bytesWritten() };
  const { keep: _keep, ...counts } = await workloadsWith({ checkpointer: () => saver, onThread: (id) => (threadId = id) })[workload](size);
  const disk = bytesWritten();
  db.close();
  const fileBytes = sizeOf(file) + sizeOf(`${file}-wal`) - before.file;
  const reader = new Database(file, { readonly: true, fileMustExist: true });
  let rows;
  try {
    rows = reader
      .prepare(
        `SELECT sum(n) AS n, sum(bytes) AS bytes FROM (
           SELECT count(*) AS n, coalesce(sum(length(checkpoint) + length(metadata)), 0) AS bytes FROM checkpoints WHERE thread_id = ?
           UNION ALL
           SELECT count(*), coalesce(sum(length(value)), 0) FROM writes WHERE thread_id = ?)`,
      )
      .get(threadId, threadId);
  } finally {
    reader.close();
    rmSync(dir, { recursive: true, force: true });
  }
  if (!(rows.n > 0 && rows.bytes > 0)) throw new Error(`LangGraph SQLite: thread ${threadId} checkpointed ${rows.n} rows (${rows.bytes} bytes)`);
  return {
    counts,
    journalRows: rows.n,
    journalBytes: rows.bytes,
    fileBytes,
    ...(before.disk !== undefined && disk !== undefined ? { diskBytes: disk - before.disk } : {}),
  };
}
