// Scale check (issue 2, issue 40). In process: time and retained heap of a long loop session and
// of a wide fan-out, at growing sizes, with the zero-latency scripted model (linear cost shows as a
// flat per-step / per-child column). On the workers (bench/scale/onWorkers.mjs): how many sessions
// one worker process holds while every model request takes 1–3 s, at what CPU and memory, the
// Postgres rows and bytes per step, and the throughput of 1, 2 and 4 workers.
//
//   npm run bench:scale                     (builds exarch, runs every part; not part of npm test)
//   node --expose-gc bench/scale.mjs [--quick] [--parts in-process,capacity,throughput] [--profile DIR] [--cells 0,2]
//
// `--quick`: smaller sizes, to check the bench in a minute or two. `--profile DIR`: each worker
// process writes a V8 CPU profile (`--cpu-prof`) there as it exits. `--cells`: only
// these capacity cells (0-based, in the order printed), to profile one.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import os from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createSessionActor, defineTool, waitForSettled } from '../dist/src/index.js';
import { TraceRecorder } from '../dist/src/watch/trace/recorder.js';
import { scriptedProvider } from '../dist/src/testing/index.js';
import { z } from 'zod';
import { scaleOnWorkers } from './scale/onWorkers.mjs';

const { values: args } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    parts: { type: 'string', default: 'in-process,capacity,throughput' },
    profile: { type: 'string' },
    cells: { type: 'string' },
  },
});
const parts = args.parts.split(',').filter(Boolean);

const echo = defineTool({ name: 'echo', description: 'echo', input: z.object({ text: z.string() }), run: ({ text }) => text });

async function loop(steps, inspect) {
  const provider = scriptedProvider({
    checkPairing: false,
    agents: { root: (_req, i) => (i < steps - 1 ? { calls: [{ name: 'echo', input: { text: `step ${i}` } }] } : { text: 'done' }) },
  });
  const actor = createSessionActor({ provider, tools: [echo], maxSteps: steps + 1, task: 'loop' }, inspect ? { inspect } : {});
  actor.start();
  const snapshot = await waitForSettled(actor);
  if (provider.requests.length !== steps || snapshot.value !== 'readyForUser')
    throw new Error(`loop ${steps}: ${provider.requests.length} requests, ${snapshot.value}`);
  return actor;
}

async function fanOut(children) {
  const names = Array.from({ length: children }, (_, i) => `w${i}`);
  const provider = scriptedProvider({
    checkPairing: false,
    agents: {
      root: (_req, i) => (i === 0 ? { calls: names.map((name) => ({ name: 'agent', input: { name, task: 'work' } })) } : { text: 'ok' }),
      '*': (req) => ({ calls: [{ name: 'reply', input: { result: `done ${req.agent.name}` } }] }),
    },
  });
  const actor = createSessionActor({ provider, task: 'fan out' });
  actor.start();
  const snapshot = await waitForSettled(actor);
  const delivered = snapshot.context.messages.reduce(
    (n, m) =>
      n + (m.role === 'user' ? m.content.reduce((k, b) => k + (b.type === 'text' ? (b.text.match(/\[agent 'w\d+' replied\]/g) ?? []).length : 0), 0) : 0),
    0,
  );
  if (delivered !== children) throw new Error(`fan-out ${children}: ${delivered} delivered`);
  return actor;
}

async function measure(label, unit, sizes, run) {
  console.log(`\n${label}`);
  console.log(
    `${unit.padStart(8)}  ${'total ms'.padStart(9)}  ${`µs/${unit}`.padStart(12)}  ${'live heap MB'.padStart(13)}  ${`KB/${unit}`.padStart(9)}  ${'after stop MB'.padStart(14)}`,
  );
  for (const n of sizes) {
    const times = [];
    let live = 0;
    let after = 0;
    for (let rep = 0; rep < 3; rep++) {
      global.gc();
      const before = process.memoryUsage().heapUsed;
      const t0 = performance.now();
      let actor = await run(n);
      times.push(performance.now() - t0);
      // Live: the settled session with its history (what a host keeps); after stop: what leaks.
      global.gc();
      live = (process.memoryUsage().heapUsed - before) / 1e6;
      actor.stop();
      // An async function keeps its locals in slots a later iteration reuses: drop the actor
      // explicitly, or the next "before" still holds this one.
      actor = undefined;
      await new Promise((r) => setImmediate(r));
      global.gc();
      after = (process.memoryUsage().heapUsed - before) / 1e6;
    }
    const ms = times.sort((a, b) => a - b)[1];
    console.log(
      `${String(n).padStart(8)}  ${ms.toFixed(0).padStart(9)}  ${((ms * 1000) / n).toFixed(1).padStart(12)}  ${live.toFixed(2).padStart(13)}  ${((live * 1000) / n).toFixed(2).padStart(9)}  ${after.toFixed(2).padStart(14)}`,
    );
  }
}

if (!global.gc) throw new Error('run with node --expose-gc');
console.log(
  `# exarch at scale: ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}, load average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} at the start`,
);
if (parts.includes('in-process')) await inProcess();
const workerParts = parts.filter((part) => part === 'capacity' || part === 'throughput');
if (workerParts.length > 0) await scaleOnWorkers({ quick: args.quick, profile: args.profile, parts: workerParts, cells: args.cells?.split(',').map(Number) });
console.log(
  `\nload average ${os
    .loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')} at the end`,
);

async function inProcess() {
  await loop(50);
  await fanOut(50);
  await measure('loop: one agent, N model steps with one echo call each (median of 3)', 'step', [250, 500, 1000, 2000], loop);
  await measure('fan-out: one root, N sub-agents spawned in one batch, each replies (median of 3)', 'child', [250, 500, 1000, 2000], fanOut);

  // What recording a trace adds to a 1,000-step run (issue 4): interleaved, median of 7.
  {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-bench-trace-'));
    const plain = [];
    const traced = [];
    let size = 0;
    for (let rep = 0; rep < 7; rep++) {
      let t0 = performance.now();
      (await loop(1000)).stop();
      plain.push(performance.now() - t0);
      const recorder = new TraceRecorder({ file: join(dir, `trace-${rep}.jsonl`) });
      t0 = performance.now();
      (await loop(1000, recorder.inspect)).stop();
      recorder.close();
      traced.push(performance.now() - t0);
      size = statSync(recorder.file).size;
    }
    const median = (xs) => xs.sort((a, b) => a - b)[Math.floor(xs.length / 2)];
    const [p, t] = [median(plain), median(traced)];
    console.log(
      `\ntracing: 1,000-step loop ${p.toFixed(0)} ms plain, ${t.toFixed(0)} ms traced (+${(t - p).toFixed(0)} ms, +${(((t - p) / p) * 100).toFixed(0)}%, ${(((t - p) / 1000) * 1000).toFixed(1)} µs/step); trace ${(size / 1e6).toFixed(2)} MB`,
    );
    rmSync(dir, { recursive: true, force: true });
  }
}
