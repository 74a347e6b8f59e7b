import { execFileSync } from 'node:child_process';
import { readdirSync, readlinkSync } from 'node:fs';
import { chmod, lstat, mkdir, readdir, readFile, readlink, stat, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceError, workspaceTools } from '../../../../src/tools/workspace/index.js';
import { makeDevices, makeWorkspace, type Workspace, withSocket } from '../../../support/workspaceFixture.js';

/** write_file: what ends up on disk, with which permission bits, and the targets it refuses. */

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
});
afterEach(async () => {
  await ws.remove();
});

const write = (file: string, content: string): Promise<string> => ws.call('write_file', { path: file, content });
const onDisk = (file: string): Promise<string> => readFile(path.join(ws.root, file), 'utf8');

/** What this process has open below `dir`, as the kernel lists it. */
function openBelow(dir: string): string[] {
  const open: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target === dir || target.startsWith(`${dir}/`)) open.push(target);
    } catch {
      // Closed since it was listed (the listing's own descriptor among them).
    }
  }
  return open;
}

describe('what it writes', () => {
  it('counts bytes, not characters, and leaves no temporary file behind', async () => {
    expect(await write('u.txt', 'é😀')).toBe('wrote 6 bytes to u.txt');
    expect(await write('empty.txt', '')).toBe('wrote 0 bytes to empty.txt');
    expect(await onDisk('u.txt')).toBe('é😀');
    expect(await onDisk('empty.txt')).toBe('');
    expect((await readdir(ws.root)).sort()).toEqual(['empty.txt', 'u.txt']);
  });

  it('a new file gets 0666 less the umask', async () => {
    await write('new.txt', 'n');
    expect((await stat(path.join(ws.root, 'new.txt'))).mode & 0o777).toBe(0o666 & ~process.umask());
  });

  it('a file written over keeps exactly its permission bits, read-only ones included', async () => {
    await writeFile(path.join(ws.root, 'ro.txt'), 'old');
    await chmod(path.join(ws.root, 'ro.txt'), 0o400);
    await writeFile(path.join(ws.root, 'wide.txt'), 'old');
    await chmod(path.join(ws.root, 'wide.txt'), 0o777);
    expect(await write('ro.txt', 'new')).toBe('wrote 3 bytes to ro.txt');
    expect(await write('wide.txt', 'new')).toBe('wrote 3 bytes to wide.txt');
    expect((await stat(path.join(ws.root, 'ro.txt'))).mode & 0o7777).toBe(0o400);
    expect((await stat(path.join(ws.root, 'wide.txt'))).mode & 0o7777).toBe(0o777);
    expect(await onDisk('ro.txt')).toBe('new');
  });

  it('through a symlink inside, the target is replaced and the link stays a link', async () => {
    await mkdir(path.join(ws.root, 'real'));
    await writeFile(path.join(ws.root, 'real', 'f.txt'), 'old');
    await symlink('real/f.txt', path.join(ws.root, 'link'));
    expect(await write('link', 'new')).toBe('wrote 3 bytes to link');
    expect(await onDisk('real/f.txt')).toBe('new');
    expect(await readlink(path.join(ws.root, 'link'))).toBe('real/f.txt');
    expect(await readdir(path.join(ws.root, 'real'))).toEqual(['f.txt']);
  });

  it('missing parents are made, even several levels and below an existing directory', async () => {
    await mkdir(path.join(ws.root, 'have'));
    expect(await write('have/a/b/c.txt', 'deep')).toBe('wrote 4 bytes to have/a/b/c.txt');
    expect(await onDisk('have/a/b/c.txt')).toBe('deep');
    expect((await lstat(path.join(ws.root, 'have', 'a', 'b'))).isDirectory()).toBe(true);
  });

  it('holds nothing in the working directory open once it has answered, written or refused', async () => {
    await writeFile(path.join(ws.root, 'old.txt'), 'old');
    await write('old.txt', 'new');
    await write('a/b/new.txt', 'new');
    await expect(write('a', 'x')).rejects.toThrow(/is a directory/);
    expect(openBelow(ws.base)).toEqual([]);
  });

  it('a call aborted while it runs writes nothing', async () => {
    const controller = new AbortController();
    const pending = ws.call('write_file', { path: 'late.txt', content: 'x' }, controller.signal);
    controller.abort();
    await expect(pending).rejects.toThrow(/aborted/);
    expect(await readdir(ws.root)).toEqual([]);
  });

  it('an aborted call writes nothing', async () => {
    const controller = new AbortController();
    controller.abort(new Error('cancel'));
    const tools = workspaceTools({ root: ws.root, allowWrite: true });
    const tool = tools.find((t) => t.name === 'write_file');
    const prepared = tool?.prepare({ path: 'x/never.txt', content: 'x' });
    if (prepared === undefined || !prepared.ok) throw new Error('cannot prepare write_file');
    await expect(prepared.value({ agent: { name: 'root', path: ['root'], depth: 0, id: 'root' }, toolUseId: 't', signal: controller.signal })).rejects.toThrow(
      /^cancel$/,
    );
    expect(await readdir(ws.root)).toEqual([]);
  });
});

describe('what it refuses', () => {
  it('each refusal carries its kind', async () => {
    await mkdir(path.join(ws.root, 'd'));
    await writeFile(path.join(ws.root, 'f'), 'f');
    await symlink('ghost/../x.txt', path.join(ws.root, 'weird'));
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    const kindOf = (file: string): Promise<unknown> =>
      write(file, 'x').then(
        () => 'no error',
        (error: unknown) => (error instanceof WorkspaceError ? error.kind : String(error)),
      );
    expect(await Promise.all(['d', '.', 'f/x/y', 'weird', 'pipe'].map(kindOf))).toEqual(['wrong-type', 'wrong-type', 'not-found', 'not-found', 'refused']);
    await expect(write('weird', 'x')).rejects.toThrow(/^no such file: weird$/);
  });

  it('a directory, and the working directory itself, each in its own words', async () => {
    await mkdir(path.join(ws.root, 'd'));
    await expect(write('d', 'x')).rejects.toThrow(/^'d' is a directory, not a file$/);
    await expect(write('.', 'x')).rejects.toThrow(/^'\.' is the working directory itself, not a file$/);
    await expect(write('d/..', 'x')).rejects.toThrow(/^'d\/\.\.' is the working directory itself, not a file$/);
  });

  it('a path through a file', async () => {
    await writeFile(path.join(ws.root, 'f'), 'f');
    await expect(write('f/x/y', 'x')).rejects.toThrow(/^cannot write 'f\/x\/y': a part of its directory path is a file$/);
    expect(await onDisk('f')).toBe('f');
  });

  it('a FIFO without a reader, left a FIFO', async () => {
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    await expect(write('pipe', 'x')).rejects.toThrow(/^refused: 'pipe' is a FIFO, not a regular file; write_file only writes regular files$/);
    expect((await lstat(path.join(ws.root, 'pipe'))).isFIFO()).toBe(true);
  });

  it('a socket', async () => {
    await withSocket(path.join(ws.root, 'sock'), () =>
      expect(write('sock', 'x')).rejects.toThrow(/^refused: 'sock' is a socket, not a regular file; write_file only writes regular files$/),
    );
  });

  it('character and block devices, never opened', async (context) => {
    makeDevices(ws.root, context);
    await expect(write('chr', 'x')).rejects.toThrow(/^refused: 'chr' is a character device, not a regular file; write_file only writes regular files$/);
    await expect(write('blk', 'x')).rejects.toThrow(/^refused: 'blk' is a block device, not a regular file; write_file only writes regular files$/);
  });

  it('a symlink to a directory is a directory', async () => {
    await mkdir(path.join(ws.root, 'd'));
    await symlink('d', path.join(ws.root, 'to-d'));
    await expect(write('to-d', 'x')).rejects.toThrow(/^'to-d' is a directory, not a file$/);
  });
});
