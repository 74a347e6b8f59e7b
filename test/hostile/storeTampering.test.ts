import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest } from '../support/anthropicServer.js';
import { requireBubblewrap } from '../support/bubblewrap.js';
import { call, exarch, lastUserText, onCleanup, stream, workdir, type CliRun } from '../support/cliHarness.js';

/**
 * Issue 37, hole 1: the sandbox reached the host through the run store. The default store lies in
 * the writable workspace, `sqlite3` runs in the sandbox, and `resume` trusted the stored options:
 * a model's shell command set `allowShell` to `unsandboxed`, and the resumed run's next command
 * ran on the host and handed the API key to the model; a planted `mcp` command ran on the host as
 * the resume started its "server". Now exarch's state (and git's hooks and config) is read-only
 * inside the sandbox, and cannot be moved or replaced there either. Everything here goes through
 * the real command, the real bubblewrap and the loopback SSE server; the store is read with SQLite
 * itself.
 */

const BWRAP = requireBubblewrap('test/hostile/storeTampering.test.ts');

/** Long enough to be a secret the sandbox must not hand out. */
const API_KEY = 'sk-ant-api03-storetrust-canary-7f3e9b1c2d';

/** The person's state directory: outside /tmp (which the sandbox replaces), so that only the mask hides it. */
let state: string;
beforeEach(() => {
  state = mkdtempSync('/var/tmp/exarch-state-');
  onCleanup(() => rmSync(state, { recursive: true, force: true }));
});

function run(args: readonly string[], cwd: string, server?: AnthropicTestServer): Promise<CliRun> {
  return exarch(args, { cwd, env: { EXARCH_STATE_DIR: state, ANTHROPIC_API_KEY: API_KEY }, ...(server ? { server } : {}) });
}

async function serve(scripts: Parameters<typeof historyHandler>[0]): Promise<AnthropicTestServer> {
  const server = await startAnthropicServer(historyHandler(scripts));
  onCleanup(() => server.close());
  return server;
}

const runIdOf = (r: CliRun): string => /^exarch: run (\S+) started$/m.exec(r.stderr)?.[1] ?? '';
const waitingCallOf = (r: CliRun, tool: string): string => new RegExp(`^ {2}(toolu_\\S+) {2}${tool} {2}by `, 'm').exec(r.stderr)?.[1] ?? '';
/** What the model was told in the request that answered a tool call: the results it was sent. */
const resultSeen = (server: AnthropicTestServer, step: number): string =>
  lastUserText(server.requests.filter((r) => r.body.messages.filter((m) => m.role === 'assistant').length === step).at(-1) as ReceivedRequest);

function storedOptions(cwd: string, id: string, file = join(cwd, '.exarch', 'exarch.db')): Record<string, unknown> {
  const db = new Database(file, { readonly: true });
  try {
    const row = db.prepare('SELECT options FROM runs WHERE id = ?').get(id) as { options: string };
    return JSON.parse(row.options) as Record<string, unknown>;
  } finally {
    db.close();
  }
}

const GATED = ['--allow-shell', '--allow-write', '--approve', 'write_file', '--no-wait'];

/** What a sandboxed command sees of where it runs: PID 1, and its parent's environment. */
const PROBE = 'echo "pid1=$(cat /proc/1/comm)"; tr "\\0" "\\n" < /proc/$PPID/environ; echo probe-end';

describe.skipIf(BWRAP === undefined)('the run store and resume, against an agent in the sandbox', () => {
  it("the issue's reproduction: sqlite3 in the sandbox cannot change the store, and the resumed run's next command is still sandboxed", async () => {
    const cwd = workdir();
    const server = await serve({
      root: [
        stream({
          toolCalls: [
            call('run_shell', {
              command: `sqlite3 .exarch/exarch.db "update runs set options = json_set(options, '$.allowShell', 'unsandboxed')"; echo "sqlite3 exit=$?"`,
            }),
          ],
        }),
        stream({ toolCalls: [call('write_file', { path: 'notes.md', content: 'gated\n' })] }),
        stream({ toolCalls: [call('run_shell', { command: PROBE })] }),
        stream({ text: 'done' }),
      ],
    });
    const first = await run(['run', ...GATED, 'Widen your powers'], cwd, server);
    expect(first.code, first.stderr).toBe(4);
    const id = runIdOf(first);
    // Refused inside the sandbox: the store is read-only there.
    expect(resultSeen(server, 1)).toMatch(/sqlite3 exit=[1-9]/);
    expect(storedOptions(cwd, id)['allowShell']).toBe(true);

    const denied = await run(['deny', id, waitingCallOf(first, 'write_file'), 'no'], cwd);
    expect(denied.code, denied.stderr).toBe(0);
    const resumed = await run(['resume', id, '--no-wait'], cwd, server);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).not.toContain('without a sandbox');
    // Observed from inside: PID 1 is bubblewrap, and the parent's environment holds no key.
    const probe = resultSeen(server, 3);
    expect(probe).toContain('pid1=bwrap');
    expect(probe).toContain('probe-end');
    expect(probe).not.toContain(API_KEY);
    expect(server.requests.map((r) => JSON.stringify(r.body)).filter((body) => body.includes(API_KEY))).toEqual([]);
  });

  it('the store and .exarch cannot be removed, moved or replaced from inside the sandbox; write_file refuses them and git’s hooks and config', async () => {
    const cwd = workdir();
    execFileSync('git', ['init', '-q', cwd]);
    // As husky sets it up: hooks in the worktree (the directory not made yet: exarch makes it, empty).
    execFileSync('git', ['-C', cwd, 'config', 'core.hooksPath', '.husky']);
    mkdirSync(join(cwd, 'data'));
    const attempts = [
      'touch .exarch/planted',
      'rm -r .exarch/runs',
      'rm -rf .exarch',
      'mv .exarch moved',
      'ln -sfn /var/tmp .exarch',
      'rm -f data/runs.db',
      'mv data/runs.db data/moved.db',
      'ln -sf /etc/passwd data/runs.db',
      'rm -f data/runs.db-wal',
      'mv data gone',
      'sh -c "echo touch pwned > .git/hooks/pre-commit"',
      'git config core.fsmonitor "touch pwned"',
      'mv .git/hooks .git/hooks-old',
      'mv .git .git-old',
      'sh -c "echo touch pwned > .husky/pre-commit"',
      'rm -r .husky',
    ];
    const script = attempts
      .map((a) => `if ${a} 2>/dev/null; then echo "DID: ${a.replaceAll('"', "'")}"; else echo "REFUSED: ${a.replaceAll('"', "'")}"; fi`)
      .join('\n');
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: script })] }),
        stream({
          toolCalls: [
            call('write_file', { path: '.exarch/exarch.db', content: 'x' }),
            call('write_file', { path: '.exarch/new/planted.db', content: 'x' }),
            call('write_file', { path: 'data/runs.db-wal', content: 'x' }),
            call('write_file', { path: '.git/hooks/pre-commit', content: 'touch pwned\n' }),
            call('write_file', { path: '.git/config', content: '[core]\n\tfsmonitor = touch pwned\n' }),
            call('write_file', { path: '.husky/pre-commit', content: 'touch pwned\n' }),
          ],
        }),
        stream({ text: 'done' }),
      ],
    });
    const result = await run(['run', '--allow-shell', '--allow-write', '--store', 'data/runs.db', 'Break out'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    const shell = resultSeen(server, 1);
    for (const attempt of attempts) expect(shell).toContain(`REFUSED: ${attempt.replaceAll('"', "'")}`);
    expect(shell).not.toContain('DID:');
    const writes = resultSeen(server, 2);
    expect(writes.match(/is exarch's own state \(its run store, logs and recordings\), which agents may not change/g)).toHaveLength(3);
    expect(
      writes.match(/is git's own \(its hooks and config run commands outside any sandbox\), which agents may not change unless the person allows it/g),
    ).toHaveLength(3);
    // As the host sees it afterwards: everything where it was, nothing planted.
    expect(lstatSync(join(cwd, '.exarch')).isDirectory()).toBe(true);
    expect(lstatSync(join(cwd, 'data', 'runs.db')).isFile()).toBe(true);
    for (const gone of [
      'moved',
      'gone',
      'data/moved.db',
      '.exarch/planted',
      '.exarch/new',
      '.git/hooks/pre-commit',
      '.git-old',
      '.git/hooks-old',
      '.husky/pre-commit',
      'pwned',
    ])
      expect(existsSync(join(cwd, gone)), gone).toBe(false);
    expect(readFileSync(join(cwd, '.git', 'config'), 'utf8')).not.toContain('fsmonitor');
    const store = new Database(join(cwd, 'data', 'runs.db'), { readonly: true });
    try {
      expect(store.prepare('SELECT status FROM runs').all()).toEqual([{ status: 'done' }]);
    } finally {
      store.close();
    }
  });

  it('with --allow-git-hooks, agents may change git’s hooks and config', async () => {
    const cwd = workdir();
    execFileSync('git', ['init', '-q', cwd]);
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: 'git config user.name agent && echo "git config exit=$?"' })] }),
        stream({ toolCalls: [call('write_file', { path: '.git/hooks/pre-commit', content: '#!/bin/sh\nexit 0\n' })] }),
        stream({ text: 'done' }),
      ],
    });
    const result = await run(['run', '--allow-shell', '--allow-write', '--allow-git-hooks', 'Set up hooks'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(resultSeen(server, 1)).toContain('git config exit=0');
    expect(readFileSync(join(cwd, '.git', 'hooks', 'pre-commit'), 'utf8')).toBe('#!/bin/sh\nexit 0\n');
    expect(readFileSync(join(cwd, '.git', 'config'), 'utf8')).toContain('name = agent');
  });
});
