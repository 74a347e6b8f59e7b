import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools, type WorkspaceToolsOptions } from '../../../src/tools/workspace/index.js';
import { canSwitchUser, giveTo, NOBODY, UNLISTED_UID } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';

/**
 * Issue 37: run as root, exarch runs sandboxed commands as a user without root's files. Every
 * capability was dropped already, yet the command was uid 0, and the read-only file system lets
 * root read /etc/shadow and /root/.ssh. Real bubblewrap; the tests need root, as CI has it.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/sandboxUser.test.ts');
const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
let base: string;
/** Owned by UNLISTED_UID: a user's project. */
let owned: string;
/** root's, but open to all (0755): what a container's /app looks like. */
let rootsOpen: string;
/** root's alone (0700). */
let rootsClosed: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'exarch-shell-user-'));
  chmodSync(base, 0o755);
  owned = join(base, 'owned');
  rootsOpen = join(base, 'open');
  rootsClosed = join(base, 'closed');
  for (const dir of [owned, rootsOpen, rootsClosed]) mkdirSync(dir);
  chmodSync(rootsOpen, 0o755);
  chmodSync(rootsClosed, 0o700);
  if (canSwitchUser) await giveTo(UNLISTED_UID, owned);
});
afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

type Options = Pick<WorkspaceToolsOptions, 'shellUser'>;

function runShellIn(root: string, options: Options = {}, notes: string[] = []): Tool {
  const tool = workspaceTools({ root, allowShell: true, ...options, onShellNote: (note) => notes.push(note) }).find((t) => t.name === 'run_shell');
  if (tool === undefined) throw new Error('no run_shell');
  return tool;
}

async function shell(root: string, command: string, options: Options = {}): Promise<string> {
  const prepared = runShellIn(root, options).prepare({ command });
  if (!prepared.ok) throw new Error(prepared.error);
  return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
}

// The checks each identity is put through: who it is, root's files, HOME, /tmp and the workspace.
const probe = [
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion, not a template
  'echo "uid=$(id -u) gid=$(id -g) groups=$(id -G) home=$HOME user=${USER-unset}"',
  'cat /etc/shadow >/dev/null 2>&1 && echo "shadow: read" || echo "shadow: refused"',
  'ls /root >/dev/null 2>&1 && echo "/root: listed" || echo "/root: refused"',
  '{ echo x > "$HOME/.probe"; } 2>/dev/null && echo "home: writable" || echo "home: not writable"',
  '{ echo x > /tmp/probe; } 2>/dev/null && echo "tmp: writable" || echo "tmp: not writable"',
  '{ echo x > made.txt; } 2>/dev/null && echo "workspace: writable" || echo "workspace: not writable"',
].join('; ');

describe.skipIf(BWRAP === undefined || !canSwitchUser)('who runs a sandboxed command when exarch runs as root', () => {
  it("the working directory's owner, in a user's project: root's files refused, the project writable, files made its own", async () => {
    const notes: string[] = [];
    const tool = runShellIn(owned, {}, notes);
    expect(notes).toEqual([
      `shell commands run as uid ${UNLISTED_UID}, the owner of the working directory; --shell-user NAME|UID runs them as another user (root too)`,
    ]);
    // The description depends on the options alone: a run recorded on one machine replays on another.
    expect(tool.spec.description).not.toContain(String(UNLISTED_UID));
    const out = await shell(owned, probe);
    expect(out).toBe(
      [
        'exit code: 0',
        '--- stdout ---',
        // No passwd entry: no USER, and HOME is the sandbox's private /tmp.
        `uid=${UNLISTED_UID} gid=${UNLISTED_UID} groups=${UNLISTED_UID} home=/tmp user=unset`,
        'shadow: refused',
        '/root: refused',
        'home: writable',
        'tmp: writable',
        'workspace: writable',
      ].join('\n'),
    );
    expect(statSync(join(owned, 'made.txt')).uid).toBe(UNLISTED_UID);
  });

  it("nobody, in a workspace of root's: root's files and the workspace refused, said once, and to the model", async () => {
    const notes: string[] = [];
    const tool = runShellIn(rootsOpen, {}, notes);
    expect(notes).toEqual([
      "shell commands run as nobody (uid 65534), not root: the working directory is root's, so they cannot write in it; --shell-user NAME|UID runs them as another user (root too)",
    ]);
    expect(tool.spec.description).not.toContain('nobody');
    const out = await shell(rootsOpen, probe);
    expect(out).toBe(
      [
        'exit code: 0',
        '--- stdout ---',
        `uid=${NOBODY} gid=${NOBODY} groups=${NOBODY} home=/tmp user=nobody`,
        'shadow: refused',
        '/root: refused',
        'home: writable',
        'tmp: writable',
        'workspace: not writable',
      ].join('\n'),
    );
    // A write refused in the workspace says why.
    expect(await shell(rootsOpen, 'touch made.txt')).toBe(
      [
        'exit code: 1',
        '--- stderr ---',
        "touch: cannot touch 'made.txt': Permission denied",
        'note: the sandbox runs commands as nobody (uid 65534), who may not write in the working directory',
      ].join('\n'),
    );
  });

  it('a user named or numbered with shellUser, and root only when asked for by name, said as such', async () => {
    expect(await shell(owned, 'id -u', { shellUser: 'nobody' })).toBe(`exit code: 0\n--- stdout ---\n${NOBODY}`);
    expect(await shell(owned, 'id -u', { shellUser: NOBODY })).toBe(`exit code: 0\n--- stdout ---\n${NOBODY}`);
    const notes: string[] = [];
    runShellIn(owned, { shellUser: 'root' }, notes);
    expect(notes).toEqual([
      '--shell-user root: shell commands run as root in the sandbox: they can read every file on this machine (/etc/shadow, /root/.ssh), and no process limit applies',
    ]);
    const out = await shell(owned, 'id -u; cat /etc/shadow > /dev/null && echo "shadow: read"', { shellUser: 'root' });
    expect(out).toBe('exit code: 0\n--- stdout ---\n0\nshadow: read');
  });

  it('a user who cannot enter the working directory, or one that does not exist, is one line before any command', () => {
    expect(() => runShellIn(rootsClosed)).toThrow(
      `shell commands would run as nobody (uid 65534), who cannot enter the working directory ${rootsClosed}: pass --shell-user with a user who can (--shell-user root: as root)`,
    );
    expect(() => runShellIn(owned, { shellUser: 'no-such-user-37' })).toThrow("--shell-user: there is no user named 'no-such-user-37' here");
    expect(() => runShellIn(owned, { shellUser: 'a b' })).toThrow("--shell-user takes a user name or a uid, got 'a b'");
  });

  it("the sandbox's other promises hold as that user: a PID namespace, no credentials, no Unix socket, no capability", async () => {
    process.env['EXARCH_TEST_SECRET_TOKEN'] = 'tok-37-user';
    const socketPath = join(base, 'host.sock');
    const unix = createServer((socket) => socket.end('hello from a host socket\n'));
    await new Promise<void>((resolve) => unix.listen(socketPath, resolve));
    chmodSync(socketPath, 0o777);
    try {
      const client = `require('net').connect('${socketPath}').on('data', (d) => process.stdout.write(d)).on('error', (e) => console.log('refused: ' + e.code))`;
      const out = await shell(
        owned,
        [
          'ls /proc | grep -c "^[0-9]"',
          'env; tr "\\0" "\\n" < /proc/1/environ; tr "\\0" "\\n" < /proc/$PPID/environ',
          'grep -E "^Cap(Eff|Prm|Bnd)" /proc/self/status',
          `'${process.execPath}' -e "${client}"`,
        ].join('; '),
      );
      expect(Number(out.split('\n')[2])).toBeLessThan(10);
      expect(out).not.toContain('tok-37-user');
      expect(out).toMatch(/CapEff:\s+0+\n/);
      expect(out).toMatch(/CapPrm:\s+0+\n/);
      expect(out).toMatch(/CapBnd:\s+0+\n/);
      expect(out).toContain('refused: EPERM');
      // The same client as the same user reaches it outside the sandbox: the refusal is the sandbox's.
      const outside = await promisify(execFile)(process.execPath, ['-e', client], { uid: UNLISTED_UID, gid: UNLISTED_UID, encoding: 'utf8', timeout: 20_000 });
      expect(outside.stdout).toContain('hello from a host socket');
    } finally {
      delete process.env['EXARCH_TEST_SECRET_TOKEN'];
      await new Promise((resolve) => unix.close(resolve));
    }
  });
});
