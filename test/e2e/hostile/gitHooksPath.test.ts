import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest } from '../../support/anthropicServer.js';
import { canSwitchUser, NOBODY } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { call, exarch, lastUserText, onCleanup, stream, workdir, type CliRun } from '../../support/cliHarness.js';

/**
 * Issue 37 (seams: git's hooks × the file system): a repository's `core.hooksPath` is the agent's
 * when the agent made the repository, and what exarch does with it runs on the host. A missing
 * hooks directory was made with `mkdir -p`, through any symlink on the way, as root; and
 * `write_file` let a hooks directory that did not exist yet be written until the first command
 * made it. Real git, real bubblewrap, the real command.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/gitHooksPath.test.ts');

let state: string;
beforeEach(() => {
  state = mkdtempSync('/var/tmp/exarch-state-');
  onCleanup(() => rmSync(state, { recursive: true, force: true }));
});

/** A repository in a fresh working directory whose `core.hooksPath` is `hooksPath`, all of it `nobody`'s as a person's project is theirs. */
function repository(hooksPath: string, prepare: (cwd: string) => void = () => undefined): string {
  const cwd = workdir();
  execFileSync('/usr/bin/git', ['init', '-q', cwd]);
  execFileSync('/usr/bin/git', ['-C', cwd, 'config', 'core.hooksPath', hooksPath]);
  prepare(cwd);
  if (canSwitchUser) execFileSync('chown', ['-R', '-h', `${NOBODY}:${NOBODY}`, cwd]);
  return cwd;
}

async function serve(root: Parameters<typeof historyHandler>[0]['root']): Promise<AnthropicTestServer> {
  const server = await startAnthropicServer(historyHandler({ root }));
  onCleanup(() => server.close());
  return server;
}

function run(args: readonly string[], cwd: string, server: AnthropicTestServer): Promise<CliRun> {
  return exarch(args, { cwd, server, env: { EXARCH_STATE_DIR: state } });
}

/** What the model was told in answer to its `step`-th response. */
const resultSeen = (server: AnthropicTestServer, step: number): string =>
  lastUserText(server.requests.filter((r) => r.body.messages.filter((m) => m.role === 'assistant').length === step).at(-1) as ReceivedRequest);

describe.skipIf(BWRAP === undefined)('a missing core.hooksPath directory, made by exarch before each command', () => {
  it('is not made through a symlink: core.hooksPath link/a/b with link -> a directory outside leaves that directory as it was', async () => {
    const outside = workdir();
    const cwd = repository('link/a/b', (dir) => symlinkSync(outside, join(dir, 'link')));
    const server = await serve([stream({ toolCalls: [call('run_shell', { command: 'echo ran' })] }), stream({ text: 'done' })]);
    const result = await run(['run', '--allow-shell', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(resultSeen(server, 1)).toContain('ran');
    expect(existsSync(join(outside, 'a'))).toBe(false);
  });

  it('is not made through a symlink further down either (a/link/b, link -> outside), and nothing outside is made', async () => {
    const outside = workdir();
    const cwd = repository('a/link/b/c', (dir) => {
      mkdirSync(join(dir, 'a'));
      symlinkSync(outside, join(dir, 'a', 'link'));
    });
    const server = await serve([stream({ toolCalls: [call('run_shell', { command: 'echo ran' })] }), stream({ text: 'done' })]);
    const result = await run(['run', '--allow-shell', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(existsSync(join(outside, 'b'))).toBe(false);
  });

  it('inside the working directory it is made, level by level, its owner the directory’s, and read-only to the command', async () => {
    const cwd = repository('tools/git/hooks');
    const server = await serve([
      stream({ toolCalls: [call('run_shell', { command: 'touch tools/git/hooks/pre-commit && echo DID || echo REFUSED' })] }),
      stream({ text: 'done' }),
    ]);
    const result = await run(['run', '--allow-shell', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(resultSeen(server, 1)).toContain('REFUSED');
    for (const dir of ['tools', 'tools/git', 'tools/git/hooks']) {
      const stats = lstatSync(join(cwd, dir));
      expect(stats.isDirectory(), dir).toBe(true);
      if (canSwitchUser) expect([stats.uid, stats.gid], dir).toEqual([NOBODY, NOBODY]);
    }
    expect(existsSync(join(cwd, 'tools/git/hooks/pre-commit'))).toBe(false);
  });
});

/** The tool results the model was sent for a response of `write_file` calls, one per call, in order. */
const writeResults = (server: AnthropicTestServer, step: number): string[] => resultSeen(server, step).split('\n');
const GIT_REFUSAL = /is git's own \(its hooks and config run commands outside any sandbox\), which agents may not change unless the person allows it/;

describe('write_file and a core.hooksPath directory that does not exist yet', () => {
  it('refuses a file in it before any command has made it (write_file alone, no shell)', async () => {
    const cwd = repository('.husky/_');
    const server = await serve([
      stream({
        toolCalls: [call('write_file', { path: '.husky/_/pre-commit', content: 'touch pwned\n' }), call('write_file', { path: 'notes.md', content: 'fine\n' })],
      }),
      stream({ text: 'done' }),
    ]);
    const result = await run(['run', '--allow-write', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    const [hook, notes] = writeResults(server, 1);
    expect(hook).toMatch(GIT_REFUSAL);
    expect(notes).not.toMatch(/refused/);
    expect(existsSync(join(cwd, '.husky'))).toBe(false);
    expect(existsSync(join(cwd, 'notes.md'))).toBe(true);
  });

  it('refuses it through a symlink inside the working directory too', async () => {
    const cwd = repository('hooks/_', (dir) => {
      mkdirSync(join(dir, 'real-hooks'));
      symlinkSync('real-hooks', join(dir, 'hooks'));
    });
    const server = await serve([stream({ toolCalls: [call('write_file', { path: 'real-hooks/_/pre-commit', content: 'x\n' })] }), stream({ text: 'done' })]);
    const result = await run(['run', '--allow-write', '--no-store', 'Go'], cwd, server);
    expect(result.code, result.stderr).toBe(0);
    expect(writeResults(server, 1)[0]).toMatch(GIT_REFUSAL);
  });
});

describe.skipIf(BWRAP === undefined)("husky 9's layout: core.hooksPath .husky/_, whose stubs run .husky/<hook>", () => {
  it('the scripts the stubs run are protected too: read-only to commands, refused by write_file; husky’s files elsewhere with its `h`', async () => {
    const cwd = repository('.husky/_', (dir) => {
      // As husky's own install leaves it: the stubs, h, and the person's pre-commit beside them.
      mkdirSync(join(dir, '.husky', '_'), { recursive: true });
      writeFileSync(join(dir, '.husky', '_', 'pre-commit'), '#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n');
      writeFileSync(join(dir, '.husky', '_', 'h'), '#!/usr/bin/env sh\n');
      writeFileSync(join(dir, '.husky', 'pre-commit'), 'npm test\n');
    });
    const other = repository('githooks/_', (dir) => {
      mkdirSync(join(dir, 'githooks', '_'), { recursive: true });
      writeFileSync(join(dir, 'githooks', '_', 'h'), '#!/usr/bin/env sh\n');
    });
    const plain = repository('tools/_', (dir) => mkdirSync(join(dir, 'tools', '_'), { recursive: true }));
    const attempt = (file: string): string => `{ echo "touch pwned" > ${file}; } 2>/dev/null && echo "DID ${file}" || echo "REFUSED ${file}"`;
    for (const [dir, file, expected] of [
      [cwd, '.husky/pre-commit', 'REFUSED'],
      [cwd, '.husky/pre-push', 'REFUSED'],
      [other, 'githooks/pre-commit', 'REFUSED'],
      // A hooks directory named `_` that is not husky's: the directory above stays the agents'.
      [plain, 'tools/build.sh', 'DID'],
    ] as const) {
      const server = await serve([
        stream({ toolCalls: [call('run_shell', { command: attempt(file) })] }),
        stream({ toolCalls: [call('write_file', { path: `${file}.2`, content: 'touch pwned\n' })] }),
        stream({ text: 'done' }),
      ]);
      const result = await run(['run', '--allow-shell', '--allow-write', '--no-store', 'Go'], dir, server);
      expect(result.code, result.stderr).toBe(0);
      expect(resultSeen(server, 1), file).toContain(`${expected} ${file}`);
      if (expected === 'REFUSED') expect(resultSeen(server, 2), file).toMatch(GIT_REFUSAL);
      else expect(resultSeen(server, 2), file).not.toMatch(/refused/);
    }
    expect(readFileSync(join(cwd, '.husky', 'pre-commit'), 'utf8')).toBe('npm test\n');
  });
});
