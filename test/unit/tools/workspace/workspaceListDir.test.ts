import { execFileSync } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceError } from '../../../../src/tools/workspace/index.js';
import { makeWorkspace, type Workspace } from '../../../support/workspaceFixture.js';

/** list_dir: what it lists, in which order, how deep, and the notes and errors it answers with. */

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
});
afterEach(async () => {
  await ws.remove();
});

const list = (input: Record<string, unknown>): Promise<string> => ws.call('list_dir', input);

async function tree(files: readonly string[]): Promise<void> {
  for (const file of files) {
    const abs = path.join(ws.root, file);
    if (file.endsWith('/')) await mkdir(abs, { recursive: true });
    else {
      await mkdir(path.dirname(abs), { recursive: true });
      await writeFile(abs, '');
    }
  }
}

describe('order and shape', () => {
  it('an empty path lists the working directory', async () => {
    await tree(['a.txt', 'd/']);
    expect(await list({ path: '' })).toBe('a.txt\nd/');
  });

  it('each directory sorted by code unit, its contents right after it', async () => {
    await tree(['b', 'a/x', 'a-b', 'B', 'a.txt', 'a/sub/y', 'empty/']);
    expect(await list({ recursive: true })).toBe(['B', 'a/', 'a/sub/', 'a/sub/y', 'a/x', 'a-b', 'a.txt', 'b', 'empty/'].join('\n'));
  });

  it('code-unit order, not the byte order the file system hands out: an astral character sorts before U+FF01', async () => {
    await tree(['x\uFF01', 'x\u{1F600}', 'x\uE000']);
    expect(await list({})).toBe('x\u{1F600}\nx\uE000\nx\uFF01');
  });

  it('an empty directory, and an empty working directory, say so', async () => {
    await tree(['empty/']);
    expect(await list({ path: 'empty' })).toBe('(empty/ is empty)');
    expect(await list({ path: 'empty', recursive: true })).toBe('(empty/ is empty)');
    await ws.remove();
    await mkdir(ws.root, { recursive: true });
    expect(await list({})).toBe('(. is empty)');
  });

  it('a FIFO is listed by name like a file; a dangling symlink shows its target', async () => {
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    await symlink('no/such/target', path.join(ws.root, 'dangling'));
    expect(await list({})).toBe('dangling -> no/such/target\npipe');
  });

  it('a symlink to a directory is shown with its target and not expanded', async () => {
    await tree(['real/inner']);
    await symlink('real', path.join(ws.root, 'link'));
    expect(await list({ recursive: true })).toBe('link -> real\nreal/\nreal/inner');
  });
});

describe('how deep it goes', () => {
  beforeEach(async () => {
    await tree(['one/two/three/four', 'top']);
  });

  it('without recursive only the directory itself, even when a depth is given with recursive false', async () => {
    expect(await list({})).toBe('one/\ntop');
    expect(await list({ recursive: false, depth: 3 })).toBe('one/\ntop');
  });

  it('a depth alone lists that many levels', async () => {
    expect(await list({ depth: 2 })).toBe('one/\none/two/\ntop');
  });

  it('recursive without a depth lists the whole tree', async () => {
    expect(await list({ recursive: true })).toBe('one/\none/two/\none/two/three/\none/two/three/four\ntop');
  });

  it('recursive with a depth stops there without a note', async () => {
    expect(await list({ recursive: true, depth: 3 })).toBe('one/\none/two/\none/two/three/\ntop');
    expect(await list({ path: 'one', recursive: true, depth: 1 })).toBe('one/two/');
  });

  it('a tree deeper than 64 levels is listed to level 64, naming the directory not expanded', async () => {
    const deep = Array.from({ length: 66 }, () => 'd').join('/');
    await tree([`${deep}/leaf`]);
    const lines = (await list({ path: 'one', recursive: true })).split('\n');
    expect(lines).toEqual(['one/two/', 'one/two/three/', 'one/two/three/four']);
    const listing = (await list({ recursive: true })).split('\n');
    const level64 = Array.from({ length: 64 }, () => 'd').join('/');
    expect(listing.filter((line) => line.startsWith('d')).at(-1)).toBe(`${level64}/`);
    expect(listing.at(-1)).toBe(`[not expanded, deeper than 64 levels: ${level64}/ — list one explicitly to see inside]`);
    expect(await list({ path: level64, recursive: true })).toBe(`${level64}/d/\n${level64}/d/d/\n${level64}/d/d/leaf`);
  });
});

describe('directories listed but not expanded', () => {
  it('.git and node_modules are not expanded when recursive, and are not noted when not recursive', async () => {
    await tree(['.git/HEAD', 'node_modules/x/index.js', 'src/a.ts']);
    expect(await list({})).toBe('.git/\nnode_modules/\nsrc/');
    expect(await list({ recursive: true, depth: 1 })).toBe('.git/\nnode_modules/\nsrc/');
    expect(await list({ recursive: true })).toBe(
      '.git/\nnode_modules/\nsrc/\nsrc/a.ts\n[not expanded: .git/, node_modules/ — list one explicitly to see inside]',
    );
  });

  it('the note names ten and counts the rest', async () => {
    const names = Array.from({ length: 12 }, (_, i) => `p${String(i).padStart(2, '0')}`);
    await tree(names.map((name) => `${name}/node_modules/`));
    const listing = (await list({ recursive: true })).split('\n');
    expect(listing.at(-1)).toBe(
      `[not expanded: ${names
        .slice(0, 10)
        .map((name) => `${name}/node_modules/`)
        .join(', ')} and 2 more — list one explicitly to see inside]`,
    );
  });

  it('exactly ten are all named', async () => {
    const names = Array.from({ length: 10 }, (_, i) => `p${i}`);
    await tree(names.map((name) => `${name}/.git/`));
    expect((await list({ recursive: true })).split('\n').at(-1)).toBe(
      `[not expanded: ${names.map((name) => `${name}/.git/`).join(', ')} — list one explicitly to see inside]`,
    );
  });
});

describe('what it refuses', () => {
  it('a missing directory, a path through a file, and a file', async () => {
    await tree(['file.txt']);
    await expect(list({ path: 'nope' })).rejects.toThrow(/^no such directory: nope$/);
    await expect(list({ path: 'nope/deeper' })).rejects.toThrow(/^no such directory: nope\/deeper$/);
    await expect(list({ path: 'file.txt/x' })).rejects.toThrow(/^no such directory: file\.txt\/x \(a part of the path is a file, not a directory\)$/);
    await expect(list({ path: 'file.txt' })).rejects.toThrow(/^'file\.txt' is a file, not a directory; use read_file to read it$/);
  });

  it('each refusal carries its kind', async () => {
    await tree(['file.txt']);
    const kindOf = (input: Record<string, unknown>): Promise<unknown> =>
      list(input).then(
        () => 'no error',
        (error: unknown) => (error instanceof WorkspaceError ? error.kind : String(error)),
      );
    expect(await Promise.all([{ path: 'nope' }, { path: 'file.txt/x' }, { path: 'file.txt' }].map(kindOf))).toEqual(['not-found', 'not-found', 'wrong-type']);
  });

  it('an aborted call lists nothing', async () => {
    await tree(['a']);
    const controller = new AbortController();
    controller.abort(new Error('stop now'));
    await expect(ws.call('list_dir', {}, controller.signal)).rejects.toThrow(/^stop now$/);
  });

  it('a call aborted while it runs rejects with the abort itself, not a file-system fault', async () => {
    await tree(['a/b', 'c']);
    const controller = new AbortController();
    const pending = ws.call('list_dir', { recursive: true }, controller.signal);
    controller.abort();
    const error = await pending.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(Error);
    expect((error as Error).name).toBe('AbortError');
    expect(error).not.toBeInstanceOf(WorkspaceError);
  });

  it('a listing of exactly 1,000 entries is whole, with no note', async () => {
    await mkdir(path.join(ws.root, 'many'));
    await Promise.all(Array.from({ length: 1_000 }, (_, i) => writeFile(path.join(ws.root, 'many', `f${String(i).padStart(4, '0')}`), '')));
    const listing = (await list({ path: 'many' })).split('\n');
    expect(listing).toHaveLength(1_000);
    expect(listing.at(-1)).toBe('many/f0999');
  });
});

describe('directories it cannot read', () => {
  it('a directory whose path outgrows PATH_MAX is named as not read, the rest still listed', async () => {
    // 20 levels of 250-character names: about 5,000 bytes, past Linux's 4,096. Made and removed by
    // mkdir -p and rm -rf, which go one level at a time; Node names each path whole.
    const level = 'l'.repeat(250);
    await writeFile(path.join(ws.root, 'z.txt'), '');
    try {
      execFileSync('mkdir', ['-p', Array.from({ length: 20 }, () => level).join('/')], { cwd: ws.root });
      const lines = (await list({ recursive: true })).split('\n');
      const listed = lines.filter((line) => line.startsWith(level));
      // Every directory down to the first one that could not be read, each one level below the one before.
      expect(listed).toEqual(listed.map((_, i) => `${level}/`.repeat(i + 1)));
      expect(listed.length).toBeGreaterThan(10);
      expect(listed.length).toBeLessThan(20);
      expect(lines.slice(listed.length)).toEqual(['z.txt', `[could not read: ${listed.at(-1)}]`]);
    } finally {
      execFileSync('rm', ['-rf', path.join(ws.root, level)]);
    }
  });
});
