// One cell of the benchmark in a fresh process: `node --expose-gc bench/cell.mjs <system> <workload> <size>`.
// Warms up, times the workload (up to five samples of at least 200 ms each within four seconds; the median),
// then once more to measure the heap it retains (after GC, with the run's result still held); for a
// system that persists runs, one more run first to measure what it writes to its store. Every
// run checks its counts. Prints a JSON line as each phase starts and one at the end; a run whose
// counts are wrong exits 1 instead of printing a number.
import { expected } from './workloads.mjs';

const WARM_UP_MS = 1_000;
const TIMED_RUNS = 5;
const TIMED_BUDGET_MS = 4_000;
const SAMPLE_MS = 200;

const [systemName, workload, sizeText] = process.argv.slice(2);
const size = Number(sizeText);
if (!systemName || !(workload in expected) || !Number.isInteger(size) || size <= 0) {
  console.error('usage: node --expose-gc bench/cell.mjs <system> <loop|fanout|stream> <size>');
  process.exit(2);
}
if (typeof global.gc !== 'function') {
  console.error('bench/cell.mjs: run with node --expose-gc');
  process.exit(2);
}

const system = await import(`./systems/${systemName}.mjs`);

/** Lets go of a run's result (an exarch session is an actor: stop it). */
function release(result) {
  const keep = result?.keep;
  if (keep && typeof keep.stop === 'function') keep.stop();
}

function check(counts) {
  const want = expected[workload](size);
  const wrong = Object.entries(want).filter(([key, value]) => counts[key] !== value);
  if (wrong.length > 0) {
    throw new Error(`${systemName} ${workload} ${size}: ${wrong.map(([key, value]) => `${key} = ${counts[key]}, expected ${value}`).join('; ')}`);
  }
}

async function settleHeap() {
  // Let finished actors' teardowns (microtasks, immediates) run before measuring.
  await new Promise((resolve) => setImmediate(resolve));
  global.gc();
  global.gc();
  return process.memoryUsage().heapUsed;
}

try {
  // Warm-up: the same workload, as large as the measured run up to 1,000 units, at least twice and
  // for at least a second, so the measured run sees optimised code rather than the JIT's first pass.
  const warmSize = Math.min(size, workload === 'stream' ? size : 1_000);
  const warmUntil = performance.now() + WARM_UP_MS;
  for (let i = 0; i < 2 || performance.now() < warmUntil; i++) {
    const warm = await system[workload](warmSize);
    const { keep: _keep, ...warmCounts } = warm;
    if (warmSize === size) check(warmCounts);
    release(warm);
  }

  // The timed run follows the warm-up as it is: forcing a GC just before it would shrink the young
  // generation and time the heap's regrowth instead of the system.
  // Up to five timed samples while they take under four seconds in all (a slow system gets one);
  // the median of them (of an even count, the mean of the middle two: the upper one alone would
  // report the slower of a large cell's two samples). A sample repeats a short workload until it
  // has run for 200 ms, so the garbage collection a run causes is paid within the sample, as it is
  // by a long run, rather than left to fall between samples. Each run checks its counts.
  console.log(JSON.stringify({ phase: 'timed run' }));
  const times = [];
  let counts;
  for (let spent = 0; times.length === 0 || (times.length < TIMED_RUNS && spent < TIMED_BUDGET_MS); ) {
    const t0 = performance.now();
    let runs = 0;
    let elapsed = 0;
    do {
      const timed = await system[workload](size);
      const { keep: _timedKeep, ...timedCounts } = timed;
      check(timedCounts);
      release(timed);
      counts = timedCounts;
      runs++;
      elapsed = performance.now() - t0;
    } while (elapsed < SAMPLE_MS);
    times.push(elapsed / runs);
    spent += elapsed;
  }
  times.sort((a, b) => a - b);
  const middle = Math.floor(times.length / 2);
  const ms = times.length % 2 ? times[middle] : (times[middle - 1] + times[middle]) / 2;

  // What one run writes to its store, for a system that persists runs (exarch-durable): one more
  // run, not timed, on a store of its own; it checks its counts like the others.
  let written;
  if (typeof system.written === 'function') {
    console.log(JSON.stringify({ phase: 'bytes run' }));
    const measured = await system.written(workload, size);
    if (measured !== undefined) {
      const { counts: writtenCounts, ...figures } = measured;
      check(writtenCounts);
      written = figures;
    }
  }
  console.log(
    JSON.stringify({ phase: 'memory run', system: systemName, workload, size, ms, timedRuns: times.length, counts, ...(written ? { written } : {}) }),
  );

  // The memory run: heap after GC with its result held, minus heap after GC before it.
  const before = await settleHeap();
  let result = await system[workload](size);
  const { keep: _keep, ...memoryCounts } = result;
  check(memoryCounts);
  const retainedBytes = (await settleHeap()) - before;
  release(result);
  result = undefined;
  // Exit rather than wait: a system may hold the process open (an inspector's server).
  process.stdout.write(`${JSON.stringify({ phase: 'done', retainedBytes })}\n`, () => process.exit(0));
} catch (error) {
  console.error(error instanceof Error ? error.message : String(error));
  process.exit(1);
}
