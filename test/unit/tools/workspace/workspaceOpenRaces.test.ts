import { constants, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { within } from '../../../support/until.js';
import { makeWorkspace, type Workspace } from '../../../support/workspaceFixture.js';

/**
 * The walk to a workspace path (openInside.ts) against a path changed between two of its steps:
 * each swap is real (renames and links on a real temporary directory), only its moment is chosen,
 * by running it just before the tool's own call of that kind on that name. What only a concurrent
 * process could do otherwise fails the same way every time.
 */

type Call = 'open' | 'readlink';
type Swap = { readonly call: Call; readonly when: (file: string, flags: number) => boolean; readonly run: () => void };
const armed = vi.hoisted(() => ({ swaps: [] as Swap[] }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  /** Runs, once, the first armed swap that this call matches. */
  const fire = (call: Call, file: string, flags: number): void => {
    const index = armed.swaps.findIndex((swap) => swap.call === call && swap.when(file, flags));
    if (index < 0) return;
    const [swap] = armed.swaps.splice(index, 1);
    swap?.run();
  };
  return {
    ...real,
    open: (file: Parameters<typeof real.open>[0], flags?: string | number, mode?: number) => {
      fire('open', String(file), typeof flags === 'number' ? flags : 0);
      return real.open(file, flags, mode);
    },
    readlink: (file: Parameters<typeof real.readlink>[0]) => {
      fire('readlink', String(file), 0);
      return real.readlink(file);
    },
  };
});

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
  mkdirSync(path.join(ws.root, 'sub'));
});
afterEach(async () => {
  const unused = armed.swaps.length;
  armed.swaps = [];
  await ws.remove();
  // A swap that never ran would make its test check nothing.
  expect(unused, 'swaps armed but never run').toBe(0);
});

const inRoot = (...parts: string[]): string => path.join(ws.root, ...parts);
const endsWith = (name: string) => (file: string) => file.endsWith(`/${name}`);
const write = (file: string): Promise<string> =>
  within(
    ws
      .call('write_file', { path: file, content: 'new' })
      .catch((error: unknown) => `error (${String((error as { kind?: unknown }).kind)}): ${(error as Error).message}`),
    10_000,
    'write_file',
  );
const changed = (shown: string) => `error (refused): refused: '${shown}' changed while it was being opened (a part of it was replaced, perhaps by a symlink)`;
/** Moves `sub` away (kept inside the root) and puts `make()` in its place. */
const replaceSub = (make: (at: string) => void) => () => {
  renameSync(inRoot('sub'), inRoot('sub.moved'));
  make(inRoot('sub'));
};

describe('a directory on the path, swapped after its lstat and before its open', () => {
  it('for a symlink to a directory outside: refused as changed, nothing written outside', async () => {
    armed.swaps.push({
      call: 'open',
      when: (file, flags) => endsWith('sub')(file) && (flags & constants.O_DIRECTORY) !== 0,
      run: replaceSub((at) => symlinkSync(ws.outside, at)),
    });
    expect(await write('sub/f.txt')).toBe(changed('sub/f.txt'));
    expect(readdirSync(ws.outside)).toEqual([]);
  });

  it('for a regular file: refused as changed, the file left as it was', async () => {
    armed.swaps.push({
      call: 'open',
      when: (file, flags) => endsWith('sub')(file) && (flags & constants.O_DIRECTORY) !== 0,
      run: replaceSub((at) => writeFileSync(at, 'a file now')),
    });
    expect(await write('sub/f.txt')).toBe(changed('sub/f.txt'));
    expect(readFileSync(inRoot('sub'), 'utf8')).toBe('a file now');
  });
});

describe('a directory already opened, then moved away and replaced by a symlink to outside', () => {
  it('the file is written into the directory that was checked, by its descriptor, never outside', async () => {
    armed.swaps.push({
      call: 'open',
      when: (file, flags) => file.includes('.exarch-write-') && (flags & constants.O_CREAT) !== 0,
      run: replaceSub((at) => symlinkSync(ws.outside, at)),
    });
    expect(await write('sub/f.txt')).toBe('wrote 3 bytes to sub/f.txt');
    expect(readFileSync(inRoot('sub.moved', 'f.txt'), 'utf8')).toBe('new');
    expect(readdirSync(ws.outside)).toEqual([]);
  });
});

describe('a symlink on the path, swapped after its lstat and before it is read', () => {
  it('while walking (it resolves): replaced by a file, refused as changed', async () => {
    symlinkSync('sub', inRoot('ln'));
    armed.swaps.push({
      call: 'readlink',
      when: endsWith('ln'),
      run: () => {
        unlinkSync(inRoot('ln'));
        writeFileSync(inRoot('ln'), 'a file now');
      },
    });
    expect(await write('ln/f.txt')).toBe(changed('ln/f.txt'));
    expect(existsSync(inRoot('sub', 'f.txt'))).toBe(false);
  });

  it('while checking where a dangling one leads: replaced by a file, or removed, refused as changed', async () => {
    for (const after of [(at: string) => writeFileSync(at, 'a file now'), () => undefined]) {
      symlinkSync('new.txt', inRoot('dl'));
      armed.swaps.push({
        call: 'readlink',
        when: endsWith('dl'),
        run: () => {
          unlinkSync(inRoot('dl'));
          after(inRoot('dl'));
        },
      });
      expect(await write('dl')).toBe(changed('dl'));
      expect(existsSync(inRoot('new.txt'))).toBe(false);
      if (existsSync(inRoot('dl'))) unlinkSync(inRoot('dl'));
    }
  });
});
