// The workers' benchmark (issue 18), on one machine against a PostgreSQL server it starts itself
// (scripts/postgresCluster.mjs; the server's own durability settings, fsync on):
//
// 1. Runs per second and sub-agents per second with 1, 2 and 4 worker processes (each
//    `--concurrency` runs at once): RUNS runs of the fan-out workload (bench/workers/fanOut.mjs: a
//    root, SUB_AGENTS sub-agents, every model request 50–200 ms) queued at once; the time from the
//    first submit until every run is done. Then how far one worker goes: one worker at higher
//    concurrencies (--sweep), with twice the runs.
// 2. The store's cost per durable step: a loop of STEPS tool calls at no latency, in memory (no
//    store), journaled to SQLite, and journaled to Postgres; the difference per step, and the
//    appends and rows each step writes.
//
//   npm run bench:workers        (builds exarch, runs this; not part of npm test)
//   node bench/workers.mjs [--runs 60] [--concurrency 8] [--workers 1,2,4] [--modes whole,spread] [--sweep 16,32,64] [--steps 200] [--rounds 3]
//                          [--latency 50-200] [--sessions 64]
//
// `--latency 0`: the model answers at once, so runs/s is what the workers and the store can do
// (CPU and commits), not what the model's latency allows. `--sessions`: the store's cost per
// step is measured with one loop alone and with this many loops at once on one store (their
// commits grouped, see src/store/groupCommit.ts).
//
// `--modes`: each throughput row is measured with runs whole on one worker and with each
// sub-agent a job of its own (`spread`); `--concurrency` is runs at once, or sessions at once.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os, { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import pg from 'pg';
import { z } from '../node_modules/zod/index.js';
import { createSessionActor, defineTool, startRun, waitForSettled } from '../dist/src/index.js';
import { openPostgresStore, startBoss, submitRun } from '../dist/src/postgres.js';
import { openSqliteStore } from '../dist/src/store/sqliteStore.js';
import { scriptedProvider } from '../dist/src/testing/index.js';
import { POSTGRES_BIN, startPostgres } from '../scripts/postgresCluster.mjs';
import { SUB_AGENTS, TOOLS } from './workers/fanOut.mjs';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '60' },
    concurrency: { type: 'string', default: '8' },
    workers: { type: 'string', default: '1,2,4' },
    sweep: { type: 'string', default: '16,32,64' },
    steps: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    modes: { type: 'string', default: 'whole,spread' },
    latency: { type: 'string', default: '50-200' },
    sessions: { type: 'string', default: '64' },
  },
});
const RUNS = Number(args.runs);
const CONCURRENCY = Number(args.concurrency);
const WORKERS = args.workers.split(',').map(Number);
const SWEEP = args.sweep.split(',').filter(Boolean).map(Number);
const STEPS = Number(args.steps);
const ROUNDS = Number(args.rounds);
/** `whole`: a run's tree on one worker; `spread`: each sub-agent a job of its own (`exarch run --db --spread`). */
const MODES = args.modes.split(',').filter(Boolean);
const LATENCY = args.latency;
const SESSIONS = Number(args.sessions);
if (POSTGRES_BIN === undefined) {
  console.error('bench/workers.mjs: PostgreSQL not found under /usr/lib/postgresql (apt-get install postgresql)');
  process.exit(2);
}

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
const workerScript = new URL('./workers/workerProcess.mjs', import.meta.url).pathname;

async function count(db, sql) {
  const client = new pg.Client({ connectionString: db });
  await client.connect();
  try {
    return Number((await client.query(sql)).rows[0]?.n ?? 0);
  } finally {
    await client.end();
  }
}

/** `n` worker processes, once each says it is ready. */
async function startWorkers(db, n, concurrency) {
  const workers = [];
  for (let i = 0; i < n; i++) {
    const child = spawn(process.execPath, [workerScript, db, String(concurrency)], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, BENCH_LATENCY_MS: LATENCY },
    });
    const closed = new Promise((resolve) => child.on('close', resolve));
    const ready = new Promise((resolve, reject) => {
      child.stdout.on('data', (d) => d.toString().includes('ready') && resolve());
      child.on('close', (code) => reject(new Error(`worker exited ${code} before it was ready`)));
    });
    workers.push({ child, closed, ready });
  }
  await Promise.all(workers.map((w) => w.ready));
  return workers;
}

/** `runs` runs queued at once on `n` workers of `concurrency`: seconds until all are done. */
async function throughput(server, n, concurrency, runs, mode = 'whole') {
  const db = await server.createDatabase();
  const store = openPostgresStore(db);
  const boss = await startBoss(db);
  const workers = await startWorkers(db, n, concurrency);
  const cwd = mkdtempSync(join(tmpdir(), 'exarch-bench-workers-'));
  try {
    const started = performance.now();
    for (let i = 0; i < runs; i++)
      await submitRun(store, boss, { task: `Fan out ${i}`, cwd, record: { tools: TOOLS, ...(mode === 'spread' ? { spread: true } : {}) } });
    for (;;) {
      const done = await count(db, "SELECT count(*) AS n FROM exarch.runs WHERE status = 'done'");
      const bad = await count(db, "SELECT count(*) AS n FROM exarch.runs WHERE status IN ('failed', 'capped')");
      if (bad > 0) throw new Error(`${bad} runs did not end done`);
      if (done === runs) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const seconds = (performance.now() - started) / 1000;
    const agents = await count(db, "SELECT count(*) AS n FROM exarch.journal WHERE type = 'session'");
    if (agents !== runs * (SUB_AGENTS + 1)) throw new Error(`${agents} sessions journaled, expected ${runs * (SUB_AGENTS + 1)}`);
    const rows = await count(db, 'SELECT count(*) AS n FROM exarch.journal');
    return { seconds, rowsPerSecond: rows / seconds };
  } finally {
    for (const w of workers) w.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.closed));
    await boss.stop({ graceful: false, wait: true });
    await store.close();
    rmSync(cwd, { recursive: true, force: true });
  }
}

const echo = defineTool({ name: 'echo', description: 'Echo the text back.', input: z.object({ text: z.string() }), run: ({ text }) => text });
const loopProvider = () =>
  scriptedProvider({ agents: { root: (_request, i) => (i < STEPS ? { calls: [{ name: 'echo', input: { text: `step ${i}` } }] } : { text: 'done' }) } });

/** A store that counts what it is asked to append. */
function counted(store) {
  const tally = { appends: 0, rows: 0 };
  const proxy = new Proxy(store, {
    get(target, key) {
      if (key === 'append') {
        return (rows) => {
          tally.appends += 1;
          tally.rows += rows.length;
          return target.append(rows);
        };
      }
      const value = target[key];
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
  return { store: proxy, tally };
}

/** Milliseconds for `n` loops at once (each its own run): in memory, or journaled to `store`. */
async function loops(store, n) {
  const started = performance.now();
  await Promise.all(Array.from({ length: n }, () => loop(store)));
  return performance.now() - started;
}

/** Milliseconds for the loop: in memory, or journaled to `store`. */
async function loop(store) {
  const session = { provider: loopProvider(), tools: [echo], maxSteps: STEPS + 10 };
  const started = performance.now();
  if (!store) {
    const actor = createSessionActor({ ...session, task: 'Loop.' });
    actor.start();
    await waitForSettled(actor);
    actor.stop();
  } else {
    const run = await startRun('Loop.', session, { store });
    const result = await run.result;
    if (result.status !== 'done') throw new Error(`the loop ended ${result.status}`);
  }
  return performance.now() - started;
}

async function storeCost(server) {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-bench-store-'));
  const db = await server.createDatabase();
  const sqlite = counted(openSqliteStore(join(dir, 'exarch.db')));
  const postgres = counted(openPostgresStore(db));
  try {
    // One warm-up of each (the schema is made on first use).
    await loop(undefined);
    await loop(sqlite.store);
    await loop(postgres.store);
    const samples = { memory: [], sqlite: [], postgres: [] };
    for (const tally of [sqlite.tally, postgres.tally]) Object.assign(tally, { appends: 0, rows: 0 });
    for (let round = 0; round < ROUNDS; round++) {
      samples.memory.push(await loop(undefined));
      samples.sqlite.push(await loop(sqlite.store));
      samples.postgres.push(await loop(postgres.store));
    }
    const memory = median(samples.memory) / STEPS;
    // The same loops, SESSIONS at once: per step of one session, amortised (wall ÷ every session's steps).
    const wide = { memory: [], sqlite: [], postgres: [] };
    const wideTally = { sqlite: { ...sqlite.tally }, postgres: { ...postgres.tally } };
    for (let round = 0; round < ROUNDS; round++) {
      wide.memory.push(await loops(undefined, SESSIONS));
      wide.sqlite.push(await loops(sqlite.store, SESSIONS));
      wide.postgres.push(await loops(postgres.store, SESSIONS));
    }
    const wideSteps = SESSIONS * STEPS;
    const wideMemory = median(wide.memory) / wideSteps;
    const wideRow = (name, ms, tally, before) => ({
      name: `${name}, ${SESSIONS} sessions at once`,
      perStep: ms / wideSteps,
      overMemory: ms / wideSteps - wideMemory,
      appends: (tally.appends - before.appends) / (ROUNDS * wideSteps),
      rows: (tally.rows - before.rows) / (ROUNDS * wideSteps),
    });
    const row = (name, ms, tally) => ({
      name,
      perStep: ms / STEPS,
      overMemory: ms / STEPS - memory,
      appends: tally.appends / (ROUNDS * STEPS),
      rows: tally.rows / (ROUNDS * STEPS),
    });
    return [
      { name: 'in memory (no store)', perStep: memory, overMemory: 0, appends: 0, rows: 0 },
      row('SQLite (WAL, synchronous=NORMAL)', median(samples.sqlite), wideTally.sqlite),
      row('PostgreSQL (fsync on, loopback)', median(samples.postgres), wideTally.postgres),
      { name: `in memory (no store), ${SESSIONS} sessions at once`, perStep: wideMemory, overMemory: 0, appends: 0, rows: 0 },
      wideRow('SQLite', median(wide.sqlite), sqlite.tally, wideTally.sqlite),
      wideRow('PostgreSQL', median(wide.postgres), postgres.tally, wideTally.postgres),
    ];
  } finally {
    sqlite.store.close();
    await postgres.store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const server = await startPostgres({ durable: true });
try {
  console.log(`# exarch workers on one machine: ${os.cpus().length} CPUs (${os.cpus()[0]?.model ?? 'unknown'}), Node ${process.version}`);
  console.log(
    `\n## Throughput: ${RUNS} runs queued at once, each a root and ${SUB_AGENTS} sub-agents (${2 + 2 * SUB_AGENTS} model requests of ${LATENCY === '0' ? 'no latency' : `${LATENCY} ms`}), ${CONCURRENCY} runs per worker at once\n`,
  );
  console.log('| workers | runs | slots per worker | runs/s | sub-agents/s | journal rows/s | seconds |');
  console.log('|---:|---|---:|---:|---:|---:|---:|');
  for (const n of WORKERS) {
    for (const mode of MODES) {
      // Spread, a slot holds a session, not a run: the same sessions at once as `whole` is (1 + SUB_AGENTS) times the slots.
      const slots = mode === 'spread' ? CONCURRENCY * (1 + SUB_AGENTS) : CONCURRENCY;
      const { seconds, rowsPerSecond } = await throughput(server, n, slots, RUNS, mode);
      console.log(
        `| ${n} | ${mode} | ${slots} | ${(RUNS / seconds).toFixed(2)} | ${((RUNS * SUB_AGENTS) / seconds).toFixed(1)} | ${Math.round(rowsPerSecond)} | ${seconds.toFixed(1)} |`,
      );
    }
  }
  if (SWEEP.length > 0) {
    console.log(`\n## How far one worker goes: ${2 * RUNS} runs queued at once, one worker\n`);
    console.log('| runs at once (--concurrency) | runs/s | sub-agents/s | journal rows/s | seconds |');
    console.log('|---:|---:|---:|---:|---:|');
    for (const concurrency of SWEEP) {
      const { seconds, rowsPerSecond } = await throughput(server, 1, concurrency, 2 * RUNS);
      console.log(
        `| ${concurrency} | ${((2 * RUNS) / seconds).toFixed(2)} | ${((2 * RUNS * SUB_AGENTS) / seconds).toFixed(1)} | ${Math.round(rowsPerSecond)} | ${seconds.toFixed(1)} |`,
      );
    }
  }
  console.log(
    `\n## The store's cost per durable step: a loop of ${STEPS} tool calls at no latency, alone and ${SESSIONS} at once (per step of one session, amortised; median of ${ROUNDS})\n`,
  );
  console.log('| store | ms per step | over memory | appends per step | rows per step |');
  console.log('|---|---:|---:|---:|---:|');
  for (const r of await storeCost(server)) {
    console.log(`| ${r.name} | ${r.perStep.toFixed(3)} | ${r.overMemory.toFixed(3)} | ${r.appends.toFixed(2)} | ${r.rows.toFixed(2)} |`);
  }
} finally {
  server.stop();
}
