import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { probeBubblewrap, sandboxArgs } from '../../../src/tools/workspace/shellSandbox.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';

/**
 * Finding bubblewrap and trying it before the first command: stand-in `bwrap` scripts play a
 * bubblewrap that works, one that refuses and one that says nothing; the real one is found where
 * Debian installs it. And the arguments each sandboxed command gets.
 */

const BWRAP = requireBubblewrap('test/e2e/sandbox/shellSandboxSetup.test.ts');

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'exarch-bwrap-probe-'));
});
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
});

const platform = Object.getOwnPropertyDescriptor(process, 'platform') as PropertyDescriptor;
const tmpdirBefore = process.env['TMPDIR'];
afterEach(() => {
  Object.defineProperty(process, 'platform', platform);
  if (tmpdirBefore === undefined) delete process.env['TMPDIR'];
  else process.env['TMPDIR'] = tmpdirBefore;
});

/** An executable `bwrap` in `dir/name/`, a /bin/sh script running `body`. */
function fakeBwrap(name: string, body: string): string {
  mkdirSync(path.join(dir, name), { recursive: true });
  const file = path.join(dir, name, 'bwrap');
  writeFileSync(file, `#!/bin/sh\n${body}\n`);
  chmodSync(file, 0o755);
  return file;
}

describe('finding bubblewrap', () => {
  it('takes the first executable candidate and tries it with the seccomp program on descriptor 3', () => {
    const works = fakeBwrap('works', 'here=$(dirname "$0"); printf "%s\\n" "$@" > "$here/args"; wc -c <&3 > "$here/fd3"; exit 0');
    const notExecutable = path.join(dir, 'plain-file');
    writeFileSync(notExecutable, '#!/bin/sh\nexit 0\n');
    expect(probeBubblewrap({ PATH: '' }, [path.join(dir, 'missing', 'bwrap'), notExecutable, works])).toEqual({ path: works });
    // biome-ignore format: one flag and its values a line
    expect(readFileSync(path.join(dir, 'works', 'args'), 'utf8').trim().split('\n')).toEqual([
      '--seccomp', '3',
      '--ro-bind', '/', '/',
      '--dev', '/dev',
      '--proc', '/proc',
      '--tmpfs', '/tmp',
      '--bind', '/', '/',
      '--chdir', '/',
      '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-net',
      '--cap-drop', 'ALL',
      '--die-with-parent',
      '--new-session',
      '/bin/true',
    ]);
    // Thirteen eight-byte instructions.
    expect(readFileSync(path.join(dir, 'works', 'fd3'), 'utf8').trim()).toBe('104');
  });

  it('leaves no file and no open descriptor behind after the trial', () => {
    const works = fakeBwrap('tidy', 'exit 0');
    const scratch = mkdtempSync(path.join(dir, 'scratch-'));
    process.env['TMPDIR'] = scratch;
    expect(probeBubblewrap({ PATH: '' }, [works])).toEqual({ path: works });
    expect(readdirSync(scratch)).toEqual([]);
    const open = readdirSync('/proc/self/fd').map((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        return '';
      }
    });
    expect(open.filter((target) => target.startsWith(scratch))).toEqual([]);
  });

  it('looks on PATH after the candidates, skipping directories without one', () => {
    const onPath = fakeBwrap('on-path', 'exit 0');
    const empty = path.join(dir, 'empty-dir');
    mkdirSync(empty, { recursive: true });
    expect(probeBubblewrap({ PATH: `${empty}::${path.dirname(onPath)}` }, [])).toEqual({ path: onPath });
  });

  it('says bubblewrap was not found when neither the candidates nor PATH have it', () => {
    expect(probeBubblewrap({ PATH: path.join(dir, 'empty-dir') }, [path.join(dir, 'nowhere', 'bwrap')])).toEqual({
      reason: 'bubblewrap (bwrap) was not found',
    });
    expect(probeBubblewrap({}, [])).toEqual({ reason: 'bubblewrap (bwrap) was not found' });
  });

  it('gives the first line bubblewrap printed when its trial fails', () => {
    const refuses = fakeBwrap('refuses', 'echo >&2; echo "bwrap: No permissions to creating new namespace" >&2; echo "second line" >&2; exit 1');
    expect(probeBubblewrap({ PATH: '' }, [refuses])).toEqual({
      reason: `bubblewrap at ${refuses} cannot start a sandbox here (bwrap: No permissions to creating new namespace)`,
      trial: true,
    });
  });

  it('says no reason was given when a failing bubblewrap prints nothing', () => {
    const silent = fakeBwrap('silent', 'exit 3');
    expect(probeBubblewrap({ PATH: '' }, [silent])).toEqual({
      reason: `bubblewrap at ${silent} cannot start a sandbox here (no reason given)`,
      trial: true,
    });
  });

  it('is Linux-only', () => {
    Object.defineProperty(process, 'platform', { value: 'darwin', configurable: true });
    expect(probeBubblewrap({ PATH: '' }, [fakeBwrap('mac', 'exit 0')])).toEqual({ reason: 'bubblewrap is Linux-only (this is darwin)' });
  });

  it.skipIf(BWRAP !== '/usr/bin/bwrap')("finds Debian's /usr/bin/bwrap without PATH", () => {
    expect(probeBubblewrap({ PATH: '' })).toEqual({ path: '/usr/bin/bwrap' });
  });
});

describe('bubblewrapSandbox', () => {
  it.skipIf(BWRAP === undefined)('is the bubblewrap it found, with or without the network', async () => {
    vi.resetModules();
    const { bubblewrapSandbox } = await import('../../../src/tools/workspace/shellSandbox.js');
    expect(bubblewrapSandbox(true, { PATH: '' })).toMatchObject({ kind: 'bubblewrap', bwrap: BWRAP, network: true });
    expect(bubblewrapSandbox(false, { PATH: '' })).toMatchObject({ kind: 'bubblewrap', bwrap: BWRAP, network: false });
    // Every command is limited, by util-linux's prlimit, found where Debian installs it.
    const sandbox = bubblewrapSandbox(false, { PATH: '' });
    expect(sandbox.kind === 'bubblewrap' ? sandbox.limits?.command : undefined).toEqual([
      expect.stringMatching(/^\/(usr\/)?bin\/prlimit$/),
      expect.stringMatching(/^--nproc=\d+$/),
      expect.stringMatching(/^--data=\d+$/),
      expect.stringMatching(/^--fsize=\d+$/),
      expect.stringMatching(/^--cpu=\d+:\d+$/),
      expect.stringMatching(/^--nofile=\d+$/),
      '--',
    ]);
  });

  it('says how to get one or go without when none can be had, and probes only once', async () => {
    vi.resetModules();
    const { bubblewrapSandbox } = await import('../../../src/tools/workspace/shellSandbox.js');
    Object.defineProperty(process, 'platform', { value: 'darwin', configurable: true });
    const message =
      'run_shell runs commands in a bubblewrap sandbox, and bubblewrap is Linux-only (this is darwin): ' +
      'install it (apt-get install bubblewrap) or pass --allow-shell=unsandboxed to run commands without a sandbox';
    expect(() => bubblewrapSandbox(false)).toThrow(message);
    const error = (() => {
      try {
        bubblewrapSandbox(false);
      } catch (e) {
        return e;
      }
    })();
    expect(error).toMatchObject({ name: 'ShellSandboxError', kind: 'sandbox-unavailable', message });
    // On Linux again, the answer stands: the probe ran once.
    Object.defineProperty(process, 'platform', platform);
    expect(() => bubblewrapSandbox(false)).toThrow(message);
  });
});

describe('the arguments of a sandboxed command', () => {
  it('mount everything read-only, then a private /tmp, then the working directory read-write, and work in it', () => {
    // biome-ignore format: one flag and its values a line
    expect(sandboxArgs('/home/u/project', false)).toEqual([
      '--ro-bind', '/', '/',
      '--dev', '/dev',
      '--proc', '/proc',
      '--tmpfs', '/tmp',
      '--bind', '/home/u/project', '/home/u/project',
      '--chdir', '/home/u/project',
      '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-net',
      '--cap-drop', 'ALL',
      '--die-with-parent',
      '--new-session',
    ]);
  });

  it('keep the network when it is allowed, and read a seccomp program from descriptor 3 when asked', () => {
    const args = sandboxArgs('/w', true, true);
    expect(args.slice(0, 2)).toEqual(['--seccomp', '3']);
    expect(args).not.toContain('--unshare-net');
    expect(args.slice(2)).toEqual(sandboxArgs('/w', true));
  });
});
