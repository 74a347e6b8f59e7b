// The benchmark against the peers: every cell (system × workload × size) in its own process,
// systems interleaved within each round, medians of the rounds, ratios against the hand-written
// loop of the same round. Prints the table and writes bench/RESULTS.md.
//
//   npm run bench                      (builds exarch, installs the peers, runs this)
//   node bench/run.mjs [--runs 5] [--systems exarch,handwritten,…] [--no-write]
//
// The peers are dependencies of bench/package.json only, so the library's install stays lean;
// they are installed (npm ci) the first time, and again whenever bench/package-lock.json changes.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const root = dirname(here);

const ALL_SYSTEMS = ['exarch', 'exarch-inspected', 'ai6', 'ai7', 'openai-agents', 'langgraph', 'handwritten'];
const FLOOR = 'handwritten';
const CELL_LIMIT_MS = 60_000;
const WARM_UP_LIMIT_MS = 180_000;

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
const systems = args.systems.split(',').map((s) => s.trim()).filter(Boolean);
for (const s of systems) if (!ALL_SYSTEMS.includes(s)) throw new Error(`unknown system '${s}' (known: ${ALL_SYSTEMS.join(', ')})`);
if (!systems.includes(FLOOR)) systems.push(FLOOR);

/** The cells, in the order each round runs them. */
const CELLS = [
  { workload: 'loop', size: 200 },
  { workload: 'loop', size: 2_000 },
  { workload: 'fanout', size: 200 },
  { workload: 'fanout', size: 10_000 },
  { workload: 'stream', size: 100_000 },
];
const cellKey = (c) => `${c.workload}:${c.size}`;

/**
 * Runs one cell in a fresh process; resolves with its result, `{ failed }`, or a result without
 * `retainedBytes` when only the memory run ran out of time. Each measured run gets CELL_LIMIT_MS
 * (the warm-up another WARM_UP_LIMIT_MS).
 */
function runCell(system, cell) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--expose-gc', join(here, 'cell.mjs'), system, cell.workload, String(cell.size)], {
      cwd: here,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    let phase = 'warm-up';
    let timed;
    let timer;
    const limit = (ms) => {
      clearTimeout(timer);
      timer = setTimeout(() => child.kill('SIGKILL'), ms);
    };
    limit(WARM_UP_LIMIT_MS);
    child.stdout.on('data', (d) => {
      out += d;
      const lines = out.split('\n');
      out = lines.pop() ?? '';
      for (const line of lines) {
        let message;
        try {
          message = JSON.parse(line);
        } catch {
          continue;
        }
        phase = message.phase;
        if (message.phase === 'memory run') timed = message;
        if (message.phase === 'done') timed = { ...timed, retainedBytes: message.retainedBytes };
        if (message.phase !== 'done') limit(CELL_LIMIT_MS);
      }
    });
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      const why = `did not finish in ${(phase === 'warm-up' ? WARM_UP_LIMIT_MS : CELL_LIMIT_MS) / 1000} s${phase === 'warm-up' ? ' (warm-up)' : ''}`;
      if (signal === 'SIGKILL' && phase === 'memory run' && timed) return resolve({ ...timed, retainedBytes: undefined, memoryFailed: why });
      if (signal === 'SIGKILL') return resolve({ failed: why, timedOut: true });
      if (code !== 0) return resolve({ failed: (err.trim().split('\n').at(-1) ?? '') || `exit ${code}` });
      if (!timed || timed.retainedBytes === undefined) return resolve({ failed: `no result: ${out.slice(0, 200)}` });
      resolve(timed);
    });
  });
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// ---------------------------------------------------------------------------------------------
// Run: rounds × cells × systems (rotated each round), one process each.

const labels = {};
for (const s of systems) labels[s] = (await import(join(here, 'systems', `${s}.mjs`))).label;

/** results[system][cellKey] = array of per-round results; failures[system][cellKey] = reason. */
const results = Object.fromEntries(systems.map((s) => [s, {}]));
const failures = Object.fromEntries(systems.map((s) => [s, {}]));
const started = Date.now();
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
    retainedBytes: runsOf.some((r) => r.retainedBytes !== undefined) ? median(runsOf.filter((r) => r.retainedBytes !== undefined).map((r) => r.retainedBytes)) : undefined,
    runs: runsOf.length,
    counts: runsOf[0].counts,
  };
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
  return `${(s.retainedBytes / 1e6).toFixed(1)} MB (${((s.retainedBytes / Number(size)) / 1e3).toFixed(2)} KB/${unit})`;
}

// The budget (issue 6), checked on exarch's medians.
const ex = summary.exarch;
const perUnit = (key) => ex?.[key]?.value;
const flat = (small, large) => perUnit(large) !== undefined && perUnit(small) !== undefined && perUnit(large) <= perUnit(small) * 1.25;
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

// An idle inspector must cost nothing: exarch's loop with one attached, against exarch's own, in the same rounds.
const inspected = summary['exarch-inspected'];
const idleInspector =
  ex && inspected
    ? ['loop:200', 'loop:2000', 'fanout:10000']
        .filter((key) => ex[key] && inspected[key])
        .map((key) => `${key.replace(':', ' ')}: ${fmt(inspected[key].value)} µs with an idle inspector, ${fmt(ex[key].value)} without (${((inspected[key].value / ex[key].value - 1) * 100).toFixed(0)}%)`)
    : [];

const rows = [
  ['loop: µs per model step, 200 steps with one tool call each', (s) => timeCell(s, 'loop:200'), budget?.['loop:200']],
  ['loop: µs per step at 2,000 steps', (s) => timeCell(s, 'loop:2000'), budget?.['loop:2000']],
  ['fan-out: µs per sub-agent, 200 sub-agents × 3 steps', (s) => timeCell(s, 'fanout:200'), budget?.['fanout:200']],
  ['fan-out: µs per sub-agent, 10,000 sub-agents × 3 steps', (s) => timeCell(s, 'fanout:10000'), budget?.['fanout:10000']],
  ['stream: text deltas per second to the consumer (100,000 deltas)', (s) => timeCell(s, 'stream:100000'), budget?.['stream:100000']],
  ['memory: heap retained after 2,000 steps (session still held)', (s) => memoryCell(s, 'loop:2000', 'step'), budget?.['memory:loop']],
  ['memory: heap retained after 10,000 finished sub-agents (root still held)', (s) => memoryCell(s, 'fanout:10000', 'sub-agent'), budget?.['memory:fanout']],
];

const columns = systems.filter((s) => s !== FLOOR).concat(FLOOR);
const header = `| workload | ${columns.map((s) => labels[s]).join(' | ')} | exarch budget |`;
const rule = `|---|${columns.map(() => '---:').join('|')}|---|`;
const table = [header, rule, ...rows.map(([name, cell, b]) => `| ${name} | ${columns.map(cell).join(' | ')} | ${mark(b)} |`)].join('\n');

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
for (const s of systems) {
  const mod = await import(join(here, 'systems', `${s}.mjs`));
  for (const pkg of mod.packages) versions.push(`- ${labels[s]}: \`${pkg}\` ${versionOf(pkg)}`);
}
const cpus = os.cpus();
const machine = [
  `- CPU: ${cpus[0]?.model ?? 'unknown'} × ${cpus.length}`,
  `- Memory: ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB`,
  `- OS: ${os.type()} ${os.release()} (${os.arch()})`,
  `- Node.js ${process.version}`,
];
const notes = Object.entries(failures).flatMap(([s, byCell]) => Object.entries(byCell).map(([key, why]) => `- ${labels[s]}, ${key.replace(':', ' ')}: ${why}.`));

const report = `# Benchmark results

Measured ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC by \`npm run bench\` (${runs} rounds, ${Math.round(elapsedS)} s).

${table}

Each number is the median of ${runs} runs; in parentheses, the median over rounds of the ratio to the hand-written
loop's run in the same round (how many times its cost). Lower is better, except deltas per second.

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
${idleInspector.length ? `\n## An idle live inspector\n\nexarch with \`startLiveInspector()\` attached and no viewer connected (the \`exarch, idle live inspector\` column), against exarch alone:\n\n${idleInspector.map((l) => `- ${l}`).join('\n')}\n` : ''}${notes.length ? `\n## Cells that did not finish\n\n${notes.join('\n')}\n` : ''}
## Machine

${machine.join('\n')}

## Versions

${versions.join('\n')}
`;

console.log(`\n${table}\n`);
if (idleInspector.length) console.log(`idle live inspector: ${idleInspector.join('; ')}\n`);
if (notes.length) console.log(notes.join('\n'));
if (!args['no-write']) {
  writeFileSync(join(here, 'RESULTS.md'), report);
  console.log(`wrote ${join(here, 'RESULTS.md')}`);
}
