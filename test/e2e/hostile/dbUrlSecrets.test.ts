import { spawn } from 'node:child_process';
import { chmodSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer } from '../../support/anthropicServer.js';
import { call, exarch, lastUserText, MAIN, onCleanup, stream, workdir, type CliRun } from '../../support/cliHarness.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { query, statusOf } from '../../support/storedRuns.js';
import { until } from '../../support/until.js';
import { filesUnder } from '../../support/filesUnder.js';

/**
 * Issue 37, hole 5: `exarch runs --db 'postgres://u@host/db?password=…'` printed the URL whole
 * (only a user-part password was masked), the approve/deny/resume commands a run prints repeated
 * it, and a worker's `/proc/PID/cmdline` held it, there being no other way to give the URL.
 *
 * The server here makes the test's role give its password (SCRAM): the URL's password is a real
 * one. Oracles: the bytes of every command's output, the pages and files written, and a dump of
 * the database, searched for fragments of the secrets.
 */

const postgres = postgresForFile('test/e2e/hostile/dbUrlSecrets.test.ts', { passwords: true });

const PASSWORD = 'RolePw-4711-secret';
const FRAGMENT = 'frag-Secret-0815';
/** Fragments of the secrets no masking or escaping changes. */
const SECRET_BITS = ['RolePw-4711', '4711-secret', 'Secret-0815'];

/** A role's database URL with the password in the user part, in the query (as libpq takes it) and a fragment. */
function withSecrets(url: string): { full: string; masked: string } {
  const [, user = '', rest = ''] = /^postgres:\/\/([^@]+)@(.*)$/.exec(url) ?? [];
  return {
    full: `postgres://${user}:${PASSWORD}@${rest}?password=${PASSWORD}&application_name=exarch-test#${FRAGMENT}`,
    masked: `postgres://${user}:***@${rest}?password=***&application_name=exarch-test#***`,
  };
}

/** Where a fragment of a secret shows: in a command's output, a file under `dir`, or the database. */
async function leaks(texts: ReadonlyMap<string, string>, dir: string, db: string): Promise<string[]> {
  const dump = await query<{ text: string | null }>(
    db,
    `SELECT concat_ws('|', (SELECT string_agg(r::text, '|') FROM exarch.runs AS r), (SELECT string_agg(j::text, '|') FROM exarch.journal AS j),
       (SELECT string_agg(c::text, '|') FROM exarch.commands AS c), (SELECT string_agg(q::text, '|') FROM pgboss.job AS q)) AS text`,
  );
  const all = new Map([...texts, ...filesUnder(dir), ['the database', dump[0]?.text ?? '']]);
  const found: string[] = [];
  for (const [where, text] of all) for (const bit of SECRET_BITS) if (text.includes(bit)) found.push(`${bit} in ${where}`);
  return found;
}

function outputs(runs: Readonly<Record<string, CliRun>>): Map<string, string> {
  return new Map(
    Object.entries(runs).flatMap(([name, run]): [string, string][] => [
      [`${name} stdout`, run.stdout],
      [`${name} stderr`, run.stderr],
    ]),
  );
}

interface WorkerProcess {
  readonly pid: number;
  stderr(): string;
  stop(): Promise<void>;
}

function startWorker(args: readonly string[], env: Record<string, string>, model: AnthropicTestServer, cwd: string): WorkerProcess {
  const child = spawn(process.execPath, [MAIN, 'worker', ...args], {
    cwd,
    env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  onCleanup(async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await closed;
  });
  return {
    pid: child.pid ?? 0,
    stderr: () => stderr,
    async stop() {
      child.kill('SIGTERM');
      await closed;
    },
  };
}

/** A root that writes two files, each call waiting for approval, then says what it was told. */
async function writingModel(): Promise<AnthropicTestServer> {
  const model = await startAnthropicServer(
    historyHandler({
      root: [
        stream({ toolCalls: [call('write_file', { path: 'a.txt', content: 'a' })] }),
        stream({ toolCalls: [call('write_file', { path: 'b.txt', content: 'b' })] }),
        (request) => stream({ text: `Told: ${lastUserText(request)}` }),
      ],
    }),
  );
  onCleanup(() => model.close());
  return model;
}

/** The id of the call a stopped run lists first. */
function waitingCall(run: CliRun): string {
  const id = /^ {2}(toolu_\S+) {2}write_file/m.exec(run.stderr)?.[1];
  if (!id) throw new Error(`no waiting call in:\n${run.stderr}`);
  return id;
}

describe.skipIf(!postgres.available)('a Postgres URL with secrets in it', () => {
  it('--db with a password in the user part, the query and a fragment: no command prints it, nothing stores it; the commands it prints show it masked', {
    timeout: 180_000,
  }, async () => {
    const { full, masked } = withSecrets(await postgres.server().createRole('app', PASSWORD));
    const cwd = workdir();
    const model = await writingModel();
    const env = { ANTHROPIC_API_KEY: 'test-key' };
    const worker = startWorker(['--db', full], {}, model, cwd);
    await until(() => worker.stderr().includes('exarch worker: ready'), `the worker to be ready:\n${worker.stderr()}`);

    const run = await exarch(['run', '--db', full, '--allow-write', '--approve', 'write_file', '--no-wait', 'Write a and b.'], { cwd, env });
    expect(run.code, run.stderr).toBe(4);
    const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';
    const first = waitingCall(run);
    expect(run.stderr).toContain(`exarch approve ${id} ${first} --db ${masked}`);
    const approved = await exarch(['approve', id, first, '--db', full], { cwd, env });
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr).toContain(`exarch resume ${id} --db ${masked}`);
    await until(async () => (await statusOf(full, id)) === 'waiting' && readdirSync(cwd).includes('a.txt'), `the second call to wait:\n${worker.stderr()}`);
    const listed = await exarch(['runs', '--db', full], { cwd, env });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^${id} .* waiting `, 'm'));
    const followed = await exarch(['resume', id, '--db', full, '--no-wait'], { server: model, cwd });
    expect(followed.code, followed.stderr).toBe(4);
    const second = waitingCall(followed);
    expect(followed.stderr).toContain(`exarch deny ${id} ${second} "reason" --db ${masked}`);
    const denied = await exarch(['deny', id, second, 'not b', '--db', full], { cwd, env });
    expect(denied.code, denied.stderr).toBe(0);
    await until(async () => (await statusOf(full, id)) === 'done', `the worker to finish the run:\n${worker.stderr()}`);
    const viewed = await exarch(['view', id, '--db', full, '--out', join(cwd, 'run.html')], { cwd, env });
    expect(viewed.code, viewed.stderr).toBe(0);
    // A server that cannot be reached, and a URL that is no Postgres URL: one line each, masked.
    const unreachable = await exarch(['runs', '--db', full.replace(/:\d+\//, ':1/')], { cwd, env });
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(
      /^exarch: the run store postgres:\/\/app:\*\*\*@127\.0\.0\.1:1\/\S+\?password=\*\*\*&application_name=exarch-test#\*\*\* cannot be opened \(.+\)\n$/,
    );
    const notPostgres = await exarch(['runs', '--db', `mysql://app:${PASSWORD}@127.0.0.1/x?password=${PASSWORD}`], { cwd, env });
    expect(notPostgres.code).toBe(2);
    expect(notPostgres.stderr.split('\n')[0]).toBe(
      "exarch: --db takes a PostgreSQL URL (postgres://user@host:port/database), got 'mysql://***@127.0.0.1/x?password=***'",
    );
    await worker.stop();

    const texts = outputs({ run, approved, listed, followed, denied, viewed, unreachable, notPostgres });
    texts.set('worker stderr', worker.stderr());
    expect(await leaks(texts, cwd, full)).toEqual([]);
  });

  it("EXARCH_DB_URL is every command's --db, an explicit flag wins, and a worker given it has no URL on its command line", { timeout: 180_000 }, async () => {
    const url = withSecrets(await postgres.server().createRole('app2', PASSWORD)).full;
    const cwd = workdir();
    const model = await writingModel();
    const env = { ANTHROPIC_API_KEY: 'test-key', EXARCH_DB_URL: url };

    // A worker given the URL as a flag shows it to anyone who lists processes; one given the variable does not.
    const flagged = startWorker(['--db', url], {}, model, cwd);
    await until(() => flagged.stderr().includes('exarch worker: ready'), `the flagged worker to be ready:\n${flagged.stderr()}`);
    expect(readFileSync(`/proc/${flagged.pid}/cmdline`, 'latin1')).toContain(PASSWORD);
    await flagged.stop();
    const worker = startWorker([], { EXARCH_DB_URL: url }, model, cwd);
    await until(() => worker.stderr().includes('exarch worker: ready'), `the worker to be ready:\n${worker.stderr()}`);
    const cmdline = readFileSync(`/proc/${worker.pid}/cmdline`, 'latin1');
    expect(cmdline.split('\0')).toEqual([process.execPath, MAIN, 'worker', '']);

    const run = await exarch(['run', '--allow-write', '--approve', 'write_file', '--no-wait', 'Write a and b.'], { cwd, env });
    expect(run.code, run.stderr).toBe(4);
    const id = /exarch: run (\S+) started \(queued for the workers\)/.exec(run.stderr)?.[1] ?? '';
    const first = waitingCall(run);
    // The commands to run next need no --db: the variable gives it to them too.
    expect(run.stderr).toContain(`    exarch approve ${id} ${first}    or: exarch deny ${id} ${first} "reason"\n`);
    const approved = await exarch(['approve', id, first], { cwd, env });
    expect(approved.code, approved.stderr).toBe(0);
    await until(async () => (await statusOf(url, id)) === 'waiting' && readdirSync(cwd).includes('a.txt'), `the second call to wait:\n${worker.stderr()}`);
    const listed = await exarch(['runs'], { cwd, env });
    expect(listed.stdout).toMatch(new RegExp(`^${id} .* waiting `, 'm'));
    const second = waitingCall(await exarch(['resume', id, '--no-wait'], { server: model, cwd, env: { EXARCH_DB_URL: url } }));
    const denied = await exarch(['deny', id, second, 'not b'], { cwd, env });
    expect(denied.code, denied.stderr).toBe(0);
    await until(async () => (await statusOf(url, id)) === 'done', `the worker to finish the run:\n${worker.stderr()}`);
    const viewed = await exarch(['view', id, '--out', join(cwd, 'run.html')], { cwd, env });
    expect(viewed.code, viewed.stderr).toBe(0);

    // An explicit flag wins over the variable: --store, --db, --no-store.
    const file = join(cwd, 'other.db');
    expect((await exarch(['runs', '--store', file], { cwd, env })).stderr).toBe(`exarch: no runs recorded in ${file}\n`);
    const other = await postgres.server().createRole('app3', PASSWORD);
    expect((await exarch(['runs', '--db', other], { cwd, env: { ...env, PGPASSWORD: PASSWORD } })).stderr).toBe(`exarch: no runs recorded in ${other}\n`);
    const local = await exarch(['run', '--no-store', 'Say hi.'], { server: await quickModel(), cwd, env: { EXARCH_DB_URL: url } });
    expect(local.code, local.stderr).toBe(0);
    expect(await query(url, 'SELECT count(*)::int AS n FROM exarch.runs')).toEqual([{ n: 1 }]);
    // A variable that is no Postgres URL is named, masked.
    const wrong = await exarch(['runs'], { cwd, env: { EXARCH_DB_URL: `mysql://u:${PASSWORD}@h/db` } });
    expect(wrong.code).toBe(2);
    expect(wrong.stderr.split('\n')[0]).toBe("exarch: EXARCH_DB_URL takes a PostgreSQL URL (postgres://user@host:port/database), got 'mysql://***@h/db'");
    await worker.stop();
    expect(await leaks(outputs({ run, approved, listed, denied, viewed, local, wrong }), cwd, url)).toEqual([]);
    expect(worker.stderr()).not.toContain(PASSWORD);
  });

  it('PGPASSWORD, PGPASSFILE and the other libpq variables are taken as pg takes them; a password not given is one line', { timeout: 120_000 }, async () => {
    const url = await postgres.server().createRole('app4', PASSWORD);
    const cwd = workdir();
    const none = await exarch(['runs', '--db', url], { cwd });
    expect(none.code).toBe(1);
    expect(none.stderr).toBe(
      `exarch: the run store ${url} cannot be opened (the server asks for a password: give it in PGPASSWORD, a PGPASSFILE, or the URL)\n`,
    );
    const wrong = await exarch(['runs', '--db', url], { cwd, env: { PGPASSWORD: 'not-the-password' } });
    expect(wrong.stderr).toBe(`exarch: the run store ${url} cannot be opened (password authentication failed for user "app4")\n`);

    // The worker and the submitter with PGPASSWORD: the run is run.
    const model = await quickModel();
    const worker = startWorker(['--db', url], { PGPASSWORD: PASSWORD }, model, cwd);
    await until(() => worker.stderr().includes('exarch worker: ready'), `the worker to be ready:\n${worker.stderr()}`);
    const run = await exarch(['run', '--db', url, 'Say hi.'], { cwd, env: { ANTHROPIC_API_KEY: 'test-key', PGPASSWORD: PASSWORD } });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('hi\n');
    await worker.stop();

    // A password file, as libpq reads it (only when no one else can read it), and no notice about it.
    const passfile = join(cwd, 'pgpass');
    writeFileSync(passfile, `127.0.0.1:*:*:app4:${PASSWORD}\n`);
    chmodSync(passfile, 0o600);
    const fromFile = await exarch(['runs', '--db', url], { cwd, env: { PGPASSFILE: passfile } });
    expect(fromFile.code, fromFile.stderr).toBe(0);
    expect(fromFile.stderr).toBe('');
    expect(fromFile.stdout).toMatch(/ done .*Say hi\.$/m);
    // Host, port, user and database from the environment too: `postgres://` names only the kind of store.
    const parsed = new URL(url);
    const bare = await exarch(['runs', '--db', 'postgres://'], {
      cwd,
      env: { PGHOST: parsed.hostname, PGPORT: parsed.port, PGUSER: 'app4', PGDATABASE: parsed.pathname.slice(1), PGPASSWORD: PASSWORD },
    });
    expect(bare.code, bare.stderr).toBe(0);
    expect(bare.stdout).toMatch(/ done .*Say hi\.$/m);
  });
});

describe('the secrets these variables carry are not handed to the commands agents run', () => {
  it('EXARCH_DB_URL, PGPASSWORD, OTLP headers, a URL with a token: none in the environment of run_shell', { timeout: 60_000 }, async () => {
    const model = await startAnthropicServer(
      historyHandler({ root: [stream({ toolCalls: [call('run_shell', { command: 'env' })] }), (request) => stream({ text: lastUserText(request) })] }),
    );
    onCleanup(() => model.close());
    const run = await exarch(['run', '--no-store', '--allow-shell=unsandboxed', 'What is in your environment?'], {
      server: model,
      env: {
        EXARCH_DB_URL: `postgres://app:${PASSWORD}@127.0.0.1/db`,
        PGPASSWORD: PASSWORD,
        OTEL_EXPORTER_OTLP_HEADERS: `Authorization=Bearer%20${PASSWORD}`,
        SOME_SERVICE: `https://hooks.example.com/in?token=${PASSWORD}`,
        PLAIN_SETTING: 'kept-for-the-command',
      },
    });
    expect(run.code, run.stderr).toBe(0);
    const told = JSON.stringify(model.requests[1]?.body.messages ?? []);
    expect(told).toContain('PLAIN_SETTING=kept-for-the-command');
    for (const name of ['EXARCH_DB_URL', 'PGPASSWORD', 'OTEL_EXPORTER_OTLP_HEADERS', 'SOME_SERVICE']) expect(told).not.toContain(`${name}=`);
    expect(told).not.toContain('RolePw');
  });
});

async function quickModel(): Promise<AnthropicTestServer> {
  const model = await startAnthropicServer(historyHandler({ root: [stream({ text: 'hi' })] }));
  onCleanup(() => model.close());
  return model;
}
