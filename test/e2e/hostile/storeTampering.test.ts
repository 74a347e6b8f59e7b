import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, lstatSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest, type ServerPlan } from '../../support/anthropicServer.js';
import { canSwitchUser, giveToNobody, NOBODY } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { call, exarch, lastUserText, onCleanup, stream, workdir, type CliRun } from '../../support/cliHarness.js';

/**
 * Issue 37, hole 1: the sandbox reached the host through the run store. The default store lies in
 * the writable workspace, `sqlite3` runs in the sandbox, and `resume` trusted the stored options:
 * a model's shell command set `allowShell` to `unsandboxed`, and the resumed run's next command
 * ran on the host and handed the API key to the model; a planted `mcp` command ran on the host as
 * the resume started its "server". Now the store is read-only inside the sandbox, the record is
 * signed with the person's key (kept outside the workspace, hidden from the sandbox), and a resume
 * refuses a record that does not verify. Everything here goes through the real command, the real
 * bubblewrap and the loopback SSE server; the store is read and changed with SQLite itself.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/storeTampering.test.ts');

/** Long enough to be a secret the sandbox must not hand out. */
const API_KEY = 'sk-ant-api03-storetrust-canary-7f3e9b1c2d';

/** The person's state directory: outside /tmp (which the sandbox replaces), so that only the mask hides it. */
let state: string;
beforeEach(() => {
  state = mkdtempSync('/var/tmp/exarch-state-');
  onCleanup(() => rmSync(state, { recursive: true, force: true }));
});

/**
 * A working directory as a person's would be: run as root (CI), exarch runs sandboxed commands as
 * the directory's owner, so it is `nobody`'s here (what a test makes in it later, such as a
 * repository, is given to it too: `giveTreeToAgents`).
 */
async function agentsWorkdir(): Promise<string> {
  const cwd = workdir();
  if (canSwitchUser) await giveToNobody(cwd);
  return cwd;
}

/** Everything under `dir` made `nobody`'s, as a repository the person made in their own directory is theirs. */
function giveTreeToAgents(dir: string): void {
  if (canSwitchUser) execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, dir]);
}

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

function storedRow(cwd: string, id: string): { status: string; options: string } {
  const db = new Database(join(cwd, '.exarch', 'exarch.db'), { readonly: true });
  try {
    return db.prepare('SELECT status, options FROM runs WHERE id = ?').get(id) as { status: string; options: string };
  } finally {
    db.close();
  }
}

/** Changes the stored options as any other process of the user's could: SQLite's own json functions. */
function tamper(cwd: string, id: string, expression: string): void {
  const db = new Database(join(cwd, '.exarch', 'exarch.db'));
  try {
    expect(db.prepare(`UPDATE runs SET options = ${expression} WHERE id = ?`).run(id).changes).toBe(1);
  } finally {
    db.close();
  }
}

/** A root whose first call is the gated write_file (the run stops waiting, exit 4), then `after`. */
function gatedFirst(after: readonly (ServerPlan | ((r: ReceivedRequest) => ServerPlan))[] = []) {
  return { root: [stream({ toolCalls: [call('write_file', { path: 'notes.md', content: 'gated\n' })] }), ...after, stream({ text: 'done' })] };
}

const GATED = ['--allow-shell', '--allow-write', '--approve', 'write_file', '--no-wait'];

/** What a sandboxed command sees of where it runs: PID 1, and its parent's environment. */
const PROBE = 'echo "pid1=$(cat /proc/1/comm)"; tr "\\0" "\\n" < /proc/$PPID/environ; echo probe-end';

describe.skipIf(BWRAP === undefined)('the run store and resume, against an agent in the sandbox', () => {
  it("the issue's reproduction: sqlite3 in the sandbox cannot change the store, and the resumed run's next command is still sandboxed", async () => {
    const cwd = await agentsWorkdir();
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
    // Refused inside the sandbox: the store is read-only there (sqlite3 ran, and said so: a missing
    // sqlite3 would fail too, but not in these words).
    expect(resultSeen(server, 1)).toMatch(/sqlite3 exit=[1-9]/);
    expect(resultSeen(server, 1)).toMatch(/readonly database|read-only file system/i);
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

  it.each([
    ['a shell without a sandbox', "json_set(options, '$.allowShell', 'unsandboxed')"],
    ['an MCP server command', 'MCP'],
    ['no approvals', "json_remove(options, '$.approve')"],
    ['the network and a higher step cap', "json_set(options, '$.allowNetwork', json('true'), '$.maxSteps', 9999)"],
  ])('a record changed from outside (%s) is refused with one line; nothing starts, the run is as it was', async (_what, expression) => {
    const cwd = await agentsWorkdir();
    const marker = join(workdir(), 'mcp-server-ran');
    const server = await serve(gatedFirst());
    const first = await run(['run', ...GATED, 'Take notes'], cwd, server);
    expect(first.code, first.stderr).toBe(4);
    const id = runIdOf(first);
    tamper(cwd, id, expression === 'MCP' ? `json_set(options, '$.mcp', json_array('sh -c "touch ${marker}"'))` : expression);
    const before = storedRow(cwd, id);
    const requests = server.requests.length;

    const resumed = await run(['resume', id, '--no-wait'], cwd, server);
    expect(resumed.code).toBe(1);
    expect(resumed.stderr).toBe(
      `exarch: run ${id} was not resumed: its options were changed outside exarch (they no longer match the signature they were recorded with); nothing was started, and the run is as it was\n`,
    );
    expect(existsSync(marker)).toBe(false);
    expect(existsSync(join(cwd, 'notes.md'))).toBe(false);
    expect(server.requests.length).toBe(requests);
    expect(storedRow(cwd, id)).toEqual(before);
  });

  it('a record without a signature is refused the same way', async () => {
    const cwd = await agentsWorkdir();
    const server = await serve(gatedFirst());
    const first = await run(['run', ...GATED, 'Take notes'], cwd, server);
    expect(first.code, first.stderr).toBe(4);
    const id = runIdOf(first);
    // As a record of an older exarch, or one written into the store by anyone: no seal.
    tamper(cwd, id, "json_remove(json_set(options, '$.allowShell', 'unsandboxed'), '$.seal')");
    const requests = server.requests.length;
    const resumed = await run(['resume', id, '--no-wait'], cwd, server);
    expect(resumed.code).toBe(1);
    expect(resumed.stderr).toBe(
      `exarch: run ${id} was not resumed: its options were recorded without a signature (by an older exarch, or written outside exarch), so a change to them could not be told; nothing was started, and the run is as it was\n`,
    );
    expect(server.requests.length).toBe(requests);
  });

  it('an untouched record resumes, its signature surviving the redaction of a secret in it and the bounding of its depth', async () => {
    const cwd = await agentsWorkdir();
    // A secret of the environment inside the record (a --log-dir named after it): the store keeps it redacted.
    const secret = 'storetrust-secret-value-4411';
    // A declared agent whose reply schema carries an annotation nested deeper than the store keeps (it elides past 128 levels).
    let deep: unknown = 'bottom';
    for (let i = 0; i < 160; i++) deep = [deep];
    writeFileSync(join(cwd, 'agents.json'), JSON.stringify({ agents: { helper: { description: 'helps', reply: { type: 'object', 'x-note': deep } } } }));
    const server = await serve(gatedFirst());
    const first = await exarch(['run', ...GATED, '--agents', 'agents.json', '--log-dir', `logs-${secret}`, 'Take notes'], {
      cwd,
      server,
      env: { EXARCH_STATE_DIR: state, ANTHROPIC_API_KEY: API_KEY, DEPLOY_TOKEN: secret },
    });
    expect(first.code, first.stderr).toBe(4);
    const id = runIdOf(first);
    expect(JSON.stringify(storedOptions(cwd, id))).not.toContain(secret);
    expect(JSON.stringify(storedOptions(cwd, id))).toContain('nested too deep');
    expect((await run(['deny', id, waitingCallOf(first, 'write_file')], cwd)).code).toBe(0);
    const resumed = await exarch(['resume', id, '--no-wait'], {
      cwd,
      server,
      env: { EXARCH_STATE_DIR: state, ANTHROPIC_API_KEY: API_KEY, DEPLOY_TOKEN: secret },
    });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toBe('done\n');
  });

  it('the store and .exarch cannot be removed, moved or replaced from inside the sandbox; write_file refuses them and git’s hooks and config', async () => {
    const cwd = await agentsWorkdir();
    execFileSync('git', ['init', '-q', cwd]);
    // As husky sets it up: hooks in the worktree (the directory not made yet: exarch makes it, empty).
    execFileSync('git', ['config', '--file', join(cwd, '.git', 'config'), 'core.hooksPath', '.husky']);
    giveTreeToAgents(cwd);
    const attempts = [
      'touch .exarch/planted',
      'rm -r .exarch/runs',
      'rm -rf .exarch',
      'mv .exarch moved',
      'ln -sfn /var/tmp .exarch',
      'rm -f .exarch/data/runs.db',
      'mv .exarch/data/runs.db .exarch/data/moved.db',
      'ln -sf /etc/passwd .exarch/data/runs.db',
      'rm -f .exarch/data/runs.db-wal',
      'mv .exarch/data .exarch/gone',
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
            call('write_file', { path: '.exarch/data/runs.db-wal', content: 'x' }),
            call('write_file', { path: '.git/hooks/pre-commit', content: 'touch pwned\n' }),
            call('write_file', { path: '.git/config', content: '[core]\n\tfsmonitor = touch pwned\n' }),
            call('write_file', { path: '.husky/pre-commit', content: 'touch pwned\n' }),
          ],
        }),
        stream({ text: 'done' }),
      ],
    });
    // A store elsewhere in the working directory is refused when agents may write (storeInWorkdir.test.ts): under .exarch/, a store of its own.
    const result = await run(['run', '--allow-shell', '--allow-write', '--store', '.exarch/data/runs.db', 'Break out'], cwd, server);
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
    expect(lstatSync(join(cwd, '.exarch', 'data', 'runs.db')).isFile()).toBe(true);
    for (const gone of [
      'moved',
      '.exarch/gone',
      '.exarch/data/moved.db',
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
    const store = new Database(join(cwd, '.exarch', 'data', 'runs.db'), { readonly: true });
    try {
      expect(store.prepare('SELECT status FROM runs').all()).toEqual([{ status: 'done' }]);
    } finally {
      store.close();
    }
  });

  it('with --allow-git-hooks, agents may change git’s hooks and config', async () => {
    const cwd = await agentsWorkdir();
    execFileSync('git', ['init', '-q', cwd]);
    giveTreeToAgents(cwd);
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

  it('the directory of the key that signs records is hidden from sandboxed commands', async () => {
    const cwd = await agentsWorkdir();
    // Something of the person's already there, as a key from an earlier run would be.
    const canary = 'person-only-canary-5c0ffee';
    writeFileSync(join(state, 'canary'), canary, { mode: 0o600 });
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: `ls -A '${state}'; cat '${state}'/*; echo "listed"` })] }),
        stream({ toolCalls: [call('run_shell', { command: `ls -A '${state}'; cat '${state}'/run-key; echo "listed again"` })] }),
        stream({ text: 'done' }),
      ],
    });
    const result = await run(['run', '--allow-shell', 'Look around'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    // Nothing listed, nothing read (the tool result is quoted as JSON: \\n is its newline).
    expect(resultSeen(server, 1)).toContain('--- stdout ---\\nlisted\\n');
    expect(resultSeen(server, 1)).not.toContain(canary);
    // The key, made for this run: its own file, the person's alone, unseen by the second command.
    const keyFile = join(state, 'run-key');
    expect(statSync(keyFile).mode & 0o777).toBe(0o600);
    expect(statSync(state).mode & 0o077).toBe(0);
    const key = readFileSync(keyFile, 'utf8').trim();
    expect(key).toMatch(/^[0-9a-f]{64}$/);
    expect(resultSeen(server, 2)).toContain('--- stdout ---\\nlisted again\\n');
    expect(resultSeen(server, 2)).not.toContain(key);
  });

  it('a resume of a run started with --allow-shell=unsandboxed says so on stderr, as run does', async () => {
    const cwd = await agentsWorkdir();
    const server = await serve(gatedFirst());
    const first = await run(['run', '--allow-shell=unsandboxed', '--allow-write', '--approve', 'write_file', '--no-wait', 'Take notes'], cwd, server);
    expect(first.code, first.stderr).toBe(4);
    const warning = 'exarch: --allow-shell=unsandboxed: shell commands run without a sandbox, with your full access to files, processes and network\n';
    expect(first.stderr).toContain(warning);
    const id = runIdOf(first);
    expect((await run(['deny', id, waitingCallOf(first, 'write_file')], cwd)).code).toBe(0);
    const resumed = await run(['resume', id, '--no-wait'], cwd, server);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain(warning);
  });

  it('exarch.config.json in the workspace (an agent could have written it) cannot widen a run', async () => {
    const cwd = await agentsWorkdir();
    const server = await serve({ root: [stream({ text: 'done' })] });
    const configs: [unknown, RegExp][] = [
      [{ agents: { helper: { description: 'd', tools: ['run_shell'] } } }, /agents\.helper\.tools.*'run_shell'.*not one of the run's tools/],
      [
        { agents: { helper: { description: 'd', maxSteps: 500 } } },
        /agents\.helper\.maxSteps is 500, above the run's step cap \(50\): a declared agent cannot raise it/,
      ],
      [{ agents: { helper: { description: 'd' } }, mcp: ['sh -c "touch pwned"'] }, /exarch\.config\.json: it has a field it may not: "mcp"/],
      [{ agents: { helper: { description: 'd', allowShell: 'unsandboxed' } } }, /exarch\.config\.json: agents\.helper has a field it may not: "allowShell"/],
    ];
    for (const [config, refusal] of configs) {
      writeFileSync(join(cwd, 'exarch.config.json'), JSON.stringify(config));
      const result = await run(['run', '--allow-write', 'Go'], cwd, server);
      expect(result.code, JSON.stringify(config)).toBe(1);
      expect(result.stderr.split('\n').filter(Boolean)).toHaveLength(1);
      expect(result.stderr).toMatch(refusal);
    }
    expect(server.requests).toEqual([]);
    expect(existsSync(join(cwd, 'pwned'))).toBe(false);
  });
});

// The key's own file: refused when others could read it, or when it is no key.
describe('the key file', () => {
  it('a key readable by others, or not a key, stops the run with one line before anything starts', async () => {
    const cwd = await agentsWorkdir();
    const server = await serve({ root: [stream({ text: 'done' })] });
    writeFileSync(join(state, 'run-key'), `${'ab'.repeat(32)}\n`);
    chmodSync(join(state, 'run-key'), 0o644);
    const open = await run(['run', 'Go'], cwd, server);
    expect(open.code).toBe(1);
    expect(open.stderr).toBe(`exarch: ${join(state, 'run-key')} is readable or writable by others (mode 644); chmod 600 it\n`);
    chmodSync(join(state, 'run-key'), 0o600);
    writeFileSync(join(state, 'run-key'), 'not a key\n');
    const bad = await run(['run', 'Go'], cwd, server);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe(`exarch: exarch's key ${join(state, 'run-key')} is not a key exarch made (expected 32 bytes as hex)\n`);
    expect(server.requests).toEqual([]);
  });

  it('a state directory inside the working directory stops the run with one line: its tools could read the key there', async () => {
    const cwd = await agentsWorkdir();
    const server = await serve({ root: [stream({ text: 'done' })] });
    const inside = await exarch(['run', 'Go'], { cwd, server, env: { EXARCH_STATE_DIR: join(cwd, '.state'), ANTHROPIC_API_KEY: API_KEY } });
    expect(inside.code).toBe(1);
    expect(inside.stderr).toBe(
      `exarch: exarch's state directory ${join(cwd, '.state')} and the working directory ${cwd} overlap: set EXARCH_STATE_DIR to a directory apart from it, where agents cannot reach its key\n`,
    );
    expect(server.requests).toEqual([]);
    expect(existsSync(join(cwd, '.state', 'run-key'))).toBe(false);
  });

  it('there, a run that makes no key works (--no-store, none yet); one where a key is already there is refused even so', async () => {
    // As a person running exarch in their home directory, where the default state directory is.
    const cwd = await agentsWorkdir();
    const server = await serve({ root: [stream({ text: 'done' })] });
    const env = { EXARCH_STATE_DIR: join(cwd, '.state'), ANTHROPIC_API_KEY: API_KEY };
    const keyless = await exarch(['run', '--no-store', 'Go'], { cwd, server, env });
    expect([keyless.code, keyless.stdout]).toEqual([0, 'done\n']);
    expect(existsSync(join(cwd, '.state', 'run-key'))).toBe(false);
    // A key made by an earlier run (from elsewhere): the agents' read tools could read it here.
    mkdirSync(join(cwd, '.state'), { mode: 0o700 });
    writeFileSync(join(cwd, '.state', 'run-key'), `${'ab'.repeat(32)}\n`, { mode: 0o600 });
    const withKey = await exarch(['run', '--no-store', 'Go'], { cwd, server, env });
    expect(withKey.code).toBe(1);
    expect(withKey.stderr).toMatch(/^exarch: exarch's state directory .* and the working directory .* overlap: /);
  });
});
