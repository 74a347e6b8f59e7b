// One worker of the scale run (bench/scale.mjs), in its own process as `exarch worker` would be:
//   node --expose-gc bench/scale/workerProcess.mjs <db> <concurrency> <subAgents> <steps> <minMs> <maxMs>
// Prints "ready" once it takes jobs. Reads commands on stdin, one a line, and answers each with one
// JSON line: `stats` (CPU used so far, requests in flight and made, jobs in progress, statements
// sent to Postgres, memory as it is) and `memory` (the same after a full GC: what the sessions held retain). SIGTERM drains and exits.
import { createRequire } from 'node:module';
import { createInterface } from 'node:readline';
import { startWorker } from '../../dist/src/postgres.js';
import { counts, scaleSession } from './workload.mjs';

const [db, ...numbers] = process.argv.slice(2);
const [concurrency, subAgents, steps, minMs, maxMs] = numbers.map(Number);
if (!db || ![concurrency, subAgents, steps, minMs, maxMs].every((n) => Number.isInteger(n) && n >= 0) || concurrency < 1) {
  console.error('usage: node bench/scale/workerProcess.mjs <db> <concurrency> <subAgents> <steps> <minMs> <maxMs>');
  process.exit(2);
}
const shape = { subAgents, steps, minMs, maxMs };
// Statements sent to Postgres (each one round trip; the store's and pg-boss's alike): a count that,
// unlike time, does not move with the machine's load.
// The library's own copy of pg: bench/node_modules holds another (the LangGraph Postgres peer's),
// whose Client the worker never uses.
const pg = createRequire(new URL('../../dist/src/postgres.js', import.meta.url))('pg');
let queries = 0;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (...args) {
  queries++;
  return query.apply(this, args);
};
const worker = await startWorker({
  db,
  concurrency,
  pollingIntervalSeconds: 0.5,
  session: () => ({ input: scaleSession(shape) }),
  onEvent: (event) => {
    if (event.type === 'error') process.stderr.write(`worker ${process.pid}: run ${event.runId ?? '?'}: ${event.detail}\n`);
    if (event.type === 'finished' && event.status !== 'done') process.stderr.write(`worker ${process.pid}: run ${event.runId} ${event.status}\n`);
  },
});
const stats = () => {
  const cpu = process.cpuUsage();
  const memory = process.memoryUsage();
  return {
    cpuUs: cpu.user + cpu.system,
    at: performance.now(),
    inFlight: counts.inFlight,
    requests: counts.requests,
    active: worker.active,
    queries,
    rss: memory.rss,
    heap: memory.heapUsed,
  };
};
createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'memory') global.gc?.();
  process.stdout.write(`${JSON.stringify(stats())}\n`);
});
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void worker.stop({ timeoutMs: 5_000 }).then(() => process.exit(0));
});
