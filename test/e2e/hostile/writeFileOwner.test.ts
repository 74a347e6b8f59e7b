import { execFileSync } from 'node:child_process';
import { chmod, chown, mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canSwitchUser, NOBODY, UNLISTED_UID } from '../../support/asUser.js';
import { makeWorkspace, type Workspace } from '../../support/workspaceFixture.js';

/**
 * Issue 37, where the sandbox's user meets `write_file`: run as root, exarch runs sandboxed commands
 * as the workspace's owner, but `write_file` (which replaces a file with a new one) made every file
 * and directory it wrote root's. The owner's own commands then could not change a file an agent
 * had just written, nor add to a directory it had made, and a file of someone else's in the
 * workspace, rewritten, became root's. Only root can give files away, so these run as root (CI
 * does); elsewhere they are skipped with one line.
 */

const onCi = (process.env['CI'] ?? '') !== '' && process.env['CI'] !== '0' && process.env['CI']?.toLowerCase() !== 'false';
if (!canSwitchUser) {
  if (onCi) throw new Error('test/e2e/hostile/writeFileOwner.test.ts runs as root under CI');
  process.stderr.write('skipping test/e2e/hostile/writeFileOwner.test.ts: only root writes files for another user\n');
}

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
  await chown(ws.root, NOBODY, NOBODY);
  // The fixture's base is root's 0700 temporary directory: let nobody pass through it to its workspace.
  await chmod(ws.base, 0o711);
});
afterEach(async () => {
  await ws.remove();
});

const ownerOf = async (file: string): Promise<[number, number]> => {
  const stats = await stat(path.join(ws.root, file));
  return [stats.uid, stats.gid];
};

describe.runIf(canSwitchUser)('write_file run by root in someone’s workspace', () => {
  it('a new file and the directories made for it belong to the directory’s owner, not root', async () => {
    await ws.call('write_file', { path: 'src/deep/notes.txt', content: 'hello' });
    expect(await ownerOf('src')).toEqual([NOBODY, NOBODY]);
    expect(await ownerOf('src/deep')).toEqual([NOBODY, NOBODY]);
    expect(await ownerOf('src/deep/notes.txt')).toEqual([NOBODY, NOBODY]);
    // The owner's commands can change it: the kernel says so for nobody itself.
    execFileSync('setpriv', [
      '--reuid',
      String(NOBODY),
      '--regid',
      String(NOBODY),
      '--clear-groups',
      'sh',
      '-c',
      `echo more >> '${path.join(ws.root, 'src/deep/notes.txt')}'`,
    ]);
  });

  it('a rewritten file keeps its owner and its bits', async () => {
    await writeFile(path.join(ws.root, 'theirs.txt'), 'old', { mode: 0o640 });
    await chown(path.join(ws.root, 'theirs.txt'), UNLISTED_UID, UNLISTED_UID);
    await ws.call('write_file', { path: 'theirs.txt', content: 'new' });
    expect(await ownerOf('theirs.txt')).toEqual([UNLISTED_UID, UNLISTED_UID]);
    expect((await stat(path.join(ws.root, 'theirs.txt'))).mode & 0o777).toBe(0o640);
  });

  it('in a directory of root’s inside it, what it makes stays root’s', async () => {
    await mkdir(path.join(ws.root, 'build'));
    await ws.call('write_file', { path: 'build/out/x.txt', content: 'x' });
    expect(await ownerOf('build/out')).toEqual([0, 0]);
    expect(await ownerOf('build/out/x.txt')).toEqual([0, 0]);
  });
});
