// The benchmark against the peers: every cell (system × workload × size) in its own process,
// systems interleaved within each round, medians of the rounds, ratios against the hand-written
// loop of the same round. Prints the table and writes bench/RESULTS.md.
//
//   npm run bench                      (builds exarch, installs the peers, runs this)
//   node bench/run.mjs [--runs 5] [--systems exarch,handwritten,…] [--no-write]
//
// The peers are dependencies of bench/package.json only, so the library's install stays lean;
// they are installed (npm ci) the first time, and again whenever bench/package-lock.json changes.
//
// The durable systems (those whose module says what they `checkpoints`) get a table of their own,
// side by side; the PostgreSQL ones run on one server for the whole bench (bench/cellRunner.mjs).
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { CELL_LIMIT_MS, cellRunner } from './cellRunner.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);

const ALL_SYSTEMS = [
  'exarch',
  'exarch-inspected',
  'ai6',
  'ai7',
  'openai-agents',
  'langgraph',
  'exarch-durable',
  'langgraph-sqlite',
  'exarch-durable-postgres',
  'langgraph-postgres',
  'handwritten',
];
const FLOOR = 'handwritten';
const DURABLE = 'exarch-durable';

/** Installs bench/'s own dependencies when they are missing or older than its lockfile. */
function ensurePeersInstalled() {
  const lock = join(here, 'package-lock.json');
  const installed = join(here, 'node_modules', '.package-lock.json');
  const read = (file) => JSON.stringify(JSON.parse(readFileSync(file, 'utf8')).packages ?? {});
  const wanted = JSON.parse(readFileSync(lock, 'utf8')).packages ?? {};
  delete wanted[''];
  if (existsSync(installed) && read(installed) === JSON.stringify(wanted)) return;
  process.stderr.write('installing the peers (npm ci in bench/)…\n');
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: here, stdio: 'inherit' });
}

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    systems: { type: 'string', default: ALL_SYSTEMS.join(',') },
    'no-write': { type: 'boolean', default: false },
  },
});
ensurePeersInstalled();
const runs = Number(args.runs);
if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer, got ${args.runs}`);
const systems = args.systems
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
for (const s of systems) if (!ALL_SYSTEMS.includes(s)) throw new Error(`unknown system '${s}' (known: ${ALL_SYSTEMS.join(', ')})`);
if (!systems.includes(FLOOR)) systems.push(FLOOR);

const modules = {};
for (const s of systems) modules[s] = await import(join(here, 'systems', `${s}.mjs`));
const { runCell, postgres } = await cellRunner(systems, modules);

/** The cells, in the order each round runs them. */
const CELLS = [
  { workload: 'loop', size: 200 },
  { workload: 'loop', size: 2_000 },
  { workload: 'fanout', size: 200 },
  { workload: 'fanout', size: 10_000 },
  { workload: 'stream', size: 100_000 },
];
const cellKey = (c) => `${c.workload}:${c.size}`;

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// ---------------------------------------------------------------------------------------------
// Run: rounds × cells × systems (rotated each round), one process each.

const labels = Object.fromEntries(systems.map((s) => [s, modules[s].label]));

/** results[system][cellKey] = array of per-round results; failures[system][cellKey] = reason. */
const results = Object.fromEntries(systems.map((s) => [s, {}]));
const failures = Object.fromEntries(systems.map((s) => [s, {}]));
const started = Date.now();
const loadAtStart = os.loadavg()[0];
for (let round = 0; round < runs; round++) {
  for (const cell of CELLS) {
    const order = systems.map((_, i) => systems[(i + round) % systems.length]);
    for (const system of order) {
      const key = cellKey(cell);
      if (failures[system][key]) continue; // a cell that failed or ran out of time once is not retried
      process.stderr.write(`round ${round + 1}/${runs}  ${key.padEnd(13)} ${system.padEnd(14)}`);
      const r = await runCell(system, cell);
      if (r.failed) {
        failures[system][key] = r.failed;
        process.stderr.write(` ${r.failed}\n`);
        continue;
      }
      r.round = round;
      (results[system][key] ??= []).push(r);
      process.stderr.write(` ${r.ms.toFixed(1)} ms\n`);
    }
  }
}
const elapsedS = (Date.now() - started) / 1000;

// ---------------------------------------------------------------------------------------------
// Summarise.

/** Per-unit value of one run: µs per step / sub-agent, or deltas per second. */
function unitValue(r) {
  return r.workload === 'stream' ? r.counts.deltasReceived / (r.ms / 1000) : (r.ms * 1000) / r.size;
}

/** Median per-unit value, and the median over rounds of the ratio to the floor's run of the same round. */
function summarise(system, key) {
  const runsOf = results[system][key] ?? [];
  if (runsOf.length === 0) return undefined;
  const floorByRound = new Map((results[FLOOR][key] ?? []).map((r) => [r.round, r]));
  const ratios = [];
  for (const r of runsOf) {
    const floor = floorByRound.get(r.round);
    if (!floor) continue;
    // "Times the floor's cost": time per unit over the floor's, or the floor's rate over this one's.
    ratios.push(r.workload === 'stream' ? unitValue(floor) / unitValue(r) : unitValue(r) / unitValue(floor));
  }
  return {
    value: median(runsOf.map(unitValue)),
    ratio: ratios.length ? median(ratios) : undefined,
    retainedBytes: runsOf.some((r) => r.retainedBytes !== undefined)
      ? median(runsOf.filter((r) => r.retainedBytes !== undefined).map((r) => r.retainedBytes))
      : undefined,
    runs: runsOf.length,
    counts: runsOf[0].counts,
    written: writtenOf(runsOf),
  };
}

/** What a durable system's runs wrote (median of each figure over the rounds), or undefined. */
function writtenOf(runsOf) {
  const measured = runsOf.filter((r) => r.written);
  if (measured.length === 0) return undefined;
  const figures = Object.keys(measured[0].written);
  return Object.fromEntries(figures.map((f) => [f, median(measured.map((r) => r.written[f]))]));
}

const summary = Object.fromEntries(systems.map((s) => [s, Object.fromEntries(CELLS.map((c) => [cellKey(c), summarise(s, cellKey(c))]))]));

const fmt = (n, digits = 1) => (n >= 100 ? Math.round(n).toLocaleString('en-US') : n.toFixed(digits));
const fmtRate = (n) => (n >= 1e6 ? `${(n / 1e6).toFixed(2)}M` : `${Math.round(n / 1e3)}k`);
const fmtRatio = (r) => (r === undefined ? '' : ` (×${r >= 10 ? Math.round(r).toLocaleString('en-US') : r.toFixed(1)})`);

function timeCell(system, key) {
  const s = summary[system][key];
  if (!s) return failures[system][key] ? `— ${failures[system][key]}` : '—';
  if (key.startsWith('stream')) return `${fmtRate(s.value)}${system === FLOOR ? '' : fmtRatio(s.ratio)}`;
  return `${fmt(s.value)}${system === FLOOR ? '' : fmtRatio(s.ratio)}`;
}

function memoryCell(system, key, unit) {
  const s = summary[system][key];
  if (!s) return failures[system][key] ? `— ${failures[system][key]}` : '—';
  if (s.retainedBytes === undefined) return `— memory run ${results[system][key]?.find((r) => r.memoryFailed)?.memoryFailed ?? 'missing'}`;
  const [, size] = key.split(':');
  return `${(s.retainedBytes / 1e6).toFixed(1)} MB (${(s.retainedBytes / Number(size) / 1e3).toFixed(2)} KB/${unit})`;
}

// The budget (issue 6), checked on exarch's medians.
const ex = summary.exarch;
const perUnit = (key) => ex?.[key]?.value;
/** Flat: the large cell's per-unit value at most 1.25 times the small one's. */
const flatness = (small, large) => small !== undefined && large !== undefined && large <= small * 1.25;
const flat = (small, large) => flatness(perUnit(small), perUnit(large));
const floorRetainedPerAgent = summary[FLOOR]['fanout:10000'] ? summary[FLOOR]['fanout:10000'].retainedBytes / 10_000 : undefined;
const exRetainedPerAgent = ex?.['fanout:10000'] ? ex['fanout:10000'].retainedBytes / 10_000 : undefined;
const exRetainedPerAgentSmall = ex?.['fanout:200'] ? ex['fanout:200'].retainedBytes / 200 : undefined;
const budget = ex && {
  'loop:200': { text: '≤ 50', ok: perUnit('loop:200') <= 50 },
  'loop:2000': { text: '≤ 50, flat', ok: perUnit('loop:2000') <= 50 && flat('loop:200', 'loop:2000') },
  'fanout:200': { text: '≤ 150', ok: perUnit('fanout:200') <= 150 },
  'fanout:10000': { text: '≤ 150, flat', ok: perUnit('fanout:10000') <= 150 && flat('fanout:200', 'fanout:10000') },
  'stream:100000': { text: '≥ 1M/s', ok: perUnit('stream:100000') >= 1e6 },
  'memory:loop': { text: 'linear in history', ok: ex['loop:2000'] !== undefined },
  // Released: what stays per finished sub-agent is its report in the root's transcript, within
  // 1 KB of what the hand-written loop keeps for the same report, and no more at 10,000 than at 200.
  'memory:fanout': {
    text: 'released',
    ok:
      exRetainedPerAgent !== undefined &&
      floorRetainedPerAgent !== undefined &&
      exRetainedPerAgent <= floorRetainedPerAgent + 1_000 &&
      exRetainedPerAgentSmall !== undefined &&
      exRetainedPerAgent <= Math.max(exRetainedPerAgentSmall, floorRetainedPerAgent + 1_000),
  },
};
const mark = (b) => (b === undefined ? '' : `${b.text} ${b.ok ? '✓' : '✗ over budget'}`);

// The durable budget (issue 12), checked on exarch-durable's medians: the same workloads with every
// run journaled to SQLite; and what a loop step writes, flat in the history's length.
const du = summary[DURABLE];
const duPerUnit = (key) => du?.[key]?.value;
const duFlat = (small, large) => flatness(duPerUnit(small), duPerUnit(large));
/** What a durable system's loop writes per step at `steps` steps, figure by figure. */
const writtenPerStep = (system, steps) => {
  const w = summary[system]?.[`loop:${steps}`]?.written;
  return w && Object.fromEntries(Object.entries(w).map(([figure, n]) => [figure, n / steps]));
};
const bytesFigures = ['journalBytes', 'fileBytes', 'diskBytes'];
const bytesFlat = () => {
  const [small, large] = [writtenPerStep(DURABLE, 200), writtenPerStep(DURABLE, 2_000)];
  return small !== undefined && large !== undefined && bytesFigures.every((f) => small[f] === undefined || flatness(small[f], large[f]));
};
const durableBudget = du && {
  'loop:200': { text: '≤ 100', ok: duPerUnit('loop:200') <= 100 },
  'loop:2000': { text: '≤ 100, flat', ok: duPerUnit('loop:2000') <= 100 && duFlat('loop:200', 'loop:2000') },
  'fanout:200': { text: '≤ 400', ok: duPerUnit('fanout:200') <= 400 },
  'fanout:10000': { text: '≤ 400, flat', ok: duPerUnit('fanout:10000') <= 400 && duFlat('fanout:200', 'fanout:10000') },
  'bytes:200': { text: 'reported', ok: writtenPerStep(DURABLE, 200)?.journalBytes > 0 },
  'bytes:2000': { text: 'flat', ok: bytesFlat() },
};

const fmtBytes = (n) => (n >= 1e4 ? `${(n / 1e3).toFixed(1)} KB` : `${Math.round(n).toLocaleString('en-US')} B`);
/**
 * Bytes per step a durable system's loop wrote: the payload it stored (rows), and what the store
 * measures outside it: SQLite, the file's growth and the bytes handed to write(2); PostgreSQL, the
 * bytes the server appended to its write-ahead log.
 */
function bytesCell(system, steps) {
  const key = `loop:${steps}`;
  if (failures[system][key]) return `— ${failures[system][key]}`;
  const w = writtenPerStep(system, steps);
  if (!w) return '—';
  const file = w.fileBytes === undefined ? '' : `; file +${fmtBytes(w.fileBytes)}`;
  const disk = w.diskBytes === undefined ? '' : `; ${fmtBytes(w.diskBytes)} written`;
  const wal = w.walBytes === undefined ? '' : `; ${fmtBytes(w.walBytes)} WAL`;
  return `${fmtBytes(w.journalBytes)} in ${w.journalRows.toFixed(1)} rows${file}${disk}${wal}`;
}

/** The durable systems (their module says what they checkpoint), side by side in a table of their own. */
const durableSystems = systems.filter((s) => modules[s].checkpoints);

// What durability adds: each durable system against the same system in memory (`inMemory`), in the same rounds.
const durableCost = durableSystems.flatMap((system) => {
  const [on, off] = [summary[system], summary[modules[system].inMemory]];
  if (!off) return [];
  const lines = ['loop:200', 'loop:2000', 'fanout:200', 'fanout:10000']
    .filter((key) => on[key] && off[key])
    .map(
      (key) =>
        `${key.replace(':', ' ')}: ${fmt(on[key].value)} µs durable, ${fmt(off[key].value)} without (${on[key].value >= off[key].value ? '+' : '−'}${fmt(Math.abs(on[key].value - off[key].value))} µs per ${key.startsWith('loop') ? 'step' : 'sub-agent'})`,
    );
  return lines.length ? [`${labels[system]}, against ${labels[modules[system].inMemory]}: ${lines.join('; ')}`] : [];
});

// An idle inspector must cost nothing: exarch's loop with one attached, against exarch's own, in the same rounds.
const inspected = summary['exarch-inspected'];
const idleInspector =
  ex && inspected
    ? ['loop:200', 'loop:2000', 'fanout:10000']
        .filter((key) => ex[key] && inspected[key])
        .map(
          (key) =>
            `${key.replace(':', ' ')}: ${fmt(inspected[key].value)} µs with an idle inspector, ${fmt(ex[key].value)} without (${((inspected[key].value / ex[key].value - 1) * 100).toFixed(0)}%)`,
        )
    : [];

/** [what, cell of a system, the budget of that row] for the workloads every system runs. */
const workloadRows = (budgetOf) => [
  ['loop: µs per model step, 200 steps with one tool call each', (s) => timeCell(s, 'loop:200'), budgetOf?.['loop:200']],
  ['loop: µs per step at 2,000 steps', (s) => timeCell(s, 'loop:2000'), budgetOf?.['loop:2000']],
  ['fan-out: µs per sub-agent, 200 sub-agents × 3 steps', (s) => timeCell(s, 'fanout:200'), budgetOf?.['fanout:200']],
  ['fan-out: µs per sub-agent, 10,000 sub-agents × 3 steps', (s) => timeCell(s, 'fanout:10000'), budgetOf?.['fanout:10000']],
  ['stream: text deltas per second to the consumer (100,000 deltas)', (s) => timeCell(s, 'stream:100000'), budgetOf?.['stream:100000']],
  ['memory: heap retained after 2,000 steps (session still held)', (s) => memoryCell(s, 'loop:2000', 'step'), budgetOf?.['memory:loop']],
  ['memory: heap retained after 10,000 finished sub-agents (root still held)', (s) => memoryCell(s, 'fanout:10000', 'sub-agent'), budgetOf?.['memory:fanout']],
];

/** A markdown table: a row per workload, a column per system, then the budget's column (checked on one system). */
function tableOf(columns, rows, budgetName) {
  return [
    `| workload | ${columns.map((s) => labels[s]).join(' | ')} | ${budgetName} |`,
    `|---|${columns.map(() => '---:').join('|')}|---|`,
    ...rows.map(([name, cell, b]) => `| ${name} | ${columns.map(cell).join(' | ')} | ${mark(b)} |`),
  ].join('\n');
}

const table = tableOf(systems.filter((s) => s !== FLOOR && !durableSystems.includes(s)).concat(FLOOR), workloadRows(budget), 'exarch budget');
// The durable systems side by side, with what a loop step writes; the durable budget is exarch's on SQLite.
const durableTable =
  durableSystems.length > 0
    ? tableOf(
        durableSystems,
        [
          ...workloadRows(durableBudget),
          [
            'bytes written per loop step, 200 steps (payload in rows; SQLite: file growth, write(2) bytes; PostgreSQL: WAL bytes)',
            (s) => bytesCell(s, 200),
            durableBudget?.['bytes:200'],
          ],
          ['bytes written per loop step, 2,000 steps', (s) => bytesCell(s, 2_000), durableBudget?.['bytes:2000']],
        ],
        'durable budget (exarch on SQLite)',
      )
    : undefined;
/** What each durable system stores per step, a line each. */
const checkpointLines = durableSystems.map((s) => `- ${labels[s]}: ${modules[s].checkpoints}`);

// ---------------------------------------------------------------------------------------------
// Report.

function versionOf(pkg) {
  for (const dir of [join(here, 'node_modules', pkg), join(root, 'node_modules', pkg)]) {
    const file = join(dir, 'package.json');
    if (existsSync(file)) {
      const json = JSON.parse(readFileSync(file, 'utf8'));
      return pkg === json.name ? json.version : `${json.name}@${json.version}`;
    }
  }
  if (pkg === 'exarch') {
    const json = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));
    let commit = '';
    try {
      commit = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: root, encoding: 'utf8' }).trim();
      const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src', 'machines'], { cwd: root, encoding: 'utf8' }).trim();
      if (dirty) commit += ' + uncommitted changes';
    } catch {
      // not a git checkout
    }
    return `${json.version}${commit ? ` (${commit})` : ''}`;
  }
  return 'not installed';
}

const versions = [];
for (const s of systems) for (const pkg of modules[s].packages) versions.push(`- ${labels[s]}: \`${pkg}\` ${versionOf(pkg)}`);
if (postgres) versions.push(`- PostgreSQL: ${postgres}`);
const cpus = os.cpus();
const machine = [
  `- CPU: ${cpus[0]?.model ?? 'unknown'} × ${cpus.length}`,
  `- Memory: ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`,
  `- OS: ${os.type()} ${os.release()} (${os.arch()})`,
  `- Node.js ${process.version}`,
  `- Load average (1 min): ${loadAtStart.toFixed(2)} at the start, ${os.loadavg()[0].toFixed(2)} at the end`,
];
const notes = Object.entries(failures).flatMap(([s, byCell]) =>
  Object.entries(byCell).map(([key, why]) => `- ${labels[s]}, ${key.replace(':', ' ')}: ${why}.`),
);

const report = `# Benchmark results

Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench\` (${runs} rounds, ${Math.round(elapsedS)} s).

${table}

Each number is the median of ${runs} runs; in parentheses, the median over rounds of the ratio to the hand-written
loop's run in the same round (how many times its cost). Lower is better, except deltas per second.
${
  durableTable
    ? `
## Durable runs

The same workloads with every run stored as it goes, each system in its own store (one file per cell on the
machine's disk, or a database per cell on one local PostgreSQL server with fsync on). Ratios as above, to the
hand-written loop in memory.

${durableTable}

What each stores per step:

${checkpointLines.join('\n')}
`
    : ''
}
## How it was measured

- The same scripted model behaviour (\`bench/workloads.mjs\`) drives every system through its own model
  interface: a zero-latency model, so every microsecond is orchestration overhead.
- **loop**: one agent, S model steps each with one call to a synchronous \`echo\` tool, then final text.
- **fan-out**: a root whose first step starts C sub-agents in one batch; each sub-agent makes 2 echo calls,
  then returns its result (exarch: through \`reply\`); the root answers once every report reached it.
- **stream**: one model step of 100,000 one-character text deltas to a consumer, yielding to the event loop
  every 256 deltas as a socket read would.
- **memory**: heap used after GC at the end of the run, minus before it, with the run's result (session,
  transcript) still held.
- Every run checks its counts (model calls, tool executions, sub-agent reports seen by the root's last model
  call, deltas received) and fails rather than report a number for skipped work.
- Each cell runs in a fresh process (\`bench/cell.mjs\`): a warm-up of the same workload (at most 1,000 units,
  at least two runs and one second), then timed samples (up to five while they take under four seconds in
  all, so a slow system gets one; the cell reports their median), then a separate run for the memory figure.
  A sample repeats a short run until 200 ms have passed, so the garbage collection its runs cause is paid
  within it, as a long run pays its own, instead of falling between samples.
  Systems are interleaved within each round, and rounds repeat the whole grid.
- A measured run that does not finish in ${CELL_LIMIT_MS / 1000} s is stopped and reported, and its cell is not retried in later rounds.
- **durable, exarch** (\`exarch, durable (SQLite)\`): exarch's own workloads, each run started with \`startRun\` on the SQLite
  store (better-sqlite3, WAL, synchronous=NORMAL), journaling every session of the tree. The store is one new file per
  cell, on the machine's disk, opened by the warm-up's first run; each run is a new run in it, so opening the file is
  not counted, and everything a run writes is (its row, every journal burst, checkpoints as they fall due). The stream
  cell runs as well. The bytes per step come from one more, untimed run of the loop on a store of its own: the journal
  payload (the bytes of the run's record bodies and its row count, as SQLite sums them), the file's growth once the
  store is closed (which checkpoints the write-ahead log into it: the log's size right after a run is its high-water
  mark, capped and reused, not growth), and the bytes handed to write(2) during the run (\`/proc/self/io\`: log frames
  of whole pages and any checkpoints, Linux only).
- **durable, exarch on PostgreSQL** (\`exarch, durable (PostgreSQL)\`): the same runs on \`openPostgresStore\`, in a
  fresh database per cell on one server the bench starts (scripts/postgresCluster.mjs: loopback, fsync on, the
  server's own settings otherwise); the warm-up's first run creates the schema. Its bytes per step: the journal
  payload (rows and the octets of their bodies) and the bytes the server appended to its write-ahead log during the
  run (\`pg_current_wal_insert_lsn\` before and after: rows, index entries, commit records).
- **durable, LangGraph** (\`LangGraph, durable (SQLite)\`, \`LangGraph, durable (PostgreSQL)\`): the graphs of the
  LangGraph column compiled with \`SqliteSaver\` (one file per cell, opened WAL with synchronous=NORMAL as exarch's
  is) or \`PostgresSaver\` (a database per cell on the same server, \`setup()\` in the warm-up), each run a new
  thread, with \`durability: 'sync'\`: each super-step's checkpoint is stored before the next super-step starts, as
  exarch stores a response before the next request leaves (LangGraph's default, \`'async'\`, lets the write overlap
  the next step). A sub-agent's graph is compiled with the same checkpointer and runs as a thread of its own (its
  root's thread id, then its name), so every agent of the tree is stored, as exarch journals every session. Its
  bytes per step: the thread's checkpoint, blob and pending-write rows and the bytes of their serialised values,
  then the same outside figures as exarch's on the same store.
${durableCost.length ? `\n## What durability costs\n\nEach durable system against the same system in memory, in the same rounds:\n\n${durableCost.map((l) => `- ${l}`).join('\n')}\n` : ''}${idleInspector.length ? `\n## An idle live inspector\n\nexarch with \`startLiveInspector()\` attached and no viewer connected (the \`exarch, idle live inspector\` column), against exarch alone:\n\n${idleInspector.map((l) => `- ${l}`).join('\n')}\n` : ''}${notes.length ? `\n## Cells that did not finish\n\n${notes.join('\n')}\n` : ''}
## Machine

${machine.join('\n')}

## Versions

${versions.join('\n')}
`;

console.log(`\n${table}\n`);
if (durableTable) console.log(`${durableTable}\n\n${checkpointLines.join('\n')}\n`);
if (idleInspector.length) console.log(`idle live inspector: ${idleInspector.join('; ')}\n`);
if (durableCost.length) console.log(`what durability costs:\n${durableCost.map((l) => `- ${l}`).join('\n')}\n`);
console.log(`load average (1 min): ${loadAtStart.toFixed(2)} at the start, ${os.loadavg()[0].toFixed(2)} at the end`);
if (notes.length) console.log(notes.join('\n'));
if (!args['no-write']) {
  writeFileSync(join(here, 'RESULTS.md'), report);
  console.log(`wrote ${join(here, 'RESULTS.md')}`);
}
