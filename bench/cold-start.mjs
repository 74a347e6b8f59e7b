// Cold start (issue 40.1): what a process pays to load exarch and run its first session. Each case
// is a whole process, run in turn with `node -e 0` (Node's own start, the floor) round by round:
// `import('xstate')` (what exarch is built on), `import('exarch')`, the import plus a one-step
// session with the scripted provider, and the import plus a tool defined with zod (a host with
// tools loads zod itself). Each child also says what it measured inside: the import, and for the
// session case its first run against the median of 20 warm runs in the same process (target: the
// first ≤ 3× a warm one). Prints the medians with the load average (the machine is shared: a loaded
// one widens every figure) and appends the table to bench/RESULTS.md unless --no-write.
//
//   node bench/cold-start.mjs [--runs 21] [--no-write]
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const entry = JSON.stringify(pathToFileURL(join(root, 'dist', 'src', 'index.js')).href);
const testing = JSON.stringify(pathToFileURL(join(root, 'dist', 'src', 'testing', 'index.js')).href);
const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '21' }, 'no-write': { type: 'boolean', default: false } } });
const runs = Number(args.runs);
const WARMUP = 2;
/** `import('exarch')` with the scripted provider, in-process (issue 40.1). */
const IMPORT_TARGET_MS = 100;
/** The first one-step session after the import against a warm one (issue 40.1). */
const FIRST_RUN_TARGET = 3;

/** Times `import(what)` inside the child and prints it as `{"importMs":…}`. */
const timedImport = (what) => `const t0 = performance.now(); await import(${what}); const importMs = performance.now() - t0;`;

const cases = [
  { label: 'node -e 0', program: '' },
  { label: "import('xstate')", program: `${timedImport("'xstate'")} console.log(JSON.stringify({ importMs }));` },
  { label: "import('exarch')", program: `${timedImport(entry)} console.log(JSON.stringify({ importMs }));`, importTarget: true },
  {
    label: "import('exarch') + a one-step scripted session",
    program: `${timedImport(entry)}
      const { runAgent } = await import(${entry});
      const { scriptedProvider } = await import(${testing});
      const once = async () => {
        const provider = scriptedProvider({ agents: { root: [{ text: 'done' }] } });
        const started = performance.now();
        const result = await runAgent('hello', { provider });
        if (result.text !== 'done') throw new Error('unexpected result: ' + JSON.stringify(result.text));
        return performance.now() - started;
      };
      const firstMs = await once();
      const warm = [];
      for (let i = 0; i < 20; i++) warm.push(await once());
      warm.sort((a, b) => a - b);
      console.log(JSON.stringify({ importMs, firstMs, warmMs: warm[10] }));`,
  },
  {
    label: "import('exarch') + zod + defineTool",
    program: `const t0 = performance.now();
      const { defineTool } = await import(${entry});
      const { z } = await import('zod');
      defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), run: ({ text }) => text });
      console.log(JSON.stringify({ importMs: performance.now() - t0 }));`,
  },
];

/** One run of a case as a process of its own: its wall-clock and what it printed; a failed run stops the benchmark. */
function once(program) {
  const started = performance.now();
  const result = spawnSync(process.execPath, ['--input-type=module', '-e', program || '0'], { cwd: root, encoding: 'utf8' });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`a cold-start case exited ${result.status}: ${result.stderr}`);
  return { ms, inside: result.stdout.trim() === '' ? {} : JSON.parse(result.stdout) };
}

const median = (samples) => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)] ?? 0;

const loadBefore = loadavg()[0] ?? 0;
const samples = cases.map(() => []);
// In turn, round by round, so a drift in the machine's speed falls on every case alike.
for (let round = 0; round < WARMUP + runs; round++)
  cases.forEach((c, i) => {
    const sample = once(c.program);
    if (round >= WARMUP) samples[i]?.push(sample);
  });
const loadAfter = loadavg()[0] ?? 0;

const floor = median((samples[0] ?? []).map((s) => s.ms));
const insideMedian = (i, key) => {
  const values = (samples[i] ?? []).map((s) => s.inside[key]).filter((v) => typeof v === 'number');
  return values.length === 0 ? undefined : median(values);
};
const ms = (value) => (value === undefined ? '' : `${value < 10 ? value.toFixed(2) : value.toFixed(0)} ms`);
const table = [
  `| case, as a whole process (${runs} runs each, in turn) | wall-clock (median) | over \`node -e 0\` | in-process import (median) | target |`,
  '|---|---:|---:|---:|---|',
  ...cases.map((c, i) => {
    const wall = median((samples[i] ?? []).map((s) => s.ms));
    const over = wall - floor;
    const imported = insideMedian(i, 'importMs');
    const target = c.importTarget && imported !== undefined ? `≤ ${IMPORT_TARGET_MS} ms in-process ${imported <= IMPORT_TARGET_MS ? '✓' : '✗'}` : '';
    return `| ${c.label} | ${ms(wall)} | ${i === 0 ? '' : `${over >= 0 ? '+' : ''}${ms(over)}`} | ${ms(imported)} | ${target} |`;
  }),
].join('\n');
const sessionCase = cases.findIndex((c) => c.label.includes('session'));
const first = insideMedian(sessionCase, 'firstMs');
const warm = insideMedian(sessionCase, 'warmMs');
const ratio = first !== undefined && warm !== undefined && warm > 0 ? first / warm : undefined;
const firstRun =
  ratio === undefined
    ? ''
    : `\n\nThe one-step scripted session, in the same process after the import (medians over the runs): first run ${ms(first)}, a warm run ${ms(warm)}: ` +
      `${ratio.toFixed(1)}× (target ≤ ${FIRST_RUN_TARGET}× ${ratio <= FIRST_RUN_TARGET ? '✓' : '✗'}).`;
const load = `Load average (1 min) ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after, on ${process.platform} with Node.js ${process.version}.`;
console.log(`${table}${firstRun}\n\n${load}`);
if (!args['no-write'] && existsSync(join(here, 'RESULTS.md'))) {
  appendFileSync(join(here, 'RESULTS.md'), `\n## Cold start\n\n${table}${firstRun}\n\n${load}\n`);
}
