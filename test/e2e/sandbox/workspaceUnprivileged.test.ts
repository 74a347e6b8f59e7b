import { chmod, mkdir, readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { callAsNobody, canSwitchUser, giveToNobody, NOBODY } from '../../support/asUser.js';
import { makeWorkspace, type Workspace } from '../../support/workspaceFixture.js';

/**
 * The workspace tools as a user the file system says no to: what they report when permission is
 * denied, and that a refused write leaves the files as they were. (Root is never denied, so these
 * run the tools in a child process as `nobody`.)
 */

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
  if (canSwitchUser) await giveToNobody(ws.base, ws.root);
});
afterEach(async () => {
  await ws.remove();
});

const inRoot = (...parts: string[]): string => path.join(ws.root, ...parts);

describe.skipIf(!canSwitchUser)('write_file as a user without write permission (needs root to switch to uid 65534)', () => {
  it('a read-only file of its own is not written over: permission denied, the old content kept', async () => {
    await writeFile(inRoot('ro.txt'), 'old');
    await giveToNobody(inRoot('ro.txt'));
    await chmod(inRoot('ro.txt'), 0o400);
    expect(await callAsNobody(ws.root, 'write_file', { path: 'ro.txt', content: 'new' })).toEqual({ error: 'permission denied: ro.txt', kind: 'io' });
    expect(await readFile(inRoot('ro.txt'), 'utf8')).toBe('old');
  });

  it('a directory it may not write to: permission denied and nothing made in it', async () => {
    await mkdir(inRoot('locked'));
    await giveToNobody(inRoot('locked'));
    await chmod(inRoot('locked'), 0o555);
    expect(await callAsNobody(ws.root, 'write_file', { path: 'locked/f.txt', content: 'x' })).toEqual({ error: 'permission denied: locked/f.txt', kind: 'io' });
    expect(await callAsNobody(ws.root, 'write_file', { path: 'locked/sub/f.txt', content: 'x' })).toEqual({
      error: 'permission denied: locked/sub/f.txt',
      kind: 'io',
    });
    expect(await readdir(inRoot('locked'))).toEqual([]);
  });

  it('a writable file of root in a sticky directory cannot be replaced: permission denied, no temporary file left', async () => {
    // The sticky bit lets anyone make a file here but lets only the owner rename over root's file.
    await mkdir(inRoot('shared'));
    await chmod(inRoot('shared'), 0o1777);
    await writeFile(inRoot('shared', 'f.txt'), 'root');
    await chmod(inRoot('shared', 'f.txt'), 0o666);
    expect(await callAsNobody(ws.root, 'write_file', { path: 'shared/f.txt', content: 'nobody' })).toEqual({
      error: 'permission denied: shared/f.txt',
      kind: 'io',
    });
    expect(await readdir(inRoot('shared'))).toEqual(['f.txt']);
    expect(await readFile(inRoot('shared', 'f.txt'), 'utf8')).toBe('root');
  });

  it('a file it may write is written, owned by it', async () => {
    expect(await callAsNobody(ws.root, 'write_file', { path: 'mine/f.txt', content: 'mine' })).toEqual({ text: 'wrote 4 bytes to mine/f.txt' });
    expect(await readFile(inRoot('mine', 'f.txt'), 'utf8')).toBe('mine');
    expect((await stat(inRoot('mine', 'f.txt'))).uid).toBe(NOBODY);
  });
});

describe.skipIf(!canSwitchUser)('list_dir as a user without read permission (needs root to switch to uid 65534)', () => {
  it('a directory it may not read is listed and named as not read, its siblings still listed', async () => {
    await mkdir(inRoot('closed'));
    await writeFile(inRoot('closed', 'hidden.txt'), '');
    await chmod(inRoot('closed'), 0o700);
    await writeFile(inRoot('open.txt'), '');
    expect(await callAsNobody(ws.root, 'list_dir', { recursive: true })).toEqual({ text: 'closed/\nopen.txt\n[could not read: closed/]' });
  });

  it('a directory it may not read, named itself: permission denied', async () => {
    await mkdir(inRoot('closed'));
    await chmod(inRoot('closed'), 0o700);
    expect(await callAsNobody(ws.root, 'list_dir', { path: 'closed' })).toEqual({ error: 'permission denied: closed', kind: 'io' });
  });
});

describe.skipIf(!canSwitchUser)('search_files as a user without read permission (needs root to switch to uid 65534)', () => {
  it('a file and a directory it may not read are passed over, like grep -s, the rest searched', async () => {
    await writeFile(inRoot('open.txt'), 'needle\n');
    await writeFile(inRoot('secret.txt'), 'needle\n');
    await chmod(inRoot('secret.txt'), 0o600);
    await mkdir(inRoot('closed'));
    await writeFile(inRoot('closed', 'inner.txt'), 'needle\n');
    await chmod(inRoot('closed'), 0o700);
    expect(await callAsNobody(ws.root, 'search_files', { pattern: 'needle' })).toEqual({ text: 'open.txt:1: needle' });
  });
});
