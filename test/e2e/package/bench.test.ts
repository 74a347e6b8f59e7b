import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { postgresForFile } from '../../support/postgresServer.js';

// The benchmark's cells for exarch, exarch with durable runs (SQLite) and the hand-written floor (the
// peers live in bench/'s own dependencies, which `npm test` does not install): each runs, and
// reaches every count it claims.
const cell = fileURLToPath(new URL('../../../bench/cell.mjs', import.meta.url));

function runCell(...args: string[]) {
  return runCellWith({}, ...args);
}

function runCellWith(env: Record<string, string>, ...args: string[]) {
  const result = spawnSync(process.execPath, ['--expose-gc', cell, ...args], { encoding: 'utf8', timeout: 60_000, env: { ...process.env, ...env } });
  const lines = result.stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  return {
    status: result.status,
    stderr: result.stderr,
    timed: lines.find((l) => l['phase'] === 'memory run'),
    done: lines.find((l) => l['phase'] === 'done'),
  };
}

describe('npm run bench: the exarch, durable exarch and hand-written cells', () => {
  for (const system of ['exarch', 'handwritten']) {
    it(`${system}: loop, fan-out and stream cells finish with the counts the workloads require`, () => {
      for (const [workload, size, counts] of [
        ['loop', '50', { modelCalls: 51, toolExecutions: 50 }],
        ['fanout', '20', { childModelCalls: 60, toolExecutions: 40, reportsSeenByRoot: 20 }],
        ['stream', '2000', { deltasReceived: 2000, charsReceived: 2000 }],
      ] as const) {
        const { status, stderr, timed, done } = runCell(system, workload, size);
        expect(stderr).toBe('');
        expect(status).toBe(0);
        expect(timed?.['counts']).toMatchObject(counts);
        expect(timed?.['ms']).toBeGreaterThan(0);
        expect(typeof done?.['retainedBytes']).toBe('number');
      }
    }, 60_000);
  }

  // Durable runs (issue 12): the same workloads journaled to SQLite, and what a loop step writes,
  // reported and flat in the history's length (bytes are counted, not timed: a loose ratio).
  it('exarch-durable: loop, fan-out and stream cells finish with the counts the workloads require', () => {
    for (const [workload, size, counts] of [
      ['fanout', '20', { childModelCalls: 60, toolExecutions: 40, reportsSeenByRoot: 20 }],
      ['stream', '2000', { deltasReceived: 2000, charsReceived: 2000 }],
    ] as const) {
      const { status, stderr, timed, done } = runCell('exarch-durable', workload, size);
      expect(stderr).toBe('');
      expect(status).toBe(0);
      expect(timed?.['counts']).toMatchObject(counts);
      expect(timed?.['ms']).toBeGreaterThan(0);
      expect(timed?.['written']).toBeUndefined();
      expect(typeof done?.['retainedBytes']).toBe('number');
    }
  }, 60_000);

  it('exarch-durable: the loop reports the bytes a step writes, flat between 50 and 500 steps', () => {
    const perStep: Record<string, number>[] = [];
    for (const steps of [50, 500]) {
      const { status, stderr, timed, done } = runCell('exarch-durable', 'loop', String(steps));
      expect(stderr).toBe('');
      expect(status).toBe(0);
      expect(timed?.['counts']).toMatchObject({ modelCalls: steps + 1, toolExecutions: steps });
      expect(timed?.['ms']).toBeGreaterThan(0);
      expect(typeof done?.['retainedBytes']).toBe('number');
      const written = timed?.['written'] as Record<string, number> | undefined;
      expect(written?.['journalRows']).toBeGreaterThanOrEqual(steps);
      expect(written?.['journalBytes']).toBeGreaterThan(0);
      expect(written?.['fileBytes']).toBeGreaterThan(0);
      if (process.platform === 'linux') expect(written?.['diskBytes']).toBeGreaterThan(0);
      perStep.push(Object.fromEntries(Object.entries(written ?? {}).map(([figure, n]) => [figure, n / steps])));
    }
    const [short, long] = perStep as [Record<string, number>, Record<string, number>];
    for (const figure of Object.keys(short)) {
      const ratio = (long[figure] ?? 0) / (short[figure] ?? 1);
      expect(ratio, `${figure} per step, 500 steps against 50`).toBeGreaterThan(1 / 1.5);
      expect(ratio, `${figure} per step, 500 steps against 50`).toBeLessThan(1.5);
    }
  }, 60_000);

  it('refuses a workload it does not know, with a usage line', () => {
    const { status, stderr } = runCell('exarch', 'juggle', '5');
    expect(status).toBe(2);
    expect(stderr).toMatch(/^usage: /);
  });
});

// Durable exarch on PostgreSQL (issue 40), beside LangGraph's PostgresSaver in the durable table: each
// cell on a database of its own (bench/run.mjs makes one per cell on the server it starts).
describe('npm run bench: the durable exarch cells on PostgreSQL', () => {
  const postgres = postgresForFile('test/e2e/package/bench.test.ts (its Postgres part)');

  it.runIf(postgres.available)(
    'exarch-durable-postgres: loop, fan-out and stream cells finish with the counts the workloads require',
    async () => {
      for (const [workload, size, counts] of [
        ['fanout', '20', { childModelCalls: 60, toolExecutions: 40, reportsSeenByRoot: 20 }],
        ['stream', '2000', { deltasReceived: 2000, charsReceived: 2000 }],
      ] as const) {
        const database = await postgres.server().createDatabase();
        const { status, stderr, timed, done } = runCellWith({ EXARCH_BENCH_POSTGRES: database }, 'exarch-durable-postgres', workload, size);
        expect(stderr).toBe('');
        expect(status).toBe(0);
        expect(timed?.['counts']).toMatchObject(counts);
        expect(timed?.['ms']).toBeGreaterThan(0);
        expect(timed?.['written']).toBeUndefined();
        expect(typeof done?.['retainedBytes']).toBe('number');
      }
    },
    120_000,
  );

  it.runIf(postgres.available)(
    'exarch-durable-postgres: the loop reports the rows, payload and WAL bytes a step writes, flat between 50 and 500 steps',
    async () => {
      const perStep: Record<string, number>[] = [];
      for (const steps of [50, 500]) {
        const database = await postgres.server().createDatabase();
        const { status, stderr, timed } = runCellWith({ EXARCH_BENCH_POSTGRES: database }, 'exarch-durable-postgres', 'loop', String(steps));
        expect(stderr).toBe('');
        expect(status).toBe(0);
        expect(timed?.['counts']).toMatchObject({ modelCalls: steps + 1, toolExecutions: steps });
        const written = timed?.['written'] as Record<string, number> | undefined;
        expect(written?.['journalRows']).toBeGreaterThanOrEqual(steps);
        expect(written?.['journalBytes']).toBeGreaterThan(0);
        expect(written?.['walBytes']).toBeGreaterThan(written?.['journalBytes'] ?? 0);
        perStep.push(Object.fromEntries(Object.entries(written ?? {}).map(([figure, n]) => [figure, n / steps])));
      }
      const [short, long] = perStep as [Record<string, number>, Record<string, number>];
      for (const figure of Object.keys(short)) {
        const ratio = (long[figure] ?? 0) / (short[figure] ?? 1);
        expect(ratio, `${figure} per step, 500 steps against 50`).toBeGreaterThan(1 / 1.5);
        expect(ratio, `${figure} per step, 500 steps against 50`).toBeLessThan(1.5);
      }
    },
    120_000,
  );

  it('exarch-durable-postgres: without a database from bench/run.mjs, the cell fails with a line that says so', () => {
    const { status, stderr } = runCellWith({ EXARCH_BENCH_POSTGRES: '' }, 'exarch-durable-postgres', 'loop', '5');
    expect(status).toBe(1);
    expect(stderr).toMatch(/no PostgreSQL database: run the Postgres systems through bench\/run\.mjs/);
  });
});

describe('npm run bench: model requests of a fan-out under real latency (bench/latency.mjs)', () => {
  it('with wait_for_agents the root makes 2 requests; ending its turn to wait makes more', () => {
    const script = fileURLToPath(new URL('../../../bench/latency.mjs', import.meta.url));
    const result = spawnSync(process.execPath, [script, '--runs', '1', '--no-write'], { encoding: 'utf8', timeout: 60_000 });
    expect(result.status, result.stderr).toBe(0);
    const rows = result.stdout.split('\n').filter((line) => line.startsWith('| with') || line.startsWith('| without'));
    const requests = rows.map((row) => Number(row.split('|')[2]?.trim()));
    expect(requests[0]).toBe(2);
    expect(requests[1]).toBeGreaterThan(2);
  }, 60_000);
});

describe('npm run bench: text deltas to a consumer of the run events (bench/events.mjs)', () => {
  it('every row delivers every character; the iterator takes merged deltas when the model streams in chunks', () => {
    const script = fileURLToPath(new URL('../../../bench/events.mjs', import.meta.url));
    const result = spawnSync(process.execPath, [script, '--runs', '1', '--deltas', '5000', '--no-write'], { encoding: 'utf8', timeout: 60_000 });
    // The script checks each consumer got all 5,000 characters, and fails otherwise.
    expect(result.status, result.stderr).toBe(0);
    const rows = result.stdout.split('\n').filter((line) => line.startsWith('| observe') || line.startsWith('| for await'));
    const taken = rows.map((row) => Number(row.split('|')[3]?.trim().replace(/,/g, '')));
    expect(taken[0]).toBe(5000);
    expect(taken[1]).toBeLessThan(5000);
  }, 60_000);
});

describe('npm run bench: command-line start (bench/cli-start.mjs)', () => {
  it('times --help, --version and runs beside node -e 0, each a row with its median and its difference (not judged here)', () => {
    const script = fileURLToPath(new URL('../../../bench/cli-start.mjs', import.meta.url));
    const result = spawnSync(process.execPath, [script, '--runs', '1', '--no-write'], { encoding: 'utf8', timeout: 60_000 });
    // The script stops on a command that fails, so exit 0 says each one answered.
    expect(result.status, result.stderr).toBe(0);
    const rows = result.stdout.split('\n').filter((line) => /^\| (node|exarch) /.test(line));
    expect(rows.map((row) => row.split('|')[1]?.trim())).toEqual(['node -e 0', 'exarch --help', 'exarch --version', 'exarch runs (empty store)']);
    for (const row of rows.slice(1)) expect(row.split('|')[3]?.trim()).toMatch(/^[+-]\d+ ms$/);
    expect(result.stdout).toMatch(/^Load average \(1 min\) /m);
  }, 60_000);
});
