// Smoke test of the peer adapters: small runs of each workload, counts checked against `expected`.
// Usage: node bench/smoke-peers.mjs [ai6 ai7 openai-agents langgraph]
import { expected } from './workloads.mjs';

const names = process.argv.slice(2).length ? process.argv.slice(2) : ['ai6', 'ai7', 'openai-agents', 'langgraph'];
const runs = [
  ['loop', 5],
  ['loop', 200],
  ['fanout', 3],
  ['fanout', 200],
  ['stream', 1000],
];

let failed = 0;
for (const name of names) {
  const system = await import(`./systems/${name}.mjs`);
  for (const [workload, size] of runs) {
    const start = performance.now();
    const { keep, ...counts } = await system[workload](size);
    const ms = (performance.now() - start).toFixed(0);
    const want = expected[workload](size);
    const wrong = Object.entries(want).filter(([key, value]) => counts[key] !== value);
    if (keep === undefined) wrong.push(['keep', 'defined']);
    if (wrong.length) failed++;
    const verdict = wrong.length ? `FAIL ${wrong.map(([k, v]) => `${k}=${counts[k]} (want ${v})`).join(', ')}` : 'ok';
    console.log(`${system.label.padEnd(18)} ${`${workload}(${size})`.padEnd(13)} ${ms.padStart(6)} ms  ${verdict}`);
  }
}
if (failed) {
  console.log(`${failed} run(s) failed`);
  process.exit(1);
}
