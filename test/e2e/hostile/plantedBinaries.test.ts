import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { systemBinary } from '../../../src/tools/workspace/systemBinary.js';
import { startAnthropicServer, historyHandler } from '../../support/anthropicServer.js';
import { canSwitchUser, NOBODY } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { call, exarch, onCleanup, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 37 (seams: the sandbox × the host's own programs): exarch ran git (to read
 * `core.hooksPath`) and getent (to find who runs sandboxed commands) by name, through PATH. Under
 * `npx` or `npm exec`, PATH starts with `<workspace>/node_modules/.bin`, a directory every agent
 * can write: a `git` planted there ran on the host, as exarch, outside any sandbox. Now every
 * program exarch runs itself is found in the system's directories first, then only on PATH
 * entries outside the working directory.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/plantedBinaries.test.ts');

/** The programs exarch runs itself on the host. */
const PROGRAMS = ['git', 'getent', 'bwrap', 'prlimit'];

/** `<dir>/<name>`: a stand-in that leaves `<markers>/<name>` behind, then does what the real one does. */
function plant(dir: string, name: string, markers: string): void {
  const real = ['/usr/bin', '/bin', '/usr/sbin', '/sbin'].map((d) => join(d, name)).find((p) => existsSync(p)) ?? '/bin/false';
  writeFileSync(join(dir, name), `#!/bin/sh\ntouch '${join(markers, name)}'\nexec '${real}' "$@"\n`);
  chmodSync(join(dir, name), 0o755);
}

describe.skipIf(BWRAP === undefined)('programs planted in the workspace’s node_modules/.bin, first on PATH as under npx', () => {
  it('exarch run --allow-shell in a repository runs none of them on the host', async () => {
    const cwd = workdir();
    const markers = workdir();
    execFileSync('/usr/bin/git', ['init', '-q', cwd]);
    const bin = join(cwd, 'node_modules', '.bin');
    mkdirSync(bin, { recursive: true });
    for (const name of PROGRAMS) plant(bin, name, markers);
    // As a person's project is theirs: exarch, as root, looks its owner up (getent) to run commands as them.
    if (canSwitchUser) execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, cwd]);
    const server = await startAnthropicServer(
      historyHandler({ root: [stream({ toolCalls: [call('run_shell', { command: 'echo ran' })] }), stream({ text: 'done' })] }),
    );
    onCleanup(() => server.close());
    const result = await exarch(['run', '--allow-shell', '--no-store', 'Go'], {
      cwd,
      server,
      env: { PATH: `${bin}:${process.env['PATH'] ?? '/usr/bin:/bin'}`, EXARCH_STATE_DIR: join(markers, 'state') },
    });
    expect(result.code, result.stderr).toBe(0);
    expect(result.stdout).toBe('done\n');
    // The command did run (in the sandbox), so every program was needed.
    expect(JSON.stringify(server.requests.at(-1)?.body.messages.at(-1))).toContain('ran');
    expect(readdirSync(markers).filter((name) => name !== 'state')).toEqual([]);
  });
});

describe('systemBinary: where exarch finds a program it runs', () => {
  // A name no system directory has, so that only PATH can supply it.
  const name = `exarch-planted-probe-${process.pid}`;

  it('skips PATH entries inside the working directory, through a symlink too, and relative ones; takes one outside', () => {
    const cwd = workdir();
    const elsewhere = workdir();
    const inside = join(cwd, 'node_modules', '.bin');
    mkdirSync(inside, { recursive: true });
    plant(inside, name, elsewhere);
    // Outside by name, inside in fact.
    const link = join(elsewhere, 'link-to-workspace-bin');
    symlinkSync(inside, link);
    const options = { workdir: cwd, candidates: [] };
    expect(systemBinary(name, { ...options, env: { PATH: `${inside}:${link}:node_modules/.bin:.` } })).toBeUndefined();
    // A symlink in a directory outside that leads to the workspace's program counts as the workspace's.
    const outside = join(elsewhere, 'bin');
    mkdirSync(outside);
    symlinkSync(join(inside, name), join(outside, name));
    expect(systemBinary(name, { ...options, env: { PATH: `${inside}:${outside}` } })).toBeUndefined();
    const real = join(elsewhere, 'real-bin');
    mkdirSync(real);
    plant(real, name, elsewhere);
    expect(systemBinary(name, { ...options, env: { PATH: `${inside}:${link}:${real}` } })).toBe(join(real, name));
  });

  it('looks in the system’s directories before PATH', () => {
    const cwd = workdir();
    const dir = workdir();
    plant(dir, 'git', dir);
    expect(systemBinary('git', { workdir: cwd, env: { PATH: dir } })).toMatch(/^\/(usr\/)?bin\/git$/);
    // A working directory of / (a container's default) holds the system's directories: they are still the system's.
    expect(systemBinary('git', { workdir: '/', env: { PATH: '' } })).toMatch(/^\/(usr\/)?bin\/git$/);
  });
});
