// Text deltas delivered to a consumer of the run's events (issue 16.1): a root session whose model
// streams N one-character deltas, watched with `observe(actor, listener)` and with
// `for await (… of events(actor))`, the model yielding every 64 deltas or after each (issue 40.5).
// Deltas per second from the first delta to the consumer's last; target ≥ 1M/s. Beside the rate,
// which moves with the machine's load, the bytes allocated per delta, which do not: V8's sampling
// heap profiler over one more run, objects already collected included (the model's own `await`
// per delta is counted too). Prints a table and appends it to bench/RESULTS.md unless --no-write.
//
//   node bench/events.mjs [--runs 5] [--deltas 1000000] [--no-write]
import { appendFileSync, existsSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createSessionActor, events, observe, waitForSettled } from '../dist/src/index.js';
import { ZERO_USAGE } from '../dist/src/engine/usage.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: { runs: { type: 'string', default: '5' }, deltas: { type: 'string', default: '1000000' }, 'no-write': { type: 'boolean', default: false } },
});
const runs = Number(args.runs);
const N = Number(args.deltas);
const TARGET = 1_000_000;

/**
 * A model that streams `count` one-character deltas. `yieldEvery`: await a resolved promise after
 * so many deltas (a network stream arrives in chunks; an async consumer runs between them).
 */
function streamingProvider(count, yieldEvery) {
  return {
    name: 'bench-deltas',
    async stream(_request, sink) {
      const started = performance.now();
      for (let i = 0; i < count; i++) {
        sink.text('x');
        if (yieldEvery > 0 && i % yieldEvery === yieldEvery - 1) await Promise.resolve();
      }
      return { content: [{ type: 'text', text: 'x'.repeat(count) }], stopReason: 'end_turn', usage: ZERO_USAGE, incompleteToolUseIds: [], started };
    },
  };
}

async function withListener() {
  const actor = createSessionActor({ provider: streamingProvider(N, 0), task: 'stream' });
  let chars = 0;
  let first = 0;
  let last = 0;
  observe(actor, (event) => {
    if (event.type !== 'text.delta') return;
    if (chars === 0) first = performance.now();
    chars += event.text.length;
    last = performance.now();
  });
  actor.start();
  await waitForSettled(actor);
  actor.stop();
  if (chars !== N) throw new Error(`listener got ${chars} of ${N} characters`);
  return { rate: N / ((last - first) / 1000), events: N };
}

async function withIterator(yieldEvery) {
  const actor = createSessionActor({ provider: streamingProvider(N, yieldEvery), task: 'stream' });
  let chars = 0;
  let received = 0;
  let first = 0;
  let last = 0;
  const consumed = (async () => {
    for await (const event of events(actor)) {
      if (event.type !== 'text.delta') continue;
      if (chars === 0) first = performance.now();
      chars += event.text.length;
      received++;
      last = performance.now();
    }
  })();
  actor.start();
  await waitForSettled(actor);
  actor.stop();
  await consumed;
  if (chars !== N) throw new Error(`iterator got ${chars} of ${N} characters`);
  return { rate: N / ((last - first) / 1000), events: received };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;

/** Bytes allocated per delta by one run of `once`, sampled every KiB, collected objects included. */
async function bytesPerDelta(once) {
  const session = new Session();
  session.connect();
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await once();
  const { profile } = await session.post('HeapProfiler.stopSampling');
  session.disconnect();
  let bytes = 0;
  const stack = [profile.head];
  while (stack.length > 0) {
    const node = stack.pop();
    bytes += node.selfSize;
    stack.push(...node.children);
  }
  return bytes / N;
}
const rows = [];
for (const [label, once] of [
  ['observe(actor, listener)', withListener],
  ['for await … events(actor), model yields every 64 deltas', () => withIterator(64)],
  ['for await … events(actor), model yields after every delta', () => withIterator(1)],
]) {
  await once(); // warm-up
  const samples = [];
  for (let i = 0; i < runs; i++) samples.push(await once());
  rows.push({ label, rate: median(samples.map((s) => s.rate)), events: median(samples.map((s) => s.events)), bytes: await bytesPerDelta(once) });
}

const fmt = (n) => `${(n / 1e6).toFixed(2)}M/s`;
const table = [
  `| ${N.toLocaleString('en')} one-character text deltas to one consumer | deltas/s (median of ${runs}) | text.delta events taken | bytes allocated per delta | target |`,
  '|---|---:|---:|---:|---|',
  ...rows.map((r) => `| ${r.label} | ${fmt(r.rate)} | ${r.events.toLocaleString('en')} | ${r.bytes.toFixed(0)} | ≥ 1M/s ${r.rate >= TARGET ? '✓' : '✗'} |`),
].join('\n');
const load = `Load average (1 min) ${(loadavg()[0] ?? 0).toFixed(2)} at the end, on ${process.platform} with Node.js ${process.version}.`;
console.log(`${table}\n\n${load}`);
if (!args['no-write'] && existsSync(join(here, 'RESULTS.md'))) {
  appendFileSync(join(here, 'RESULTS.md'), `\n## Run events: text deltas to a consumer\n\n${table}\n\n${load}\n`);
}
