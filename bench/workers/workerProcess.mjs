// One worker of the workers' benchmark (bench/workers.mjs), in its own process as `exarch worker`
// would be: `node bench/workers/workerProcess.mjs <db> <concurrency>`. Its runs' model is the
// scripted provider with a simulated latency (bench/workers/fanOut.mjs). Prints "ready" once it
// takes jobs; SIGTERM drains and exits.
import { startWorker } from '../../dist/src/postgres.js';
import { fanOutSession } from './fanOut.mjs';

const [db, concurrencyText] = process.argv.slice(2);
const concurrency = Number(concurrencyText);
if (!db || !Number.isInteger(concurrency) || concurrency < 1) {
  console.error('usage: node bench/workers/workerProcess.mjs <db> <concurrency>');
  process.exit(2);
}
const worker = await startWorker({
  db,
  concurrency,
  pollingIntervalSeconds: 0.5,
  session: () => ({ input: fanOutSession() }),
  onEvent: (event) => {
    if (event.type === 'error') process.stderr.write(`worker ${process.pid}: run ${event.runId ?? '?'}: ${event.detail}\n`);
    if (event.type === 'finished' && event.status !== 'done') process.stderr.write(`worker ${process.pid}: run ${event.runId} ${event.status}\n`);
  },
});
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void worker.stop({ timeoutMs: 5_000 }).then(() => process.exit(0));
});
