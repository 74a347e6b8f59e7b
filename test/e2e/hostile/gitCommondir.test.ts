import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest } from '../../support/anthropicServer.js';
import { canSwitchUser, NOBODY } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { call, exarch, lastUserText, onCleanup, stream, workdir, type CliRun } from '../../support/cliHarness.js';

/**
 * Issue 37 (seams: the sandbox × git run by the person afterwards): `.git` was pinned and only
 * `.git/config`, `config.worktree` and the hooks read-only. A sandboxed command could write
 * `.git/commondir` naming a directory of its own, whose `config` sets `core.fsmonitor`: the
 * person's next `git status`, on the host, ran it. Now the files that say where git reads config
 * and hooks from are read-only when they exist, and removed after the command when it made them.
 * Real git on both sides, real bubblewrap, the real command.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/gitCommondir.test.ts');

let state: string;
let markers: string;
beforeEach(() => {
  state = mkdtempSync('/var/tmp/exarch-state-');
  markers = workdir();
  onCleanup(() => rmSync(state, { recursive: true, force: true }));
});

/** What the person's fsmonitor (planted by the agent) leaves when git runs it on the host. */
const marker = (): string => join(markers, 'fsmonitor-ran');

/** A repository with one commit, all of it `nobody`'s as a person's project is theirs. */
function repository(prepare: (cwd: string) => void = () => undefined): string {
  const cwd = workdir();
  const git = (...args: string[]) => execFileSync('/usr/bin/git', ['-C', cwd, ...args]);
  git('init', '-q');
  writeFileSync(join(cwd, 'README'), 'hello\n');
  git('add', 'README');
  git('-c', 'user.name=p', '-c', 'user.email=p@example.com', 'commit', '-qm', 'first');
  prepare(cwd);
  if (canSwitchUser) execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, cwd]);
  return cwd;
}

/**
 * The person's `git status` in `dir`, afterwards, on the host (root's git trusts the agent-owned
 * repository as the person's own git trusts theirs).
 */
function personsGitStatus(dir: string): void {
  spawnSync('/usr/bin/git', ['-c', 'safe.directory=*', '-C', dir, 'status', '--short'], { stdio: 'ignore', timeout: 30_000 });
}

/**
 * Shell lines that make `evil/` in the working directory a repository's common directory (what git
 * needs there: objects, refs) whose config runs the marker as core.fsmonitor.
 */
const plantCommon = (): string =>
  [
    'mkdir -p evil && cp -r .git/objects .git/refs .git/HEAD evil/',
    `printf '[core]\\n\\trepositoryformatversion = 0\\n\\tfsmonitor = "touch ${marker()}; false"\\n' > evil/config`,
  ].join(' && ');

async function serve(root: Parameters<typeof historyHandler>[0]['root']): Promise<AnthropicTestServer> {
  const server = await startAnthropicServer(historyHandler({ root }));
  onCleanup(() => server.close());
  return server;
}

function run(args: readonly string[], cwd: string, server: AnthropicTestServer): Promise<CliRun> {
  return exarch(args, { cwd, server, env: { EXARCH_STATE_DIR: state } });
}

const resultSeen = (server: AnthropicTestServer, step: number): string =>
  lastUserText(server.requests.filter((r) => r.body.messages.filter((m) => m.role === 'assistant').length === step).at(-1) as ReceivedRequest);

const REMOVED = (list: string) =>
  `note: exarch removed ${list}, which the command made: it would change where git, run outside the sandbox, reads its config and hooks from`;

describe.skipIf(BWRAP === undefined)('files that tell git where to read its config and hooks from, against a sandboxed command', () => {
  it("the reviewer's reproduction: a .git/commondir the command wrote is removed after it, the model is told, and the person's git status runs nothing", async () => {
    const cwd = repository();
    // First, how the test knows the plant works: with git alone, outside exarch, it runs the marker.
    const probe = repository();
    execFileSync('/bin/sh', ['-c', `${plantCommon()} && echo "$PWD/evil" > .git/commondir`], { cwd: probe });
    personsGitStatus(probe);
    expect(existsSync(marker())).toBe(true);
    rmSync(marker());

    const server = await serve([
      stream({ toolCalls: [call('run_shell', { command: `${plantCommon()} && echo "$PWD/evil" > .git/commondir && echo PLANTED` })] }),
      stream({ text: 'done' }),
    ]);
    const result = await run(['run', '--allow-shell', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    const seen = resultSeen(server, 1);
    // It could write it (nothing is bound over a missing file), and was told it was taken away.
    expect(seen).toContain('PLANTED');
    expect(seen).toContain(REMOVED('.git/commondir'));
    expect(existsSync(join(cwd, '.git', 'commondir'))).toBe(false);
    personsGitStatus(cwd);
    expect(existsSync(marker())).toBe(false);
    // exarch's own stderr need not say it; the model's result did.
    expect(result.stderr).not.toContain('commondir');
  });

  it('a .git/commondir that was there when the command started is read-only to it', async () => {
    // The repository's own common directory is itself: git reads `commondir` relative to .git.
    const cwd = repository((dir) => writeFileSync(join(dir, '.git', 'commondir'), '.\n'));
    const server = await serve([
      stream({
        toolCalls: [call('run_shell', { command: `${plantCommon()} && { echo "$PWD/evil" > .git/commondir; } 2>/dev/null && echo DID || echo REFUSED` })],
      }),
      stream({ text: 'done' }),
    ]);
    const result = await run(['run', '--allow-shell', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(resultSeen(server, 1)).toContain('REFUSED');
    expect(readFileSync(join(cwd, '.git', 'commondir'), 'utf8')).toBe('.\n');
    personsGitStatus(cwd);
    expect(existsSync(marker())).toBe(false);
  });

  it('a .git/config.worktree the command made (the repository reads it: extensions.worktreeConfig) is removed the same way', async () => {
    const cwd = repository((dir) => execFileSync('/usr/bin/git', ['-C', dir, 'config', 'extensions.worktreeConfig', 'true']));
    const server = await serve([
      stream({ toolCalls: [call('run_shell', { command: `git config --worktree core.fsmonitor "touch ${marker()}; false" && echo PLANTED` })] }),
      stream({ text: 'done' }),
    ]);
    const result = await run(['run', '--allow-shell', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(resultSeen(server, 1)).toContain('PLANTED');
    expect(resultSeen(server, 1)).toContain(REMOVED('.git/config.worktree'));
    personsGitStatus(cwd);
    expect(existsSync(marker())).toBe(false);
  });

  it("a linked worktree's commondir (.git/worktrees/ID/commondir) is read-only, so git in that worktree elsewhere runs nothing", async () => {
    const linked = join(workdir(), 'linked');
    const cwd = repository((dir) => execFileSync('/usr/bin/git', ['-C', dir, 'worktree', 'add', '-q', linked]));
    const server = await serve([
      stream({
        toolCalls: [
          call('run_shell', {
            command: `${plantCommon()} && { echo "$PWD/evil" > .git/worktrees/linked/commondir; } 2>/dev/null && echo DID || echo REFUSED`,
          }),
        ],
      }),
      stream({ text: 'done' }),
    ]);
    const result = await run(['run', '--allow-shell', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(resultSeen(server, 1)).toContain('REFUSED');
    personsGitStatus(linked);
    expect(existsSync(marker())).toBe(false);
  });

  it('a command killed at its timeout while it writes .git/commondir over and over leaves none behind', async () => {
    const cwd = repository();
    const tool = workspaceTools({ root: cwd, allowShell: true, shellTimeoutMs: 1_000 }).find((t) => t.name === 'run_shell');
    if (tool === undefined) throw new Error('no run_shell');
    const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
    for (let attempt = 0; attempt < 3; attempt++) {
      const prepared = tool.prepare({ command: 'while :; do echo /tmp > .git/commondir; done' });
      if (!prepared.ok) throw new Error(prepared.error);
      const out = String(await prepared.value({ agent, toolUseId: `toolu_${attempt}`, signal: new AbortController().signal }));
      expect(out).toMatch(/^timed out after 1 s/);
      expect(out).toContain(REMOVED('.git/commondir'));
      expect(existsSync(join(cwd, '.git', 'commondir')), `attempt ${attempt}`).toBe(false);
    }
  });
});
