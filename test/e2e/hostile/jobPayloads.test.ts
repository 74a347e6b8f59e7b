import { spawn } from 'node:child_process';
import PgBoss from 'pg-boss';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer } from '../../support/anthropicServer.js';
import { exarch, MAIN, onCleanup, stream, workdir } from '../../support/cliHarness.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { query, rootAnswer, statusOf } from '../../support/storedRuns.js';
import { until } from '../../support/until.js';

/**
 * Issue 37, internal error text: a job on the run queue whose payload is null (or no object, or
 * without a run id) made the worker throw reading `job.data.runId`; the job was failed with that
 * TypeError's text and offered again, a thousand times (the queue's retry limit), and the worker
 * said nothing. Now such a job is failed once, with one line naming it; the queue goes on.
 *
 * The jobs are sent with pg-boss itself, as anything with the database's credentials could.
 */

const postgres = postgresForFile('test/e2e/hostile/jobPayloads.test.ts');

/** The queue exarch's workers take runs from (src/store/postgresStore.ts RUN_QUEUE), spelled out: the oracle does not import it. */
const QUEUE = 'exarch-runs';

describe.skipIf(!postgres.available)('a job whose payload is not a run', () => {
  it('null, a string, a number, an array, no run id, a run id of the wrong type: each failed once with one line naming it, never retried; the next run is run', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const model = await startAnthropicServer(historyHandler({ root: [stream({ text: 'still here' })] }));
    onCleanup(() => model.close());
    const cwd = workdir();
    const child = spawn(process.execPath, [MAIN, 'worker', '--db', db], {
      cwd,
      env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
    onCleanup(async () => {
      if (child.exitCode === null) child.kill('SIGKILL');
      await closed;
    });
    await until(() => stderr.includes('exarch worker: ready'), `the worker to be ready:\n${stderr}`);

    const boss = new PgBoss({ connectionString: db, schedule: false, supervise: false });
    boss.on('error', () => undefined);
    await boss.start();
    onCleanup(() => boss.stop({ graceful: false, wait: true }));
    const payloads: readonly unknown[] = [null, 'run me', 42, [1, 2], {}, { runId: 7 }, { runId: '' }, { runId: 'X', session: ['root'] }];
    const ids: string[] = [];
    for (const payload of payloads) {
      // pg passes a string as text and an array as a Postgres array: those go as their JSON text.
      const sent = payload === null || (typeof payload === 'object' && !Array.isArray(payload)) ? payload : JSON.stringify(payload);
      const id = await boss.send(QUEUE, sent as object);
      expect(id).not.toBeNull();
      ids.push(id ?? '');
    }
    const states = async (): Promise<{ id: string; state: string; retry_count: number }[]> =>
      query(db, 'SELECT id::text, state::text, retry_count FROM pgboss.job WHERE id = ANY($1::uuid[]) ORDER BY id', [ids]);
    // Each was taken and dealt with: none is waiting or being worked on any more.
    await until(async () => (await states()).every((job) => job.state !== 'created' && job.state !== 'active'), `the jobs to be taken:\n${stderr}`);
    expect(await states()).toEqual(ids.map((id) => ({ id, state: 'failed', retry_count: 0 })).sort((a, b) => a.id.localeCompare(b.id)));
    for (const id of ids) {
      const lines = stderr.split('\n').filter((line) => line.includes(id));
      expect(lines, stderr).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^exarch worker: job ${id}: its payload .+ is not a run \\(.+\\); failed, not retried$`));
    }
    expect(stderr).not.toMatch(/TypeError|Cannot read|undefined|null \(reading/);

    // The worker goes on: a real run is taken and run.
    const submitted = await exarch(['run', '--db', db, '--detach', 'Are you there?'], { cwd, env: { ANTHROPIC_API_KEY: 'test-key' } });
    const run = submitted.stdout.trim();
    await until(async () => (await statusOf(db, run)) === 'done', `the run to be done:\n${stderr}`);
    expect(await rootAnswer(db, run)).toBe('still here');
    expect(child.exitCode).toBeNull();
  });
});
