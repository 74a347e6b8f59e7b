import { execFile, execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { call, exarch, lastUserText, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 13, holes 7 (the shell half) and 8, and the sandbox: run_shell under bubblewrap, for real.
 * Without bubblewrap the file is skipped locally with one line; under CI it must run.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/shellSandbox.test.ts');

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
let root: string;
let outside: string;
let server: Server;
let port = 0;

beforeAll(async () => {
  const base = mkdtempSync(join(tmpdir(), 'exarch-sandbox-'));
  root = join(base, 'work');
  // Outside /tmp, which the sandbox replaces with a private one: a file on the read-only host file system.
  outside = join(mkdtempSync('/var/tmp/exarch-outside-'), 'outside.txt');
  execFileSync('mkdir', [root]);
  writeFileSync(outside, 'untouched\n');
  // Run as root (CI), exarch runs commands as the workspace's owner: make that nobody, and let
  // nobody reach the outside file too, so that only the sandbox stands between them.
  if (canSwitchUser) await giveToNobody(base, root, join(outside, '..'), outside);
  server = createServer((socket) => socket.end('hello from the host\n'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as { port: number }).port;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(join(root, '..'), { recursive: true, force: true });
  rmSync(join(outside, '..'), { recursive: true, force: true });
});

async function shell(command: string, options: { network?: boolean; shellUser?: string } = {}): Promise<string> {
  const tool = workspaceTools({
    root,
    allowShell: true,
    allowNetwork: options.network === true,
    ...(options.shellUser === undefined ? {} : { shellUser: options.shellUser }),
  }).find((t: Tool) => t.name === 'run_shell');
  const prepared = tool?.prepare({ command });
  if (!prepared?.ok) throw new Error('cannot prepare run_shell');
  return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
}

/** PIDs of processes whose command line is exactly `sleep N`, seen from the test's own /proc. */
function sleepers(seconds: number): string[] {
  try {
    return execFileSync('pgrep', ['-fx', `sleep ${seconds}`], { encoding: 'utf8' })
      .trim()
      .split('\n')
      .filter(Boolean);
  } catch {
    return [];
  }
}

describe.skipIf(BWRAP === undefined)('run_shell in the bubblewrap sandbox', () => {
  it("exarch's environment and processes are out of reach: /proc/$PPID/environ holds no secret", async () => {
    process.env['EXARCH_TEST_SECRET_TOKEN'] = 'tok-3f9a1c77e2';
    try {
      const out = await shell('tr "\\0" "\\n" < /proc/$PPID/environ; echo ---; ls /proc | grep -c "^[0-9]"');
      expect(out).not.toContain('tok-3f9a1c77e2');
      expect(out).not.toContain('EXARCH_TEST_SECRET_TOKEN');
      // A fresh PID namespace: a handful of processes, not the host's.
      const count = Number(/---\n(\d+)/.exec(out)?.[1]);
      expect(count).toBeLessThan(10);
    } finally {
      delete process.env['EXARCH_TEST_SECRET_TOKEN'];
    }
  });

  it('writes inside the working directory; a write outside it fails', async () => {
    const out = await shell(`echo made > inside.txt && echo changed > '${outside}'; echo "exit=$?"`);
    expect(readFileSync(join(root, 'inside.txt'), 'utf8')).toBe('made\n');
    expect(readFileSync(outside, 'utf8')).toBe('untouched\n');
    expect(out).toMatch(/Read-only file system/);
  });

  it('background processes, setsid ones included, do not outlive the call', async () => {
    expect(sleepers(993)).toEqual([]);
    const out = await shell('sleep 993 & setsid sleep 992 & (sleep 991 &) ; echo started');
    expect(out).toContain('started');
    expect([...sleepers(993), ...sleepers(992), ...sleepers(991)]).toEqual([]);
  });

  it('holds no capability, so it cannot remount the file system read-write (CI runs as root)', async () => {
    const escaped = join(outside, '..', 'escaped.txt');
    const script = `grep CapEff /proc/self/status; mount -o remount,rw,bind / 2>&1; echo x > '${escaped}'; echo done`;
    // As the workspace's owner (the default), and as root where root asks for it by name.
    for (const shellUser of canSwitchUser ? [undefined, 'root'] : [undefined]) {
      const out = await shell(script, shellUser === undefined ? {} : { shellUser });
      expect(out).toMatch(/CapEff:\s+0+\n/);
      expect(existsSync(escaped)).toBe(false);
    }
  });

  it('a Unix socket outside the working directory cannot be reached (read-only mounts do not stop connect)', async () => {
    const socketPath = join(outside, '..', 'host.sock');
    const unix = createServer((socket) => socket.end('hello from a host socket\n'));
    await new Promise<void>((resolve) => unix.listen(socketPath, resolve));
    try {
      const client = `require('net').connect('${socketPath}').on('data', (d) => process.stdout.write(d)).on('error', (e) => console.log('refused: ' + e.code))`;
      const out = await shell(`'${process.execPath}' -e "${client}"`);
      expect(out).not.toContain('hello from a host socket');
      expect(out).toContain('refused: EPERM');
      // The same client reaches it from outside the sandbox: the refusal is the sandbox's.
      // (Asynchronously: the server answers from this very process.)
      const outsideRun = await promisify(execFile)(process.execPath, ['-e', client], { encoding: 'utf8', timeout: 20_000 });
      expect(outsideRun.stdout).toContain('hello from a host socket');
    } finally {
      await new Promise((resolve) => unix.close(resolve));
    }
  });

  it('the network is refused unless allowed', async () => {
    const probe = `exec 3<>/dev/tcp/127.0.0.1/${port} 2>/dev/null && head -1 <&3 || echo refused`;
    expect(await shell(`bash -c '${probe}'`)).toContain('refused');
    expect(await shell(`bash -c '${probe}'`, { network: true })).toContain('hello from the host');
  });
});

describe.skipIf(BWRAP === undefined)('the command line', () => {
  it('--allow-shell=unsandboxed says so on stderr; unsandboxed, a background process still ends with its call', async () => {
    const cwd = workdir();
    let told = '';
    const server = await serve({
      root: [
        stream({ toolCalls: [call('run_shell', { command: 'sleep 990 & echo bg' })] }),
        (request) => {
          told = lastUserText(request);
          return stream({ text: 'ok' });
        },
      ],
    });
    const run = await exarch(['run', '--no-store', '--allow-shell=unsandboxed', 'go'], { server, cwd });
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(/^exarch: --allow-shell=unsandboxed: shell commands run without a sandbox/m);
    expect(told).toContain('bg');
    expect(sleepers(990)).toEqual([]);
  });

  it('--allow-shell with another value is a usage error', async () => {
    const run = await exarch(['run', '--no-store', '--allow-shell=sometimes', 'go'], { server: await serve({}) });
    expect(run.code).toBe(2);
    expect(run.stderr.split('\n')[0]).toMatch(/^exarch: .*allow-shell/);
  });
});
