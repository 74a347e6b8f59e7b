// exarch with durability on, in PostgreSQL: each run a durable run (`startRun`) journaled into the
// store of `openPostgresStore` (dist/src/postgres.js), with exarch's own workloads, providers and
// tools, as systems/exarch-durable.mjs runs them on SQLite.
//
// The store: the fresh database bench/run.mjs makes for the cell on the one server it starts for the
// bench (scripts/postgresCluster.mjs, the server's own durability settings, fsync on), opened by the
// first run (in the warm-up, which creates the schema); every run is a new run in it.
//
// `written('loop', steps)` measures what one run writes (not timed): its journal rows and their
// bytes, and the bytes the server appended to its write-ahead log meanwhile.
import { openPostgresStore } from '../../dist/src/postgres.js';
import { cellDatabase, postgresWritten } from '../durableFigures.mjs';
import { durableOn } from './exarch-durable.mjs';
import { workloadsWith } from './exarch.mjs';

export const label = 'exarch, durable (PostgreSQL)';
export const packages = ['pg'];
/** What a step stores, as on SQLite (bench/run.mjs prints it under the durable table), and the system it adds durability to. */
export { checkpoints } from './exarch-durable.mjs';
export const inMemory = 'exarch';
/** bench/run.mjs gives this system's cells a database of their own on its PostgreSQL server. */
export const needsPostgres = true;

/** The cell's store, opened by its first run. */
let cellStore;
const store = () => (cellStore ??= openPostgresStore(cellDatabase()));
let durable;
const timed = workloadsWith((input) => (durable ??= durableOn(store()))(input));

export const loop = timed.loop;
export const fanout = timed.fanout;
export const stream = timed.stream;

/** What one run of the loop writes, on the cell's store (other workloads: undefined); see postgresWritten. */
export async function written(workload, size) {
  if (workload !== 'loop') return undefined;
  let runId;
  const run = workloadsWith(durableOn(store(), (id) => (runId = id)))[workload];
  return postgresWritten(
    cellDatabase(),
    async () => {
      const { keep, ...counts } = await run(size);
      keep?.stop();
      return { counts, id: runId };
    },
    'SELECT count(*) AS n, coalesce(sum(octet_length(body)), 0) AS bytes FROM exarch.journal WHERE run_id = $1',
  );
}
