// The workers' part of the scale check (bench/scale.mjs): worker processes (./workerProcess.mjs)
// against a PostgreSQL server started here (scripts/postgresCluster.mjs, the server's own
// durability, fsync on), every model request 1–3 s (./workload.mjs):
//
// 1. Capacity: R runs of a root and N sub-agents queued at once on one worker that takes them all
//    (whole: R runs at once; spread: a slot per session). Once the sessions are up, a steady window:
//    the worker's CPU (process.cpuUsage inside it), the sessions in a model request, the model steps
//    per second; then its heap and RSS after a full GC with the sessions still held. At two sizes,
//    so the per-session slope is told from the fixed cost; and, spread, at two numbers of parked
//    roots with the same live sessions (a parked session's cost). After the runs end, the journal
//    rows and the bytes of the exarch and pgboss schemas, before and after, per model step.
// 2. Throughput: Q runs queued on 1, 2 and 4 workers (each C runs at once): sessions/s and steps/s.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import pg from 'pg';
import { openPostgresStore, startBoss, submitRun } from '../../dist/src/postgres.js';
import { startPostgres } from '../../scripts/postgresCluster.mjs';
import { TOOLS } from './workload.mjs';

const workerScript = new URL('./workerProcess.mjs', import.meta.url).pathname;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The sizes of each part: `quick` checks the bench works in a minute or two. */
function scalePlan(quick) {
  const shape = quick ? { subAgents: 20, steps: 6 } : { subAgents: 50, steps: 15 };
  const { subAgents } = shape;
  return {
    latency: { minMs: 1000, maxMs: 3000 },
    windowMs: quick ? 4_000 : 10_000,
    capacity: [
      { mode: 'whole', runs: quick ? 5 : 20, ...shape },
      { mode: 'whole', runs: quick ? 10 : 40, ...shape },
      { mode: 'spread', runs: quick ? 5 : 20, ...shape },
      { mode: 'spread', runs: quick ? 10 : 40, ...shape },
      // As many live sessions as the first spread size, ten times the parked roots.
      { mode: 'spread', runs: quick ? 50 : 200, subAgents: subAgents / 10, steps: shape.steps },
    ],
    throughput: {
      workers: [1, 2, 4],
      modes: ['whole', 'spread'],
      runs: quick ? 12 : 60,
      concurrency: quick ? 4 : 20,
      shape: { subAgents: quick ? 10 : 50, steps: quick ? 1 : 2 },
    },
  };
}

async function query(db, sql, params = []) {
  const client = new pg.Client({ connectionString: db });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** Journal rows and the bytes (tables, indexes, TOAST) of the exarch and pgboss schemas. */
async function footprint(db) {
  const bytes = 'SELECT coalesce(sum(pg_total_relation_size(format($$%I.%I$$, schemaname, tablename)::regclass)), 0) AS n FROM pg_tables WHERE schemaname = $1';
  const [rows] = await query(db, 'SELECT count(*) AS n FROM exarch.journal');
  const [exarch] = await query(db, bytes, ['exarch']);
  const [pgboss] = await query(db, bytes, ['pgboss']);
  return { rows: Number(rows.n), exarch: Number(exarch.n), pgboss: Number(pgboss.n) };
}

/** A worker process; `ask('stats' | 'memory')` answers with its JSON line. */
async function startWorker(db, concurrency, shape, latency, nodeFlags) {
  const argv = [db, concurrency, shape.subAgents, shape.steps, latency.minMs, latency.maxMs].map(String);
  const child = spawn(process.execPath, ['--expose-gc', ...nodeFlags, workerScript, ...argv], { stdio: ['pipe', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  const waiting = [];
  const closed = new Promise((resolve) => child.on('close', resolve));
  const ready = new Promise((resolve, reject) => {
    lines.on('line', (line) => {
      if (line === 'ready') return resolve();
      waiting.shift()?.(JSON.parse(line));
    });
    child.on('close', (code) => reject(new Error(`worker exited ${code} before it was ready`)));
  });
  await ready;
  return {
    ask: (command) =>
      new Promise((resolve) => {
        waiting.push(resolve);
        child.stdin.write(`${command}\n`);
      }),
    async stop() {
      child.kill('SIGTERM');
      await closed;
    },
  };
}

/** `runs` runs submitted at once; resolves once all are done (rejects on one that is not). */
async function submitAndWait(db, runs, mode, timeoutMs) {
  const store = openPostgresStore(db);
  const boss = await startBoss(db);
  const cwd = mkdtempSync(join(tmpdir(), 'exarch-bench-scale-'));
  try {
    for (let i = 0; i < runs; i++)
      await submitRun(store, boss, { task: `Fan out ${i}`, cwd, record: { tools: TOOLS, ...(mode === 'spread' ? { spread: true } : {}) } });
  } catch (error) {
    await boss.stop({ graceful: false, wait: true });
    await store.close();
    throw error;
  }
  const done = (async () => {
    try {
      const end = performance.now() + timeoutMs;
      for (;;) {
        const [row] = await query(
          db,
          "SELECT count(*) FILTER (WHERE status = 'done') AS done, count(*) FILTER (WHERE status IN ('failed', 'capped')) AS bad FROM exarch.runs",
        );
        if (Number(row.bad) > 0) throw new Error(`${row.bad} runs did not end done`);
        if (Number(row.done) === runs) return;
        if (performance.now() > end) throw new Error(`${row.done} of ${runs} runs done after ${timeoutMs / 1000} s`);
        await sleep(250);
      }
    } finally {
      await boss.stop({ graceful: false, wait: true });
      await store.close();
      rmSync(cwd, { recursive: true, force: true });
    }
  })();
  return { done };
}

/** The live sessions a worker holds: whole, each run in progress is its root and sub-agents; spread, each job one session. */
const liveOf = (mode, stats, subAgents) => (mode === 'whole' ? stats.active * (1 + subAgents) : stats.active);

/** One capacity cell (see the note at the top). */
async function capacity(server, cell, plan, nodeFlags) {
  const { mode, runs, subAgents, steps } = cell;
  const db = await server.createDatabase();
  const slots = mode === 'whole' ? runs : runs * (subAgents + 1);
  const worker = await startWorker(db, slots, cell, plan.latency, nodeFlags);
  try {
    const before = await footprint(db);
    const busyTarget = runs * subAgents;
    const { done } = await submitAndWait(db, runs, mode, 600_000);
    done.catch(() => undefined);
    // Ramp: until 90 % of the sub-agents wait on their model (or 60 s, and the window shows what it got).
    const rampStart = performance.now();
    let stats = await worker.ask('stats');
    while (stats.inFlight < 0.9 * busyTarget && performance.now() - rampStart < 60_000) {
      await sleep(250);
      stats = await worker.ask('stats');
    }
    const ramp = (performance.now() - rampStart) / 1000;
    const first = stats;
    const samples = [];
    while (stats.at - first.at < plan.windowMs) {
      await sleep(250);
      stats = await worker.ask('stats');
      samples.push(stats);
    }
    const seconds = (stats.at - first.at) / 1000;
    const mean = (pick) => samples.reduce((sum, s) => sum + pick(s), 0) / samples.length;
    const memory = await worker.ask('memory');
    await done;
    const last = await worker.ask('stats');
    const after = await footprint(db);
    return {
      ...cell,
      ramp,
      live: mean((s) => liveOf(mode, s, subAgents)),
      inFlight: mean((s) => s.inFlight),
      liveAtMemory: liveOf(mode, memory, subAgents),
      parked: mode === 'spread' ? runs : 0,
      cpu: (stats.cpuUs - first.cpuUs) / 1e6 / seconds,
      stepsPerSecond: (stats.requests - first.requests) / seconds,
      queriesPerStep: (stats.queries - first.queries) / (stats.requests - first.requests),
      heap: memory.heap,
      rss: memory.rss,
      steps: last.requests,
      expectedSteps: runs * (2 + subAgents * (steps + 1)),
      rows: after.rows - before.rows,
      exarchBytes: after.exarch - before.exarch,
      pgbossBytes: after.pgboss - before.pgboss,
    };
  } finally {
    await worker.stop();
  }
}

/** `runs` runs on `n` workers of `concurrency` runs each: seconds until all are done, and the steps made. */
async function throughput(server, n, mode, plan, nodeFlags) {
  const { runs, concurrency, shape } = plan.throughput;
  const db = await server.createDatabase();
  const slots = mode === 'whole' ? concurrency : concurrency * (shape.subAgents + 1);
  const workers = await Promise.all(Array.from({ length: n }, () => startWorker(db, slots, shape, plan.latency, nodeFlags)));
  try {
    const started = performance.now();
    const { done } = await submitAndWait(db, runs, mode, 900_000);
    await done;
    const seconds = (performance.now() - started) / 1000;
    const steps = (await Promise.all(workers.map((w) => w.ask('stats')))).reduce((sum, s) => sum + s.requests, 0);
    return { n, mode, slots, seconds, sessions: runs * (1 + shape.subAgents), steps };
  } finally {
    await Promise.all(workers.map((w) => w.stop()));
  }
}

const kb = (bytes) => (bytes / 1024).toFixed(1);
const mb = (bytes) => (bytes / 1024 / 1024).toFixed(1);

/** Runs both parts and prints their markdown tables. `profile`: a directory for each worker's `--cpu-prof`; `cells`: only these capacity cells (indices). */
export async function scaleOnWorkers({ quick, profile, parts, cells }) {
  const plan = scalePlan(quick);
  if (cells) plan.capacity = plan.capacity.filter((_, i) => cells.includes(i));
  const nodeFlags = profile ? ['--cpu-prof', `--cpu-prof-dir=${profile}`] : [];
  const server = await startPostgres({ durable: true });
  try {
    const { minMs, maxMs } = plan.latency;
    if (parts.includes('capacity')) {
      console.log(
        `\n## On the workers: one worker's capacity, every model request ${minMs / 1000}–${maxMs / 1000} s (under load unless the load average says idle)\n`,
      );
      console.log(
        `Each cell: R runs of a root and N sub-agents (each ${plan.capacity[0].steps} tool steps, then its reply) queued at once on one worker that takes them all; a ${plan.windowMs / 1000} s steady window once 90 % of the sub-agents wait on their model. Heap and RSS after a full GC, sessions held.\n`,
      );
      console.log(
        '| mode | runs × sub-agents | live sessions | parked | in a model request | worker CPU (% of a core) | steps/s | CPU ms/step | statements/step | heap MB | RSS MB | journal rows/step | exarch bytes/step | pgboss bytes/step | ramp s |',
      );
      console.log('|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
      const cells = [];
      for (const cell of plan.capacity) {
        const r = await capacity(server, cell, plan, nodeFlags);
        cells.push(r);
        if (r.steps !== r.expectedSteps) console.error(`note: ${r.steps} model steps, ${r.expectedSteps} expected (retried requests or resumed sessions)`);
        console.log(
          `| ${r.mode} | ${r.runs} × ${r.subAgents} | ${Math.round(r.live)} | ${r.parked} | ${Math.round(r.inFlight)} | ${(r.cpu * 100).toFixed(0)} | ${r.stepsPerSecond.toFixed(0)} | ${((r.cpu * 1000) / r.stepsPerSecond).toFixed(2)} | ${r.queriesPerStep.toFixed(2)} | ${mb(r.heap)} | ${mb(r.rss)} | ${(r.rows / r.steps).toFixed(2)} | ${(r.exarchBytes / r.steps).toFixed(0)} | ${(r.pgbossBytes / r.steps).toFixed(0)} | ${r.ramp.toFixed(1)} |`,
        );
      }
      // CPU is per step above: a worker's CPU follows the steps it makes, not the sessions it holds.
      console.log('\n| per session (slope between the two sizes) | heap KB | RSS KB |');
      console.log('|---|---:|---:|');
      for (const mode of ['whole', 'spread']) {
        const [small, large] = cells.filter((c) => c.mode === mode).slice(0, 2);
        if (!small || !large) continue;
        const live = large.liveAtMemory - small.liveAtMemory;
        console.log(
          `| live, ${mode} (${Math.round(small.liveAtMemory)} → ${Math.round(large.liveAtMemory)} live) | ${kb((large.heap - small.heap) / live)} | ${kb((large.rss - small.rss) / live)} |`,
        );
      }
      const spread = cells.filter((c) => c.mode === 'spread');
      const [few, many] = [spread[0], spread[2]];
      if (few && many) {
        // Same live sessions, more parked roots: what is left is a parked session's (and its run's) cost.
        const extra = many.parked - few.parked;
        const liveCost = (many.liveAtMemory - few.liveAtMemory) * ((spread[1].heap - few.heap) / (spread[1].liveAtMemory - few.liveAtMemory));
        console.log(
          `| parked, spread (${few.parked} → ${many.parked} parked roots, live sessions held equal) | ${kb((many.heap - few.heap - liveCost) / extra)} | ${kb((many.rss - few.rss) / extra)} |`,
        );
      }
    }
    if (parts.includes('throughput')) {
      const { runs, concurrency, shape } = plan.throughput;
      console.log(
        `\n## On the workers: throughput at ${minMs / 1000}–${maxMs / 1000} s per model request: ${runs} runs of a root and ${shape.subAgents} sub-agents (${shape.steps} tool step${shape.steps === 1 ? '' : 's'} each) queued at once, each worker ${concurrency} runs at once\n`,
      );
      console.log('| workers | mode | slots per worker | sessions/s | steps/s | seconds |');
      console.log('|---:|---|---:|---:|---:|---:|');
      for (const n of plan.throughput.workers) {
        for (const mode of plan.throughput.modes) {
          const r = await throughput(server, n, mode, plan, nodeFlags);
          console.log(
            `| ${r.n} | ${r.mode} | ${r.slots} | ${(r.sessions / r.seconds).toFixed(1)} | ${(r.steps / r.seconds).toFixed(0)} | ${r.seconds.toFixed(1)} |`,
          );
        }
      }
    }
  } finally {
    server.stop();
  }
}
