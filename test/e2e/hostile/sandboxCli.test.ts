import { chmodSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ReceivedRequest } from '../../support/anthropicServer.js';
import { canSwitchUser, giveTo, NOBODY, UNLISTED_UID } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { call, exarch, lastUserText, readJsonl, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 37, end to end through the real CLI against the loopback SSE server and the real
 * bubblewrap: `--shell-limits` and `--shell-user`, what the model is told when a limit stops a
 * command, what the person is told on stderr, and a resume that sets the limits recorded with
 * the run. Run as root, as CI does.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/sandboxCli.test.ts');

/** A workspace of UNLISTED_UID's: a user's project, which root runs exarch in. */
async function usersWorkspace(): Promise<string> {
  const cwd = workdir();
  await giveTo(UNLISTED_UID, cwd);
  return cwd;
}

const USERS_NOTE = `exarch: shell commands run as uid ${UNLISTED_UID}, the owner of the working directory; --shell-user NAME|UID runs them as another user (root too)`;

describe.skipIf(BWRAP === undefined || !canSwitchUser)('exarch run --allow-shell, run as root', () => {
  it("the model is told which limit stopped a command, and exarch's own log, trace and answer are not limited", async () => {
    const cwd = await usersWorkspace();
    const told: string[] = [];
    const answer = `${'a long answer, longer than any file a command may write; '.repeat(2_000)}the end`;
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: 'head -c 1M /dev/zero > big.bin; ls -l big.bin' })] }),
        (request: ReceivedRequest) => {
          told.push(lastUserText(request));
          return stream({ toolCalls: [call('run_shell', { command: 'while :; do :; done' })] });
        },
        (request: ReceivedRequest) => {
          told.push(lastUserText(request));
          return stream({ text: answer });
        },
      ],
    });
    const logDir = join(cwd, 'logs');
    const trace = join(cwd, 'trace.jsonl');
    const run = await exarch(['run', '--allow-shell', '--shell-limits', 'file-size=64K,cpu=1', '--log-dir', logDir, '--trace', trace, 'go'], { server, cwd });
    expect(run.code).toBe(0);
    expect(run.stderr.split('\n').filter((line) => line.includes('shell commands run as'))).toEqual([USERS_NOTE]);
    // The file stops at its limit, and the model reads why.
    expect(statSync(join(cwd, 'big.bin')).size).toBe(64 * 1024);
    expect(told[0]).toContain('File size limit exceeded');
    expect(told[0]).toContain(
      'sandbox limit probably reached: file-size: 64 KiB per file — the output says \\"File size limit exceeded\\": a write past the limit was refused',
    );
    // The loop stops at its CPU limit, not at the two-minute timeout.
    expect(told[1]).toContain(
      'exit code: 152 (SIGXCPU)\\n(no output)\\nsandbox limit reached: cpu — a process used its 1 s of CPU time and was killed by SIGXCPU',
    );
    // exarch writes past 64 KiB: the limits are the command's alone.
    expect(run.stdout).toBe(`${answer}\n`);
    for (const file of [join(logDir, 'root.jsonl'), trace]) {
      expect(statSync(file).size).toBeGreaterThan(64 * 1024);
      expect(readJsonl(file).length).toBeGreaterThan(2);
    }
    // The answer is in the log whole, as the last message.
    const messages = readJsonl(join(logDir, 'root.jsonl')).filter((record) => record['type'] === 'message');
    expect(JSON.stringify(messages.at(-1))).toContain(answer);
  });

  it('a resume sets the limits recorded with the run, and says again who runs the commands', async () => {
    const cwd = await usersWorkspace();
    let told = '';
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: 'grep -E "^Max (processes|open files)" /proc/self/limits; id -u' })] }),
        (request: ReceivedRequest) => {
          told = lastUserText(request);
          return stream({ text: 'done' });
        },
      ],
    });
    const first = await exarch(['run', '--allow-shell', '--shell-limits', 'processes=77,open-files=99', '--approve', 'run_shell', '--no-wait', 'go'], {
      server,
      cwd,
    });
    expect(first.code).toBe(4);
    const id = /exarch: run (\S+) started/.exec(first.stderr)?.[1] ?? '';
    const callId = /^ {2}(toolu_\S+) {2}run_shell/m.exec(first.stderr)?.[1] ?? '';
    expect((await exarch(['approve', id, callId], { cwd })).code).toBe(0);
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stderr.split('\n').filter((line) => line.includes('shell commands run as'))).toEqual([USERS_NOTE]);
    expect(told).toMatch(/Max processes +77 +77 +processes/);
    expect(told).toMatch(/Max open files +99 +99 +files/);
    expect(told).toContain(`\\n${UNLISTED_UID}"]`);
  });

  it("in a workspace of root's: commands run as nobody, cannot read /etc/shadow, and stderr says so once", async () => {
    const cwd = workdir();
    chmodSync(cwd, 0o755);
    let told = '';
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: 'id -u; cat /etc/shadow; touch made.txt' })] }),
        (request: ReceivedRequest) => {
          told = lastUserText(request);
          return stream({ text: 'done' });
        },
      ],
    });
    const run = await exarch(['run', '--no-store', '--allow-shell', 'go'], { server, cwd });
    expect(run.code).toBe(0);
    expect(run.stderr.split('\n').filter((line) => line.startsWith('exarch: shell commands') || line.startsWith('exarch: --shell-user'))).toEqual([
      "exarch: shell commands run as nobody (uid 65534), not root: the working directory is root's, so they cannot write in it; --shell-user NAME|UID runs them as another user (root too)",
    ]);
    expect(told).toContain(`--- stdout ---\\n${NOBODY}\\n`);
    expect(told).toContain('cat: /etc/shadow: Permission denied');
    expect(told).toContain(
      "touch: cannot touch 'made.txt': Permission denied\\nnote: the sandbox runs commands as nobody (uid 65534), who may not write in the working directory",
    );
    expect(told).not.toContain('root:');
  });

  it('--shell-user root is said on stderr, as --allow-shell=unsandboxed is, and runs commands as root', async () => {
    const cwd = workdir();
    let told = '';
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: 'id -u; head -c 5 /etc/shadow' })] }),
        (request: ReceivedRequest) => {
          told = lastUserText(request);
          return stream({ text: 'done' });
        },
      ],
    });
    const run = await exarch(['run', '--no-store', '--allow-shell', '--shell-user', 'root', 'go'], { server, cwd });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(
      /^exarch: --shell-user root: shell commands run as root in the sandbox: they can read every file on this machine \(\/etc\/shadow, \/root\/\.ssh\), and no process limit applies$/m,
    );
    expect(told).toContain(`--- stdout ---\\n0\\n${readFileSync('/etc/shadow', 'utf8').slice(0, 5)}`);
  });

  it('a workspace the commands could not even enter is one line before any request', async () => {
    const cwd = workdir();
    chmodSync(cwd, 0o700);
    const server = await serve({ root: [stream({ text: 'never' })] });
    const run = await exarch(['run', '--no-store', '--allow-shell', 'go'], { server, cwd });
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([
      `exarch: shell commands would run as nobody (uid 65534), who cannot enter the working directory ${cwd}: pass --shell-user with a user who can (--shell-user root: as root)`,
    ]);
    expect(server.requests).toHaveLength(0);
  });
});

describe('bad --shell-limits and --shell-user are one line (exit 2), before any request', () => {
  it.each([
    [
      ['--allow-shell', '--shell-limits', 'memory=lots'],
      "exarch: --shell-limits: memory must be a size like 4G (bytes, or K, M, G, T), or unlimited; got 'lots'",
    ],
    [
      ['--allow-shell', '--shell-limits', 'forks=10'],
      "exarch: --shell-limits: no limit named 'forks' (the limits: processes, memory, file-size, cpu, open-files)",
    ],
    [['--allow-shell', '--shell-limits', 'cpu'], 'exarch: --shell-limits: cpu needs a value: cpu=VALUE'],
    [['--allow-shell', '--shell-limits', 'processes=0'], "exarch: --shell-limits: processes must be at least 1, got '0'"],
    [['--allow-shell', '--shell-limits', 'memory=1M'], "exarch: --shell-limits: memory must be at least 16M, got '1M'"],
    [['--allow-shell', '--shell-limits', 'cpu=1,cpu=2'], 'exarch: --shell-limits: cpu is given twice'],
    [['--allow-shell', '--shell-limits', 'file-size=99999999T'], 'exarch: --shell-limits: file-size=99999999T is too large; use unlimited'],
    [['--shell-limits', 'cpu=5'], 'exarch: --shell-limits needs --allow-shell'],
    [
      ['--allow-shell=unsandboxed', '--shell-user', 'nobody'],
      'exarch: --shell-user is for sandboxed commands; --allow-shell=unsandboxed runs them as you, without limits',
    ],
    [['--allow-shell', '--shell-user', 'no-such-user-37'], "exarch: --shell-user: there is no user named 'no-such-user-37' here"],
    [['--allow-shell', '--shell-user', '$(id)'], "exarch: --shell-user takes a user name or a uid, got '$(id)'"],
  ])('%j', async (flags, line) => {
    const server = await serve({ root: [stream({ text: 'never' })] });
    const run = await exarch(['run', '--no-store', ...flags, 'go'], { server });
    expect(run.code).toBe(2);
    expect(run.stderr.split('\n')[0]).toBe(line);
    expect(server.requests).toHaveLength(0);
  });

  it('resume takes no --shell-limits: the run keeps the limits it was started with', async () => {
    const run = await exarch(['resume', '01JF3Q0000000000000000000Z', '--shell-limits', 'cpu=5']);
    expect(run.code).toBe(2);
    expect(run.stderr.split('\n')[0]).toBe('exarch: --shell-limits is not an option of resume');
  });
});
