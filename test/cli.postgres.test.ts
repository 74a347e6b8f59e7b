import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest, type ServerPlan } from './support/anthropicServer.js';
import { call, exarch, lastUserText, MAIN, onCleanup, stream, workdir, type CliRun } from './support/cliHarness.js';
import { postgresForFile } from './support/postgresServer.js';

/**
 * `exarch run/runs/resume/view --db postgres://…` (issue 18): the durable-run commands against a
 * real PostgreSQL server the test starts. The store is checked with the test's own connection.
 */

const postgres = postgresForFile('test/cli.postgres.test.ts');

async function serveByHistory(scripts: Parameters<typeof historyHandler>[0]): Promise<AnthropicTestServer> {
  const model = await startAnthropicServer(historyHandler(scripts));
  onCleanup(() => model.close());
  return model;
}

const echo = (request: ReceivedRequest): ServerPlan => stream({ text: `Heard:\n${lastUserText(request)}` });

function delegatingScripts(slowMs: number): Parameters<typeof historyHandler>[0] {
  return {
    root: [stream({ toolCalls: [call('agent', { name: 'worker', task: 'List the files.' })] }), stream({ text: 'Waiting for worker.' }), echo],
    worker: [stream({ toolCalls: [call('list_dir', { path: '.' })] }, { chunkDelayMs: slowMs }), stream({ toolCalls: [call('reply', { result: 'two files' })] })],
  };
}

function runIdOf(run: CliRun): string {
  const id = /^exarch: run (\S+) started/m.exec(run.stderr)?.[1];
  if (!id) throw new Error(`no run id in:\n${run.stderr}`);
  return id;
}

async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}

async function until(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** `exarch worker` in the background; its stderr kept for the test. */
function startWorker(db: string, model: AnthropicTestServer, cwd: string, extra: readonly string[] = []) {
  const child = spawn(process.execPath, [MAIN, 'worker', '--db', db, '--job-expiry', '4', ...extra], {
    cwd,
    env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await closed;
  });
  return { child, closed, stderr: () => stderr };
}

/**
 * A worker, once it says it is ready: it has set the queue's policy (a 4 s job expiry), which a
 * job takes when it is queued.
 */
async function readyWorker(db: string, model: AnthropicTestServer, cwd: string, extra: readonly string[] = []) {
  const worker = startWorker(db, model, cwd, extra);
  await until(() => worker.stderr().includes('exarch worker: ready'), `the worker to be ready:\n${worker.stderr()}`, 30_000);
  return worker;
}

/** The root's last assistant text, read from the journal with SQL. */
async function rootAnswer(db: string, id: string): Promise<string> {
  const rows = await query<{ body: string }>(db, `SELECT body FROM exarch.journal WHERE run_id = '${id}' AND session = 'root' AND type = 'message' ORDER BY seq DESC`);
  for (const { body } of rows) {
    const message = JSON.parse(body) as { role: string; content: { type: string; text?: string }[] };
    if (message.role === 'assistant') return message.content.filter((b) => b.type === 'text').map((b) => b.text).join('');
  }
  return '';
}

async function statusOf(db: string, id: string): Promise<string | undefined> {
  return (await query<{ status: string }>(db, `SELECT status FROM exarch.runs WHERE id = '${id}'`))[0]?.status;
}

async function eventually(check: () => Promise<boolean>, what: string, ms = 60_000, log: () => string = () => ''): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.skipIf(!postgres.available)('durable runs in PostgreSQL from the command line', () => {
  it('run --db queues the run, a worker runs it, run follows it to the answer; runs, view and resume read it back', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serveByHistory(delegatingScripts(0));
    const worker = await readyWorker(db, model, cwd, ['--concurrency', '2']);
    const run = await exarch(['run', '--db', db, 'Survey the\nworkspace'], { server: model, cwd });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe("Heard:\n[agent 'worker' replied]\ntwo files\n");
    const id = runIdOf(run);
    expect(run.stderr).toContain('root/worker started');
    expect(existsSync(join(cwd, '.exarch', 'exarch.db'))).toBe(false);
    expect(await query(db, 'SELECT id, status, cwd FROM exarch.runs')).toEqual([{ id, status: 'done', cwd }]);
    const dump = await query<{ text: string }>(db, "SELECT (SELECT string_agg(r::text, '|') FROM exarch.runs AS r) || (SELECT string_agg(j::text, '|') FROM exarch.journal AS j) AS text");
    expect(dump[0]?.text).toContain('two files');
    expect(dump[0]?.text).not.toContain('test-key');
    expect(worker.stderr()).toContain(`exarch worker: run ${id} done`);

    const listed = await exarch(['runs', '--db', db], { cwd });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout.trim().split('\n')[1]).toMatch(new RegExp(`^${id}\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d\\s+done\\s+2\\s+5\\s+\\$\\d+\\.\\d+\\s+Survey the$`));

    const viewed = await exarch(['view', id, '--db', db], { cwd });
    expect(viewed.code, viewed.stderr).toBe(0);
    expect(viewed.stderr).toMatch(/wrote the turn-flow viewer for 2 agents/);
    expect(readFileSync(join(cwd, viewed.stdout.trim()), 'utf8')).toContain('root/worker');

    const requests = model.requests.length;
    const again = await exarch(['resume', id, '--db', db], { server: model, cwd });
    expect(again.stderr.trim().split('\n')).toEqual([`exarch: run ${id} is already finished (done); nothing to resume`]);
    expect(model.requests.length).toBe(requests);

    worker.child.kill('SIGTERM');
    expect(await worker.closed).toEqual({ code: 0, signal: null });
    expect(worker.stderr()).toMatch(/exarch worker: stopped\n$/);
  });

  it('--detach prints the id; a worker SIGKILLed mid-run loses nothing: another takes the run up and finishes it', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    const model = await serveByHistory(delegatingScripts(300));
    const first = await readyWorker(db, model, cwd);
    const detached = await exarch(['run', '--db', db, '--detach', 'Survey'], { cwd });
    expect(detached.code, detached.stderr).toBe(0);
    const id = detached.stdout.trim();
    expect(id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    await until(() => model.requests.some((r) => r.agent === 'worker'), 'the sub-agent to start on the first worker', 30_000);
    first.child.kill('SIGKILL');
    expect((await first.closed).signal).toBe('SIGKILL');
    expect(await statusOf(db, id)).toBe('running');
    expect((await exarch(['runs', '--db', db], { cwd })).stdout).toMatch(new RegExp(`${id}\\s+\\S+ \\S+\\s+interrupted`));

    const second = startWorker(db, model, cwd);
    await eventually(async () => (await statusOf(db, id)) === 'done', 'the second worker to finish the run', 60_000, second.stderr);
    expect(second.stderr()).toContain(`exarch worker: run ${id} resumed`);
    expect(await rootAnswer(db, id)).toBe("Heard:\n[agent 'worker' replied]\ntwo files");
    expect(model.pairingViolations).toEqual([]);
  });

  it('SIGTERM drains: a run that does not finish in time is handed back, and another worker finishes it', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    const model = await serveByHistory(delegatingScripts(3000));
    const first = await readyWorker(db, model, cwd, ['--drain-timeout', '1']);
    const id = (await exarch(['run', '--db', db, '--detach', 'Survey'], { cwd })).stdout.trim();
    await until(() => model.requests.some((r) => r.agent === 'worker'), 'the sub-agent to start on the first worker', 30_000);
    first.child.kill('SIGTERM');
    expect(await first.closed).toEqual({ code: 0, signal: null });
    expect(first.stderr()).toContain(`exarch worker: run ${id} handed back to the queue`);
    expect(await statusOf(db, id)).toBe('interrupted');

    const second = startWorker(db, model, cwd);
    await eventually(async () => (await statusOf(db, id)) === 'done', 'the second worker to finish the run', 60_000, second.stderr);
    expect(second.stderr()).toContain(`exarch worker: run ${id} resumed`);
    expect(await rootAnswer(db, id)).toBe("Heard:\n[agent 'worker' replied]\ntwo files");
    expect(model.pairingViolations).toEqual([]);
  });

  it('bad --db usage and an unreachable server each get one line', async () => {
    const cwd = workdir();
    const both = await exarch(['runs', '--db', postgres.server().url, '--store', 'x.db'], { cwd });
    expect(both.code).toBe(2);
    expect(both.stderr.split('\n')[0]).toBe('exarch: --store and --db cannot be used together');
    const notUrl = await exarch(['runs', '--db', 'mydb'], { cwd });
    expect(notUrl.code).toBe(2);
    expect(notUrl.stderr.split('\n')[0]).toBe("exarch: --db takes a PostgreSQL URL (postgres://user@host:port/database), got 'mydb'");
    const down = await exarch(['runs', '--db', 'postgres://exarch:pw-secret@127.0.0.1:1/none'], { cwd });
    expect(down.code).toBe(1);
    const lines = down.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^exarch: the run store postgres:\/\/exarch:\*\*\*@127\.0\.0\.1:1\/none cannot be opened \(.+\)$/);
  });
});
