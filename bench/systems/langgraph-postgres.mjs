// LangGraph with its PostgreSQL checkpointer (@langchain/langgraph-checkpoint-postgres's
// PostgresSaver, node-postgres, its default pool): the graphs of systems/langgraph.mjs, each run a
// new thread checkpointed at every super-step (durability 'sync', see workloadsWith there).
//
// The store, as systems/exarch-durable-postgres.mjs keeps exarch's: the fresh database bench/run.mjs
// makes for the cell on the one server it starts for the bench (fsync on), set up by the first run
// (in the warm-up: `setup()` creates the tables, as LangGraph asks a host to once); every run is a
// new thread in it.
//
// `written('loop', steps)` measures what one run writes (not timed): its checkpoint, blob and
// pending-write rows and their bytes, and the bytes the server appended to its write-ahead log.
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { cellDatabase, postgresWritten } from '../durableFigures.mjs';
import { workloadsWith } from './langgraph.mjs';

export const label = 'LangGraph, durable (PostgreSQL)';
export const packages = ['@langchain/langgraph-checkpoint-postgres', 'pg'];
/** What a step stores (bench/run.mjs prints it under the durable table), and the system it adds durability to. */
export const checkpoints =
  "a checkpoint per super-step (the model node, then the tools node: two per loop step): each channel that changed, whole (the message list in full each time), and each task's pending writes";
export const inMemory = 'langgraph';
/** bench/run.mjs gives this system's cells a database of their own on its PostgreSQL server. */
export const needsPostgres = true;

/** The cell's saver, made and set up by the first run; `ready` settles once its tables exist. */
let cellSaver;
async function saver() {
  if (!cellSaver) {
    const made = PostgresSaver.fromConnString(cellDatabase());
    cellSaver = { saver: made, ready: made.setup() };
  }
  await cellSaver.ready;
  return cellSaver.saver;
}

/** The workloads on the cell's saver, each run a new thread; `onThread` hears the thread's id. */
async function workloads(onThread) {
  const checkpointer = await saver();
  return workloadsWith({ checkpointer: () => checkpointer, onThread });
}

export const loop = async (steps) => (await workloads()).loop(steps);
export const fanout = async (children) => (await workloads()).fanout(children);
export const stream = async (count) => (await workloads()).stream(count);

/** What one run of the loop writes, on the cell's saver (other workloads: undefined); see postgresWritten. */
export async function written(workload, size) {
  if (workload !== 'loop') return undefined;
  let threadId;
  const run = (await workloads((id) => (threadId = id)))[workload];
  return postgresWritten(
    cellDatabase(),
    async () => {
      const { keep: _keep, ...counts } = await run(size);
      return { counts, id: threadId };
    },
    `SELECT sum(n) AS n, sum(bytes) AS bytes FROM (
       SELECT count(*) AS n, coalesce(sum(octet_length(checkpoint::text) + octet_length(metadata::text)), 0) AS bytes FROM checkpoints WHERE thread_id = $1
       UNION ALL
       SELECT count(*), coalesce(sum(octet_length(blob)), 0) FROM checkpoint_blobs WHERE thread_id = $1
       UNION ALL
       SELECT count(*), coalesce(sum(octet_length(blob)), 0) FROM checkpoint_writes WHERE thread_id = $1) AS stored`,
  );
}
