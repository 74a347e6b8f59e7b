// Model requests and wall-clock of a fan-out when every request takes a real model's time
// (issue 15): a root delegating to 10 sub-agents of 3 steps each, 200 ms per request, with and
// without `wait_for_agents`, against the critical path (the longest chain of dependent requests
// × the latency: delegate, 3 sub-agent steps, answer = 5 × 200 ms). Prints a table and appends it
// to bench/RESULTS.md unless --no-write.
//
//   node bench/latency.mjs [--runs 3] [--no-write]
import { appendFileSync, existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { z } from '../node_modules/zod/index.js';
import { createSessionActor, defineTool, waitForSettled } from '../dist/src/index.js';
import { scriptedProvider } from '../dist/src/testing/index.js';

const here = dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '3' }, 'no-write': { type: 'boolean', default: false } } });
const runs = Number(args.runs);

const LATENCY_MS = 200;
const CHILDREN = 10;
const CHILD_STEPS = 3;
const CRITICAL_PATH_MS = (1 + CHILD_STEPS + 1) * LATENCY_MS;

const echo = defineTool({ name: 'echo', description: 'Echo the text back.', input: z.object({ text: z.string() }), readOnly: true, run: ({ text }) => text });
const spawns = Array.from({ length: CHILDREN }, (_, i) => ({ name: 'agent', input: { name: `w${i}`, task: 'work' } }));
const child = [
  { calls: [{ name: 'echo', input: { text: 'one' } }], delayMs: LATENCY_MS },
  { calls: [{ name: 'echo', input: { text: 'two' } }], delayMs: LATENCY_MS },
  { calls: [{ name: 'reply', input: { result: 'done' } }], delayMs: LATENCY_MS },
];

const variants = {
  'with wait_for_agents': [
    { calls: [...spawns, { name: 'wait_for_agents', input: {} }], delayMs: LATENCY_MS },
    { text: 'all done', delayMs: LATENCY_MS },
  ],
  // The model can only end its turn to wait; each wake-up is one more request.
  'without (ends its turn to wait)': [
    { calls: spawns, delayMs: LATENCY_MS },
    { text: 'waiting', delayMs: LATENCY_MS },
    { text: 'all done', delayMs: LATENCY_MS },
    { text: 'all done', delayMs: LATENCY_MS },
  ],
};

async function once(rootScript) {
  const provider = scriptedProvider({ agents: { root: rootScript, '*': child } });
  const started = performance.now();
  const actor = createSessionActor({ provider, task: 'fan out', tools: [echo] });
  actor.start();
  const settled = await waitForSettled(actor);
  const wallMs = performance.now() - started;
  actor.stop();
  if (settled.value !== 'readyForUser') throw new Error(`the root ended ${String(settled.value)}`);
  return { rootRequests: provider.requestsOf('root').length, wallMs };
}

const rows = [];
for (const [label, script] of Object.entries(variants)) {
  const samples = [];
  for (let i = 0; i < runs; i++) samples.push(await once(script));
  const wall = samples.map((s) => s.wallMs).sort((a, b) => a - b)[Math.floor(samples.length / 2)] ?? 0;
  const requests = [...new Set(samples.map((s) => s.rootRequests))].join('/');
  rows.push({ label, requests, wall, over: (wall / CRITICAL_PATH_MS - 1) * 100 });
}

const table = [
  `| fan-out of ${CHILDREN} sub-agents × ${CHILD_STEPS} steps, ${LATENCY_MS} ms per request | root requests | wall-clock (median of ${runs}) | over the critical path (${CRITICAL_PATH_MS} ms) | target |`,
  '|---|---:|---:|---:|---|',
  ...rows.map((r, i) => {
    const ok = i === 0 ? (r.requests === '2' && r.over <= 5 ? '✓' : '✗') : '';
    return `| ${r.label} | ${r.requests} | ${Math.round(r.wall)} ms | ${r.over.toFixed(1)}% | ${i === 0 ? `2 requests, ≤ 5% ${ok}` : ''} |`;
  }),
].join('\n');
console.log(table);
if (!args['no-write'] && existsSync(join(here, 'RESULTS.md'))) {
  appendFileSync(join(here, 'RESULTS.md'), `\n## Waiting for sub-agents: model requests under real latency\n\n${table}\n`);
}
