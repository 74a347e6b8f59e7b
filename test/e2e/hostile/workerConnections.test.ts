import { spawn } from 'node:child_process';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer } from '../../support/anthropicServer.js';
import { call, exarch, MAIN, onCleanup, stream, workdir } from '../../support/cliHarness.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { query, rootAnswer, statusOf } from '../../support/storedRuns.js';
import { until } from '../../support/until.js';

/**
 * Issue 37, hole 6: a Postgres restart killed a worker. A pg client the store had checked out of
 * its pool for a transaction (the run's claim, a spread session's append with the jobs it queues)
 * had no 'error' listener: the server going away emitted an unhandled 'error' event ("Connection
 * terminated unexpectedly") and took the whole process with it, runs and all.
 *
 * The fault is made deterministic: the test holds the run's row lock, so the worker's transaction
 * waits inside the server; then that backend is terminated (or the whole server restarted) while
 * it waits. Every other connection the worker holds (its store's idle clients, pg-boss's) is
 * terminated too. The worker must stay up and finish the run.
 */

const postgres = postgresForFile('test/e2e/hostile/workerConnections.test.ts');

interface WorkerProcess {
  readonly child: ReturnType<typeof spawn>;
  stderr(): string;
}

function startWorker(db: string, model: AnthropicTestServer, cwd: string, extra: readonly string[] = []): WorkerProcess {
  const child = spawn(process.execPath, [MAIN, 'worker', '--db', db, '--job-expiry', '30', ...extra], {
    cwd,
    env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await closed;
  });
  return { child, stderr: () => stderr };
}

/** A transaction of the test's own holding the run's row: a worker's claim or append of that run waits for it. */
async function holdRunRow(db: string, id: string): Promise<{ release(): Promise<void> }> {
  const client = new pg.Client({ connectionString: db });
  // Its own connection may be cut by a restart the test makes: that is not a failure of the test.
  client.on('error', () => undefined);
  await client.connect();
  await client.query('BEGIN');
  await client.query('SELECT 1 FROM exarch.runs WHERE id = $1 FOR UPDATE', [id]);
  return {
    async release() {
      await client.query('ROLLBACK').catch(() => undefined);
      await client.end().catch(() => undefined);
    },
  };
}

/** The backends of the test's database that wait for a lock: the worker's statements stuck behind the test's. */
async function lockWaiters(db: string): Promise<number[]> {
  const rows = await query<{ pid: number }>(
    db,
    "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()",
  );
  return rows.map((r) => r.pid);
}

/** Asks every backend of the test's database but its own to end (pg_terminate_backend); returns how many there were. */
async function terminateAll(db: string): Promise<number> {
  const rows = await query<{ ok: boolean }>(
    db,
    'SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()',
  );
  return rows.filter((r) => r.ok).length;
}

/** Whether the run has ended; a server still recovering from the test's fault answers later. */
async function ended(db: string, id: string): Promise<boolean> {
  return ['done', 'failed', 'capped'].includes((await statusOf(db, id).catch(() => undefined)) ?? '');
}

describe.skipIf(!postgres.available)('a worker outlives every connection it holds', () => {
  it('the backend of its claim transaction, waiting in the server, is killed (the server resets every connection): the worker goes on and finishes the run', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const model = await startAnthropicServer(historyHandler({ root: [stream({ text: 'all well' })] }));
    onCleanup(() => model.close());
    const cwd = workdir();
    const submitted = await exarch(['run', '--db', db, '--detach', 'Say all is well.'], { cwd, env: { ANTHROPIC_API_KEY: 'test-key' } });
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stdout.trim();

    const lock = await holdRunRow(db, id);
    const worker = startWorker(db, model, cwd);
    const story = (): string => `worker stderr:\n${worker.stderr()}`;
    try {
      await until(async () => (await lockWaiters(db)).length > 0 || worker.child.exitCode !== null, `the worker's claim to wait for the row\n${story()}`);
      // Killed, not asked to end: the connection is gone without a word (a crash, a cut network).
      const waiters = await lockWaiters(db);
      expect(waiters.length, story()).toBeGreaterThan(0);
      for (const pid of waiters) process.kill(pid, 'SIGKILL');
    } finally {
      await lock.release();
    }
    // And the rest of what it holds, asked to end this time: its store's idle clients, pg-boss's pool.
    await until(
      async () => (await terminateAll(db).catch(() => 0)) > 0 || worker.child.exitCode !== null,
      `the worker's other connections to be there\n${story()}`,
    );
    await until(async () => (await ended(db, id)) || worker.child.exitCode !== null, `the run to end\n${story()}`);
    expect(worker.child.exitCode, story()).toBeNull();
    expect(await statusOf(db, id)).toBe('done');
    expect(await rootAnswer(db, id)).toBe('all well');
    await until(() => worker.stderr().includes(`exarch worker: run ${id} done`), `the worker to say the run is done\n${story()}`);
    expect(worker.stderr()).not.toMatch(/Error|terminated/);
  });

  it('--spread: a Postgres restart while a session appends (its transaction waiting in the server): the worker goes on and finishes the run', {
    timeout: 180_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    // The root's first request is held until the test holds the run's row: its spawn records and
    // the jobs they queue are then written in a transaction that waits for the row.
    let letRootGo = (): void => undefined;
    const rootMayGo = new Promise<void>((resolve) => (letRootGo = resolve));
    const scripted = historyHandler({
      root: [
        stream({ toolCalls: [call('agent', { name: 'a', task: 'Say a.' }), call('agent', { name: 'b', task: 'Say b.' }), call('wait_for_agents', {})] }),
        stream({ text: 'both replied' }),
      ],
      a: [stream({ toolCalls: [call('reply', { result: 'a' })] })],
      b: [stream({ toolCalls: [call('reply', { result: 'b' })] })],
    });
    const model = await startAnthropicServer(async (request) => {
      if (request.agent === 'root' && request.body.messages.length === 1) await rootMayGo;
      return scripted(request);
    });
    onCleanup(() => model.close());
    const cwd = workdir();
    const worker = startWorker(db, model, cwd, ['--concurrency', '4']);
    const story = (): string => `worker stderr:\n${worker.stderr()}`;
    await until(() => worker.stderr().includes('exarch worker: ready'), `the worker to be ready\n${story()}`);
    const submitted = await exarch(['run', '--db', db, '--detach', '--spread', 'Start a and b, then say both replied.'], {
      cwd,
      env: { ANTHROPIC_API_KEY: 'test-key' },
    });
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stdout.trim();
    await until(() => model.requests.some((r) => r.agent === 'root'), `the root's first request\n${story()}`);

    const lock = await holdRunRow(db, id);
    try {
      letRootGo();
      await until(async () => (await lockWaiters(db)).length > 0 || worker.child.exitCode !== null, `the root's append to wait for the row\n${story()}`);
      await postgres.server().restart();
    } finally {
      await lock.release();
    }
    await until(async () => (await ended(db, id)) || worker.child.exitCode !== null, `the run to end\n${story()}`, 120_000);
    expect(worker.child.exitCode, story()).toBeNull();
    expect(await statusOf(db, id)).toBe('done');
    expect(await rootAnswer(db, id)).toBe('both replied');
    expect(worker.stderr()).not.toMatch(/Error|terminated/);
  });
});
