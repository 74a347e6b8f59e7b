import { execFileSync } from 'node:child_process';
import { closeSync, constants, lstatSync, mkdirSync, openSync, readdirSync, readFileSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { makeWorkspace, type Workspace } from '../../../support/workspaceFixture.js';
import { within } from '../../../support/until.js';

/**
 * write_file against a target swapped between its checks: the swap is real (on a real temporary
 * directory), only its moment is chosen, by running it just before the tool's own `open` or
 * `rename` of that name. What only a concurrent process could do otherwise becomes a test that
 * fails the same way every time.
 */

type Hook = (file: string) => void;
const swap = vi.hoisted(() => ({ beforeCheckOpen: undefined as Hook | undefined, beforeRename: undefined as Hook | undefined }));

vi.mock('node:fs/promises', async (importOriginal) => {
  const real = await importOriginal<typeof import('node:fs/promises')>();
  const { constants: flags } = await import('node:fs');
  /** Runs `hook` once, if it is armed. */
  const fire = (which: 'beforeCheckOpen' | 'beforeRename', file: string): void => {
    const hook = swap[which];
    swap[which] = undefined;
    hook?.(file);
  };
  return {
    ...real,
    // The check open of an existing target: write-only, never creating.
    open: (file: Parameters<typeof real.open>[0], mode?: string | number, perms?: number) => {
      if (typeof mode === 'number' && (mode & flags.O_WRONLY) !== 0 && (mode & flags.O_CREAT) === 0) fire('beforeCheckOpen', String(file));
      return real.open(file, mode, perms);
    },
    rename: (from: Parameters<typeof real.rename>[0], to: Parameters<typeof real.rename>[1]) => {
      fire('beforeRename', String(to));
      return real.rename(from, to);
    },
  };
});

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
  writeFileSync(path.join(ws.root, 'f.txt'), 'old');
  writeFileSync(path.join(ws.outside, 'secret.txt'), 'outside');
});
afterEach(async () => {
  swap.beforeCheckOpen = undefined;
  swap.beforeRename = undefined;
  await ws.remove();
});

const target = (): string => path.join(ws.root, 'f.txt');
/** Replaces the target by a FIFO, as another process could. */
const fifo = (): void => {
  unlinkSync(target());
  execFileSync('mkfifo', [target()]);
};
const write = (): Promise<string> =>
  within(
    ws.call('write_file', { path: 'f.txt', content: 'new' }).catch((error: unknown) => `error: ${(error as Error).message}`),
    10_000,
    'write_file',
  );
const leftovers = (): string[] => readdirSync(ws.root).filter((name) => name.startsWith('.exarch-write-'));

describe('a target swapped after it was found to be a regular file', () => {
  it('for a FIFO nobody reads: refused at once, never waited on, the FIFO left as it was', async () => {
    swap.beforeCheckOpen = fifo;
    expect(await write()).toBe("error: refused: 'f.txt' is a FIFO, not a regular file; write_file only writes regular files");
    expect(lstatSync(target()).isFIFO()).toBe(true);
    expect(leftovers()).toEqual([]);
  });

  it('for a FIFO someone reads: refused by what the opened descriptor is, nothing written into it', async () => {
    let reader: number | undefined;
    swap.beforeCheckOpen = () => {
      fifo();
      reader = openSync(target(), constants.O_RDONLY | constants.O_NONBLOCK);
    };
    try {
      expect(await write()).toBe("error: refused: 'f.txt' is a FIFO, not a regular file; write_file only writes regular files");
      expect(lstatSync(target()).isFIFO()).toBe(true);
    } finally {
      if (reader !== undefined) closeSync(reader);
    }
  });

  it('for a symlink to a file outside: refused as changed, the outside file and the link untouched', async () => {
    swap.beforeCheckOpen = () => {
      unlinkSync(target());
      symlinkSync(path.join(ws.outside, 'secret.txt'), target());
    };
    expect(await write()).toBe("error: refused: 'f.txt' changed while it was being opened (a part of it was replaced, perhaps by a symlink)");
    expect(lstatSync(target()).isSymbolicLink()).toBe(true);
    expect(readFileSync(path.join(ws.outside, 'secret.txt'), 'utf8')).toBe('outside');
  });

  it('for a directory, just before the new content is renamed over it: refused as a directory, no temporary file left', async () => {
    swap.beforeRename = () => {
      unlinkSync(target());
      mkdirSync(target());
    };
    await expect(ws.call('write_file', { path: 'f.txt', content: 'new' })).rejects.toMatchObject({
      kind: 'wrong-type',
      message: "'f.txt' is a directory, not a file",
    });
    expect(lstatSync(target()).isDirectory()).toBe(true);
    expect(leftovers()).toEqual([]);
  });
});
