// The per-step cost's regression check (`npm run bench:check`, run in CI): no timing, so it cannot
// flake on a loaded machine. It runs the bench's loop and fan-out workloads (bench/systems/exarch.mjs,
// from dist/) in fresh processes (bench/check/measure.mjs) and compares what they do per unit (a
// loop's step, a fan-out's sub-agent) against the committed baseline, bench/baseline.json:
// heap bytes allocated, and operations counted (actor events processed, snapshots, microsteps,
// actions, actors; promises, immediates, timers, microtasks created). It fails naming each figure
// that grew past its tolerance, with both values.
//
//   npm run bench:check                 (builds dist/, then runs this)
//   node bench/check.mjs [--update]     (--update writes the figures measured now as the baseline)
//
// Bytes depend on the V8 version: measured on another one than the baseline's, they are printed
// but not compared (the operation counts still are).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const here = dirname(fileURLToPath(import.meta.url));
const baselineFile = join(here, 'baseline.json');

/**
 * The workloads measured, at sizes whose run fits in the young generation given below, and how far
 * their bytes may grow before the check fails. Bytes repeat to within about 0.5 % for the loop and
 * 1 % for the fan-out (ids and hash seeds differ between processes, and when a timer is re-armed
 * depends on the clock), so the tolerance is twice that: no build fails by chance, and a loop step
 * that allocates 400 bytes more (a closure or two) fails.
 */
const WORKLOADS = [
  { workload: 'loop', size: 2_000, unit: 'step', bytesTolerance: 0.01 },
  { workload: 'fanout', size: 200, unit: 'sub-agent', bytesTolerance: 0.02 },
];
/** Larger than a measured run allocates (about 90 MB), so no collection falls inside it. */
const SEMI_SPACE_MB = 256;
/** The operation counts are exact: their tolerance only absorbs the rounding to hundredths per unit. */
const COUNTS_TOLERANCE = 0.005;

const { values: flags } = parseArgs({ options: { update: { type: 'boolean', default: false } } });

function measure(workload, size) {
  const args = [
    '--expose-gc',
    '--predictable',
    `--min-semi-space-size=${SEMI_SPACE_MB}`,
    `--max-semi-space-size=${SEMI_SPACE_MB}`,
    join(here, 'check', 'measure.mjs'),
    workload,
    String(size),
  ];
  const child = spawnSync(process.execPath, args, { encoding: 'utf8' });
  if (child.status !== 0) {
    throw new Error(`bench:check: measuring ${workload} ${size} failed (exit ${child.status}): ${child.stderr.trim() || child.stdout.trim()}`);
  }
  const line = child.stdout.trim().split('\n').at(-1) ?? '';
  return JSON.parse(line);
}

/** The baseline takes the median bytes of three processes, so a process at either end of the spread does not set it. */
const UPDATE_RUNS = 3;

const measured = {};
for (const { workload, size, unit } of WORKLOADS) {
  const runs = Array.from({ length: flags.update ? UPDATE_RUNS : 1 }, () => measure(workload, size));
  const bytes = runs.map((run) => run.bytes).sort((a, b) => a - b);
  const figures = { ...runs[0], bytes: bytes[Math.floor(bytes.length / 2)] };
  measured[workload] = { size, unit, figures };
  const shown = Object.entries(figures)
    .map(([key, value]) => `${key} ${value}`)
    .join(', ');
  console.log(`${workload} ${size}, per ${unit}: ${shown}`);
}
console.log(`(load average ${loadavg()[0]?.toFixed(2)}; no timing is compared)`);

const v8 = process.versions.v8;
if (flags.update) {
  writeFileSync(baselineFile, `${JSON.stringify({ v8, node: process.version, workloads: measured }, null, 2)}\n`);
  console.log(`bench:check: wrote ${baselineFile}`);
  process.exit(0);
}

if (!existsSync(baselineFile)) {
  console.error('bench:check: no bench/baseline.json; run node bench/check.mjs --update and commit it');
  process.exit(1);
}
const baseline = JSON.parse(readFileSync(baselineFile, 'utf8'));
const sameEngine = baseline.v8 === v8;
if (!sameEngine) console.log(`bench:check: the baseline's bytes were measured on V8 ${baseline.v8}, this is ${v8}: bytes are not compared`);

const grown = [];
const shrunk = [];
for (const { workload, unit, bytesTolerance } of WORKLOADS) {
  const was = baseline.workloads?.[workload];
  if (!was) {
    grown.push(`${workload}: not in the baseline`);
    continue;
  }
  const now = measured[workload];
  if (was.size !== now.size) {
    grown.push(`${workload}: the baseline measured size ${was.size}, this check ${now.size}`);
    continue;
  }
  for (const [key, value] of Object.entries(now.figures)) {
    if (key === 'bytes' && !sameEngine) continue;
    const before = was.figures[key];
    if (typeof before !== 'number') {
      grown.push(`${workload} ${key} per ${unit}: not in the baseline (now ${value})`);
      continue;
    }
    const tolerance = key === 'bytes' ? bytesTolerance : COUNTS_TOLERANCE;
    // A count that was zero may not become non-zero: the absolute floor is the rounding's.
    if (value > before * (1 + tolerance) + (key === 'bytes' ? 0 : 0.01)) {
      grown.push(`${workload} ${key} per ${unit}: ${before} -> ${value} (tolerance ${key === 'bytes' ? `${tolerance * 100} %` : 'none'})`);
    } else if (value < before * (1 - tolerance)) shrunk.push(`${workload} ${key} per ${unit}: ${before} -> ${value}`);
  }
}
if (shrunk.length > 0) console.log(`bench:check: fell (commit node bench/check.mjs --update to keep the gain):\n  ${shrunk.join('\n  ')}`);
if (grown.length > 0) {
  console.error(`bench:check: FAILED, per-unit cost grew past its tolerance:\n  ${grown.join('\n  ')}`);
  process.exit(1);
}
console.log('bench:check: ok, no figure grew past its tolerance');
