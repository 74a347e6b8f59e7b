import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';
import { call, exarch, readJsonl, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 13, holes 5 and 6: SIGTERM and SIGHUP end a run as the first Ctrl-C does (the tree
 * cancelled, every log ending with its outcome, the run resumable, exit 130); a path the run
 * cannot write to is one line, without a stack trace.
 */

describe('SIGTERM and SIGHUP behave like the first Ctrl-C', () => {
  it.each(['SIGTERM', 'SIGHUP'] as const)(
    '%s mid-stream and mid-tool: exit 130, every log ends with its outcome, the run is left interrupted',
    async (signal) => {
      const cwd = workdir();
      // Run as root (CI), exarch runs sandboxed commands as the working directory's owner: make it a user's.
      if (canSwitchUser) await giveToNobody(cwd);
      const logDir = join(cwd, 'logs');
      const server = await serve({
        root: [
          stream({ toolCalls: [call('agent', { name: 'slow', task: 'x' }), call('run_shell', { command: 'sleep 30' })] }),
          stream({ text: 'resumed and done' }),
        ],
        slow: [stream({ text: 'thinking forever' }, { stallAfter: 1 }), stream({ toolCalls: [call('reply', { result: 'late but here' })] })],
      });
      const run = await exarch(['run', '--allow-shell', '--log-dir', logDir, 'go'], {
        server,
        cwd,
        whenRequests: { count: 2, then: (child) => child.kill(signal) },
      });
      expect(run.code).toBe(130);
      expect(run.stderr).toContain('exarch: interrupted');
      expect(readJsonl(join(logDir, 'root.jsonl')).at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled', reason: 'interrupted' });
      expect(readJsonl(join(logDir, 'root.slow.jsonl')).at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled' });
      const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';
      const runs = await exarch(['runs'], { cwd });
      expect(runs.stdout).toMatch(new RegExp(`${id}.*interrupted`));
    },
  );
});

describe('paths a run cannot write to are one line', () => {
  it.each([
    ['--log-dir /etc/passwd/x', ['--log-dir', '/etc/passwd/x'], /^exarch: cannot use \/etc\/passwd\/x as the log directory: a part of the path is a file$/],
    // Node 20's recursive mkdir spins for ever on a /proc path; made one component at a time, it fails at once.
    ['--log-dir /proc/x', ['--log-dir', '/proc/x'], /^exarch: cannot use \/proc\/x as the log directory: /],
    [
      '--trace /etc/passwd/x.jsonl',
      ['--trace', '/etc/passwd/x.jsonl'],
      /^exarch: cannot write the trace to \/etc\/passwd\/x\.jsonl: a part of the path is a file$/,
    ],
    ['--trace /proc/x/t.jsonl', ['--trace', '/proc/x/t.jsonl'], /^exarch: cannot write the trace to \/proc\/x\/t\.jsonl: /],
  ])('%s', async (_what, flags, line) => {
    const run = await exarch(['run', '--no-store', ...flags, 'go'], { server: await serve({ root: [stream({ text: 'never' })] }) });
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toEqual([expect.stringMatching(line)]);
  });

  it('demo --trace /etc/passwd/x.jsonl: the one line comes before the demo starts', async () => {
    const run = await exarch(['demo', '--trace', '/etc/passwd/x.jsonl']);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.trim().split('\n')).toEqual(['exarch: cannot write the trace to /etc/passwd/x.jsonl: a part of the path is a file']);
  });
});
