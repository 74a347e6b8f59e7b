import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest } from '../../support/anthropicServer.js';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { call, exarch, lastUserText, MAIN, onCleanup, stream, workdir } from '../../support/cliHarness.js';
import { postgresForFile } from '../../support/postgresServer.js';

/**
 * Issue 37 (seams: the sandbox × the Postgres store): a sandboxed command kept `EXARCH_DB_URL`
 * (without a password it is no secret by its look), every `PG*` variable but the password, and
 * could read `~/.pgpass`: with `--allow-network` it could log in and rewrite an unsigned run record
 * that a worker then obeys. Now the sandbox has none of libpq's variables and the files libpq
 * reads credentials from read as empty; and a worker that takes a run without a sandbox says so.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/sandboxPostgres.test.ts');
const postgres = postgresForFile('test/e2e/hostile/sandboxPostgres.test.ts');

/** Stands for a password: it must not reach the model. */
const CANARY = 'pgpass-canary-91f2c7e0';

async function serve(root: Parameters<typeof historyHandler>[0]['root']): Promise<AnthropicTestServer> {
  const server = await startAnthropicServer(historyHandler({ root }));
  onCleanup(() => server.close());
  return server;
}

const resultSeen = (server: AnthropicTestServer, step: number): string =>
  lastUserText(server.requests.filter((r) => r.body.messages.filter((m) => m.role === 'assistant').length === step).at(-1) as ReceivedRequest);

describe.skipIf(BWRAP === undefined)("the run store's credentials, from inside the sandbox", () => {
  it('no PG* variable and no EXARCH_DB_URL; ~/.pgpass, ~/.pg_service.conf, $PGPASSFILE and $PGSERVICEFILE read as empty', async () => {
    const cwd = workdir();
    // The person's home, outside /tmp (the sandbox's /tmp is its own): theirs, as the project is.
    const home = mkdtempSync('/var/tmp/exarch-home-');
    onCleanup(() => rmSync(home, { recursive: true, force: true }));
    chmodSync(home, 0o755);
    mkdirSync(join(home, 'etc'));
    const files = ['.pgpass', '.pg_service.conf', 'etc/pgpass', 'etc/services'];
    for (const file of files) writeFileSync(join(home, file), `db.example:5432:*:app:${CANARY}\n`, { mode: 0o600 });
    if (canSwitchUser) await giveToNobody(cwd, home, join(home, 'etc'), ...files.map((file) => join(home, file)));
    const reads = files.map((file) => `echo "[${file}]"; cat '${join(home, file)}'`).join('; ');
    const server = await serve([
      stream({ toolCalls: [call('run_shell', { command: `env | grep -E '^(PG|EXARCH_DB_URL)' | cut -d= -f1; echo env-end; ${reads}; echo reads-end` })] }),
      stream({ text: 'done' }),
    ]);
    const result = await exarch(['run', '--allow-shell', '--no-store', 'Look'], {
      cwd,
      server,
      env: {
        HOME: home,
        EXARCH_STATE_DIR: join(home, 'state'),
        EXARCH_DB_URL: 'postgres://app@db.example/exarch',
        PGHOST: 'db.example',
        PGUSER: 'app',
        PGDATABASE: 'exarch',
        PGPASSWORD: CANARY,
        PGPASSFILE: join(home, 'etc', 'pgpass'),
        PGSERVICEFILE: join(home, 'etc', 'services'),
        PGSERVICE: 'exarch',
      },
    });
    expect(result.code, result.stderr).toBe(0);
    const seen = resultSeen(server, 1);
    // The tool result is quoted as JSON: \\n is its newline.
    expect(seen).toContain('--- stdout ---\\nenv-end\\n[.pgpass]\\n[.pg_service.conf]\\n[etc/pgpass]\\n[etc/services]\\nreads-end');
    expect(seen).not.toContain(CANARY);
    expect(JSON.stringify(server.requests)).not.toContain(CANARY);
  });
});

describe.runIf(postgres.available)('a worker that takes a run whose shell has no sandbox', () => {
  it('says so on stderr, as exarch run does', async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serve([stream({ text: 'done' })]);
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
    // Queued first, so the worker takes it whenever it is ready; followed until it is done.
    const run = await exarch(['run', '--db', db, '--allow-shell=unsandboxed', 'Go'], { server: model, cwd });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('done\n');
    const id = /exarch: run (\S+) (?:started|queued)/.exec(run.stderr)?.[1] ?? '';
    worker.kill('SIGTERM');
    await closed;
    expect(stderr).toContain(
      `exarch worker: run ${id}: --allow-shell=unsandboxed: shell commands run without a sandbox, with your full access to files, processes and network\n`,
    );
    expect(stderr.split('\n').filter((line) => line.includes('without a sandbox'))).toHaveLength(1);
  });
});
