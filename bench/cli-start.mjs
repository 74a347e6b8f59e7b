// How long the command line takes to answer (issue 39): `exarch --help`, `exarch --version` and
// `exarch runs` on an empty run store, each as a whole process, beside `node -e 0` (Node's own
// start, the floor) run in turn with them. Prints the medians and each command's difference from
// the floor, with the load average (the machine is shared: a loaded one widens every figure), and
// appends the table to bench/RESULTS.md unless --no-write.
//
//   node bench/cli-start.mjs [--runs 21] [--no-write]
import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { DEFAULT_STORE_PATH, openSqliteStore } from '../dist/src/store/sqliteStore.js';

const here = dirname(fileURLToPath(import.meta.url));
const main = join(here, '..', 'dist', 'src', 'cli', 'main.js');
const { values: args } = parseArgs({ options: { runs: { type: 'string', default: '21' }, 'no-write': { type: 'boolean', default: false } } });
const runs = Number(args.runs);
const WARMUP = 2;
/** How much later than Node's own start `--help` and `--version` may answer (issue 39). */
const BUDGET_MS = 100;

// `exarch runs` reads the store of the directory it runs in: an empty one, made as `exarch run` makes it.
const cwd = mkdtempSync(join(tmpdir(), 'exarch-cli-start-'));
mkdirSync(join(cwd, dirname(DEFAULT_STORE_PATH)), { recursive: true });
openSqliteStore(join(cwd, DEFAULT_STORE_PATH)).close();

const commands = [
  { label: 'node -e 0', argv: ['-e', '0'] },
  { label: 'exarch --help', argv: [main, '--help'], budget: true },
  { label: 'exarch --version', argv: [main, '--version'], budget: true },
  { label: 'exarch runs (empty store)', argv: [main, 'runs'] },
];

/** One run of `argv` as a process of its own: its wall-clock in ms; a failed run stops the benchmark. */
function once(argv) {
  const started = performance.now();
  const result = spawnSync(process.execPath, argv, { cwd, encoding: 'utf8', env: { PATH: process.env.PATH, CI: 'true' } });
  const ms = performance.now() - started;
  if (result.status !== 0) throw new Error(`${argv.join(' ')} exited ${result.status}: ${result.stderr}`);
  return ms;
}

const median = (samples) => [...samples].sort((a, b) => a - b)[Math.floor(samples.length / 2)] ?? 0;

const loadBefore = loadavg()[0] ?? 0;
const samples = commands.map(() => []);
// In turn, round by round, so a drift in the machine's speed falls on every command alike.
for (let round = 0; round < WARMUP + runs; round++)
  commands.forEach((command, i) => {
    const ms = once(command.argv);
    if (round >= WARMUP) samples[i]?.push(ms);
  });
const loadAfter = loadavg()[0] ?? 0;
rmSync(cwd, { recursive: true, force: true });

const floor = median(samples[0] ?? []);
const table = [
  `| command, as a whole process (${runs} runs each, in turn) | wall-clock (median) | over \`node -e 0\` | target |`,
  '|---|---:|---:|---|',
  ...commands.map((command, i) => {
    const ms = median(samples[i] ?? []);
    const over = ms - floor;
    const target = command.budget ? `≤ ${BUDGET_MS} ms over ${over <= BUDGET_MS ? '✓' : '✗'}` : '';
    return `| ${command.label} | ${ms.toFixed(0)} ms | ${i === 0 ? '' : `${over >= 0 ? '+' : ''}${over.toFixed(0)} ms`} | ${target} |`;
  }),
].join('\n');
const load = `Load average (1 min) ${loadBefore.toFixed(2)} before, ${loadAfter.toFixed(2)} after, on ${process.platform} with Node.js ${process.version}.`;
console.log(`${table}\n\n${load}`);
if (!args['no-write'] && existsSync(join(here, 'RESULTS.md'))) {
  appendFileSync(join(here, 'RESULTS.md'), `\n## Command-line start\n\n${table}\n\n${load}\n`);
}
