import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { startAnthropicServer, historyHandler } from '../../support/anthropicServer.js';
import { call, exarch, MAIN, onCleanup, stream, workdir } from '../../support/cliHarness.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { fillDisk, requireMounts, smallDisk } from '../../support/smallDisk.js';
import { statusOf } from '../../support/storedRuns.js';

/**
 * Issue 37, hole 3, on a worker: a run's session logs that the worker cannot write (its
 * `--log-dir` on a full disk) gave Node's `(node:PID) Warning:` text, and a worker line for a
 * session that lost its spawn said `exarch: ` twice. Now the worker says it in one line of its
 * own, once per file, and the run goes on: its journal is in the database, not in those logs.
 */

const postgres = postgresForFile('test/e2e/hostile/workerLogFault.test.ts');
const MOUNTS = requireMounts('test/e2e/hostile/workerLogFault.test.ts');

async function until(check: () => boolean | Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.runIf(postgres.available && MOUNTS)('a worker whose log directory is full', () => {
  it('says so in one line of its own, once per log, and finishes the run', async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const logs = smallDisk('1m');
    fillDisk(logs, 0);
    const model = await startAnthropicServer(
      historyHandler({
        root: [stream({ toolCalls: [call('agent', { name: 'helper', task: 'look' }), call('wait_for_agents', {})] }), stream({ text: 'all done' })],
        helper: [stream({ toolCalls: [call('reply', { result: 'seen' })] })],
      }),
    );
    onCleanup(() => model.close());
    const worker = spawn(process.execPath, [MAIN, 'worker', '--db', db], {
      cwd,
      env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    worker.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise<void>((resolve) => worker.on('close', () => resolve()));
    onCleanup(async () => {
      if (worker.exitCode === null && worker.signalCode === null) worker.kill('SIGKILL');
      await closed;
    });
    await until(() => stderr.includes('exarch worker: ready'), 'the worker to be ready');
    const run = await exarch(['run', '--db', db, '--log-dir', logs, 'Look'], { server: model, cwd });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('all done\n');
    const id = /exarch: run (\S+) (?:started|queued)/.exec(run.stderr)?.[1] ?? '';
    expect(await statusOf(db, id)).toBe('done');
    // One line per log the worker could not write (the root's, the helper's), each its own.
    const faults = stderr.split('\n').filter((line) => line.includes('cannot write'));
    expect(faults).toHaveLength(2);
    for (const line of faults) {
      expect(line).toMatch(
        new RegExp(`^exarch worker: run ${id}: cannot write the session log .*: no space left on the device \\(ENOSPC\\)[^]*; the run goes on without it$`),
      );
    }
    expect(stderr).not.toMatch(/Warning:| {4}at |exarch: exarch:/);
    expect(readdirSync(logs)).toContain('filler');
  });
});
