// One workload of `npm run bench:check` (bench/check.mjs starts this with the flags it needs):
// `node --expose-gc --predictable --min-semi-space-size=M --max-semi-space-size=M bench/check/measure.mjs <loop|fanout> <size>`.
// Prints one JSON line of per-unit figures (a unit: a loop's step, a fan-out's sub-agent):
// - bytes: heap bytes allocated, measured as the growth of the heap over one run that no garbage
//   collection interrupts (the young generation is made larger than the run allocates; a run that
//   is interrupted anyway is refused, not measured). `--predictable` runs V8 on one thread, so the
//   optimising compiler acts at the same points in every process and the figure repeats to about
//   0.1 %, under any load.
// - the operations of another run of the same workload, counted through XState's inspection API
//   and node:async_hooks: events the actors processed, snapshots and microsteps they made, actions
//   they ran, actors they created; promises, immediates, timers and queued microtasks created.
// No figure involves time.
import { createHook } from 'node:async_hooks';
import { PerformanceObserver } from 'node:perf_hooks';
import { fanout, hooks, loop } from '../systems/exarch.mjs';

const WARM_RUNS = 3;
const [workload, sizeText] = process.argv.slice(2);
const size = Number(sizeText);
if ((workload !== 'loop' && workload !== 'fanout') || !Number.isInteger(size) || size <= 0) {
  console.error('usage: node --expose-gc --predictable bench/check/measure.mjs <loop|fanout> <size>');
  process.exit(2);
}
if (typeof global.gc !== 'function') {
  console.error('bench/check/measure.mjs: run with --expose-gc (bench/check.mjs starts it so)');
  process.exit(2);
}

const run = workload === 'loop' ? loop : fanout;
const turn = () => new Promise((resolve) => setImmediate(resolve));

async function once() {
  const result = await run(size);
  result.keep.stop();
  return result;
}

// Warm-up: the JIT's first passes and every lazy initialisation happen before anything is counted.
for (let i = 0; i < WARM_RUNS; i++) await once();

// Bytes: heap growth over one run with no collection in it. A collection is told by the start
// time of its performance entry (entries arrive late on a loaded machine: counting them as they
// arrive blamed the forced ones below on the run); a run that one interrupted anyway (V8 may
// start one on its own) is run again, up to ATTEMPTS times.
const ATTEMPTS = 3;
const collections = [];
const gcObserver = new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) collections.push(entry.startTime);
});
gcObserver.observe({ entryTypes: ['gc'] });
const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
let bytes;
let interrupted = 0;
for (let attempt = 0; attempt < ATTEMPTS && bytes === undefined; attempt++) {
  await turn();
  global.gc();
  global.gc();
  await settle();
  const startedAt = performance.now();
  const heapBefore = process.memoryUsage().heapUsed;
  const measured = await run(size);
  const heapAfter = process.memoryUsage().heapUsed;
  const endedAt = performance.now();
  measured.keep.stop();
  await settle();
  interrupted = collections.filter((at) => at >= startedAt && at <= endedAt).length;
  if (interrupted === 0) bytes = heapAfter - heapBefore;
}
gcObserver.disconnect();
if (bytes === undefined) {
  console.error(
    `bench/check/measure.mjs: garbage collection interrupted the measured ${workload} run ${ATTEMPTS} times (${interrupted} the last time); give it a larger young generation`,
  );
  process.exit(3);
}

// Operations: another run, counted (the counting allocates, so it is not the measured run).
const ops = { actorEvents: 0, snapshots: 0, microsteps: 0, actions: 0, actors: 0, promises: 0, immediates: 0, timers: 0, microtasks: 0 };
const INSPECTED = {
  '@xstate.event': 'actorEvents',
  '@xstate.snapshot': 'snapshots',
  '@xstate.microstep': 'microsteps',
  '@xstate.action': 'actions',
  '@xstate.actor': 'actors',
};
const ASYNC = { PROMISE: 'promises', Immediate: 'immediates', Timeout: 'timers', Microtask: 'microtasks' };
hooks.created = (actor) => {
  actor.system.inspect((event) => {
    const key = INSPECTED[event.type];
    if (key) ops[key]++;
  });
};
const asyncHook = createHook({
  init(_id, type) {
    const key = ASYNC[type];
    if (key) ops[key]++;
  },
});
asyncHook.enable();
await once();
asyncHook.disable();
hooks.created = undefined;

const perUnit = (n) => Math.round((n / size) * 100) / 100;
const figures = { bytes: Math.round(bytes / size) };
for (const [key, value] of Object.entries(ops)) figures[key] = perUnit(value);
console.log(JSON.stringify(figures));
