// Runs the benchmark's cells for bench/run.mjs, each in a fresh process (bench/cell.mjs) with a
// temporary directory of its own (EXARCH_BENCH_TMP), removed when the cell ends, even when it was
// killed. The PostgreSQL systems (a module that says `needsPostgres`) run on one server for the whole
// bench (scripts/postgresCluster.mjs, fsync on), a fresh database per cell (EXARCH_BENCH_POSTGRES),
// dropped after it; where PostgreSQL is not installed they are left out with one line.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { POSTGRES_BIN, startPostgres } from '../scripts/postgresCluster.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** How long a measured run may take before its cell is stopped. */
export const CELL_LIMIT_MS = 60_000;
/**
 * How long the warm-up may take: as long as a measured run. The warm-up runs at most 1,000 units
 * of a cell; a system that needs longer for those cannot finish the measured run (the same size
 * or larger) within CELL_LIMIT_MS either, and waiting three minutes to learn it (LangGraph's
 * checkpointers on the 2,000-step loop, whose writes grow with the history) made a round of the
 * bench a quarter of an hour longer.
 */
const WARM_UP_LIMIT_MS = CELL_LIMIT_MS;

/**
 * A runner for the cells of `systems` (names; `modules[name]` the loaded system), which it trims of
 * the PostgreSQL systems when PostgreSQL is missing (one line on stderr). `runCell(system, cell)`
 * resolves with the cell's result, `{ failed }`, or a result without `retainedBytes` when only the
 * memory run ran out of time: each measured run gets CELL_LIMIT_MS, the warm-up WARM_UP_LIMIT_MS.
 * `postgres` names the server's version when one runs; it is stopped when the process exits.
 */
export async function cellRunner(systems, modules) {
  const postgresSystems = systems.filter((s) => modules[s].needsPostgres);
  if (postgresSystems.length > 0 && POSTGRES_BIN === undefined) {
    process.stderr.write(`skipping ${postgresSystems.join(', ')}: PostgreSQL not found under /usr/lib/postgresql (apt-get install postgresql)\n`);
    for (const s of postgresSystems) systems.splice(systems.indexOf(s), 1);
  }
  const server = postgresSystems.length > 0 && POSTGRES_BIN !== undefined ? await startPostgres({ durable: true }) : undefined;
  if (server) {
    process.on('exit', () => server.stop());
    // Ctrl-C: exit through the handler above rather than leave the server running.
    process.once('SIGINT', () => process.exit(130));
  }

  /** A fresh database on the bench's server for one cell; `drop()` removes it and its files. */
  async function cellDatabase() {
    const url = await server.createDatabase();
    return {
      url,
      async drop() {
        const client = new pg.Client({ connectionString: server.url });
        await client.connect();
        try {
          await client.query(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`);
        } finally {
          await client.end();
        }
      },
    };
  }

  async function runCell(system, cell) {
    const tmp = mkdtempSync(join(os.tmpdir(), 'exarch-bench-cell-'));
    const database = modules[system].needsPostgres ? await cellDatabase() : undefined;
    try {
      return await runCellIn(system, cell, { ...process.env, EXARCH_BENCH_TMP: tmp, ...(database ? { EXARCH_BENCH_POSTGRES: database.url } : {}) });
    } finally {
      rmSync(tmp, { recursive: true, force: true });
      await database?.drop();
    }
  }

  const postgres = server ? execFileSync(join(POSTGRES_BIN, 'postgres'), ['--version'], { encoding: 'utf8' }).trim() : undefined;
  return { runCell, postgres };
}

/** One cell in a fresh process with `env`; see cellRunner. */
function runCellIn(system, cell, env) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--expose-gc', join(here, 'cell.mjs'), system, cell.workload, String(cell.size)], {
      cwd: here,
      env,
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
