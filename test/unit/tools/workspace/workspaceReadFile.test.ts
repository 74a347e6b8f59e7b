import { execFileSync } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceError } from '../../../../src/tools/workspace/index.js';
import { makeDevices, makeWorkspace, type Workspace, withSocket } from '../../../support/workspaceFixture.js';

/** read_file: whole files, parts of files, the budgets that cut them, and the files it refuses. */

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
});
afterEach(async () => {
  await ws.remove();
});

const read = (input: Record<string, unknown>): Promise<string> => ws.call('read_file', input);
const put = (file: string, content: string | Buffer): Promise<void> => writeFile(path.join(ws.root, file), content);

describe('a whole file', () => {
  it('is returned as it is, with or without a final newline', async () => {
    await put('nl.txt', 'a\nb\n');
    await put('no-nl.txt', 'a\nb');
    await put('only-nl.txt', '\n');
    await put('crlf.txt', 'a\r\nb\r\n');
    expect(await read({ path: 'nl.txt' })).toBe('a\nb\n');
    expect(await read({ path: 'no-nl.txt' })).toBe('a\nb');
    expect(await read({ path: 'only-nl.txt' })).toBe('\n');
    expect(await read({ path: 'crlf.txt' })).toBe('a\r\nb\r\n');
  });

  it('a file of more than one 64 KiB chunk is read across the chunk boundaries', async () => {
    const lines = Array.from({ length: 1_500 }, (_, i) => `${String(i + 1).padStart(5, '0')}${'.'.repeat(94)}`);
    await put('chunks.txt', `${lines.join('\n')}\n`);
    expect(await read({ path: 'chunks.txt', offset: 656, limit: 2 })).toBe(
      `chunks.txt (lines 656–657 of 1500)\n${lines[655]}\n${lines[656]}\n[… 843 more lines: call read_file with offset=658 to read on]`,
    );
    expect(await read({ path: 'chunks.txt', offset: 1_500 })).toBe(`chunks.txt (lines 1500–1500 of 1500)\n${lines[1_499]}`);
  });

  it('a NUL byte past the first chunk still makes it binary', async () => {
    await put('late.bin', Buffer.concat([Buffer.alloc(100_000, 0x61), Buffer.from([0])]));
    await expect(read({ path: 'late.bin' })).rejects.toThrow(/^'late\.bin' looks like a binary file \(it contains NUL bytes\); read_file only reads text$/);
  });
});

describe('parts of a file', () => {
  beforeEach(async () => {
    await put('five.txt', 'l1\nl2\nl3\nl4\nl5');
  });

  it('offset alone reads to the end; the header counts the last line even without a newline', async () => {
    expect(await read({ path: 'five.txt', offset: 5 })).toBe('five.txt (lines 5–5 of 5)\nl5');
  });

  it('limit alone reads from the start, and says one more line in the singular', async () => {
    expect(await read({ path: 'five.txt', limit: 4 })).toBe(
      'five.txt (lines 1–4 of 5)\nl1\nl2\nl3\nl4\n[… 1 more line: call read_file with offset=5 to read on]',
    );
  });

  it('an offset past the end names the line count, one line in the singular', async () => {
    await expect(read({ path: 'five.txt', offset: 6 })).rejects.toThrow(/^offset 6 is past the end of 'five\.txt', which has 5 lines$/);
    await put('one.txt', 'only\n');
    await expect(read({ path: 'one.txt', offset: 2 })).rejects.toThrow(/^offset 2 is past the end of 'one\.txt', which has 1 line$/);
  });

  it('a limit over 2,000 lines is held to 2,000', async () => {
    await put('many.txt', 'x\n'.repeat(2_001));
    const text = await read({ path: 'many.txt', limit: 5_000 });
    expect(text.split('\n')[0]).toBe('many.txt (lines 1–2000 of 2001)');
    expect(text.endsWith('\n[… 1 more line: call read_file with offset=2001 to read on]')).toBe(true);
  });

  it('exactly 2,000 lines are returned whole', async () => {
    await put('two-k.txt', 'y\n'.repeat(2_000));
    expect(await read({ path: 'two-k.txt' })).toBe('y\n'.repeat(2_000));
  });
});

describe('budgets', () => {
  it('a line of 2,000 characters is whole; one of 2,001 is cut to 2,000 and says its size in bytes', async () => {
    await put('w.txt', `${'a'.repeat(2_000)}\n${'b'.repeat(2_001)}\n`);
    expect(await read({ path: 'w.txt' })).toBe(
      `w.txt (lines 1–2 of 2; long lines cut)\n${'a'.repeat(2_000)}\n${'b'.repeat(2_000)} [… line cut: 2001 bytes in all]`,
    );
  });

  it('a line cut counts its bytes, not its characters', async () => {
    await put('e.txt', `${'é'.repeat(2_500)}\n`);
    expect(await read({ path: 'e.txt' })).toBe(`e.txt (lines 1–1 of 1; long lines cut)\n${'é'.repeat(2_000)} [… line cut: 5000 bytes in all]`);
  });

  it('a line of many bytes is cut after its first 2,000 characters whatever its length', async () => {
    await put('huge.txt', `${'h'.repeat(200_000)}\nnext\n`);
    expect(await read({ path: 'huge.txt' })).toBe(`huge.txt (lines 1–2 of 2; long lines cut)\n${'h'.repeat(2_000)} [… line cut: 200000 bytes in all]\nnext`);
  });

  it('a cut never splits a surrogate pair', async () => {
    await put('emoji.txt', `a${'😀'.repeat(1_500)}\n${'😀'.repeat(1_500)}\n`);
    expect(await read({ path: 'emoji.txt' })).toBe(
      `emoji.txt (lines 1–2 of 2; long lines cut)\na${'😀'.repeat(999)} [… line cut: 6001 bytes in all]\n${'😀'.repeat(1_000)} [… line cut: 6000 bytes in all]`,
    );
  });

  it('the first and the last high surrogate are both kept whole at a cut', async () => {
    await put('first.txt', `a${'\u{10000}'.repeat(1_500)}\n`);
    await put('last.txt', `a${'\u{10FC00}'.repeat(1_500)}\n`);
    expect(await read({ path: 'first.txt' })).toBe(`first.txt (lines 1–1 of 1; long lines cut)\na${'\u{10000}'.repeat(999)} [… line cut: 6001 bytes in all]`);
    expect(await read({ path: 'last.txt' })).toBe(`last.txt (lines 1–1 of 1; long lines cut)\na${'\u{10FC00}'.repeat(999)} [… line cut: 6001 bytes in all]`);
  });

  it('a cut moves back only when the character before it is a high surrogate', async () => {
    await put('mixed.txt', `${'a'.repeat(1_999)}😀${'b'.repeat(100)}\n${'c'.repeat(2_001)}😀\n`);
    expect(await read({ path: 'mixed.txt' })).toBe(
      `mixed.txt (lines 1–2 of 2; long lines cut)\n${'a'.repeat(1_999)} [… line cut: 2103 bytes in all]\n${'c'.repeat(2_000)} [… line cut: 2005 bytes in all]`,
    );
  });

  it('a line that would pass 40,000 characters by one ends the part, and no shorter line after it is taken instead', async () => {
    const line = 'c'.repeat(999);
    await put('edge.txt', `${`${line}\n`.repeat(39)}${'d'.repeat(1_000)}\nx\n`);
    expect(await read({ path: 'edge.txt' })).toBe(
      `edge.txt (lines 1–39 of 41)\n${Array.from({ length: 39 }, () => line).join('\n')}\n[… 2 more lines: call read_file with offset=40 to read on]`,
    );
  });

  it('lines stop at 40,000 characters, newlines counted, and the rest is offered', async () => {
    const line = 'c'.repeat(999);
    await put('wide.txt', `${line}\n`.repeat(50));
    expect(await read({ path: 'wide.txt' })).toBe(
      `wide.txt (lines 1–40 of 50)\n${Array.from({ length: 40 }, () => line).join('\n')}\n[… 10 more lines: call read_file with offset=41 to read on]`,
    );
  });
});

describe('what it refuses', () => {
  it('each refusal carries its kind', async () => {
    await put('f.txt', 'f\n');
    await put('bin', Buffer.from([0]));
    await mkdir(path.join(ws.root, 'dir'));
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    const kindOf = (input: Record<string, unknown>): Promise<unknown> =>
      read(input).then(
        () => 'no error',
        (error: unknown) => (error instanceof WorkspaceError ? error.kind : String(error)),
      );
    expect(
      await Promise.all([
        kindOf({ path: 'f.txt', offset: 2 }),
        kindOf({ path: 'gone' }),
        kindOf({ path: 'f.txt/x' }),
        kindOf({ path: 'dir' }),
        kindOf({ path: 'pipe' }),
        kindOf({ path: 'bin' }),
      ]),
    ).toEqual(['invalid-input', 'not-found', 'not-found', 'wrong-type', 'wrong-type', 'wrong-type']);
  });

  it('a directory, also through a symlink or with a trailing slash', async () => {
    await mkdir(path.join(ws.root, 'dir'));
    await symlink('dir', path.join(ws.root, 'dirlink'));
    for (const name of ['dir', 'dirlink', 'dir/', '.']) {
      await expect(read({ path: name })).rejects.toThrow(`'${name}' is a directory; use list_dir to see what it contains`);
    }
  });

  it('a FIFO, without waiting for a writer', async () => {
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    await expect(read({ path: 'pipe' })).rejects.toThrow(/^'pipe' is not a regular file \(it is a FIFO\); read_file only reads regular files$/);
  });

  it('a socket', async () => {
    await withSocket(path.join(ws.root, 'sock'), () =>
      expect(read({ path: 'sock' })).rejects.toThrow(/^'sock' is not a regular file \(it is a socket\); read_file only reads regular files$/),
    );
  });

  it('character and block devices, never opened', async (context) => {
    makeDevices(ws.root, context);
    await expect(read({ path: 'chr' })).rejects.toThrow(/^'chr' is not a regular file \(it is a character device\); read_file only reads regular files$/);
    await expect(read({ path: 'blk' })).rejects.toThrow(/^'blk' is not a regular file \(it is a block device\); read_file only reads regular files$/);
  });

  it('a missing file and a path through a file', async () => {
    await put('f.txt', 'f\n');
    await expect(read({ path: 'gone.txt' })).rejects.toThrow(/^no such file: gone\.txt$/);
    await expect(read({ path: 'f.txt/x' })).rejects.toThrow(/^no such file: f\.txt\/x \(a part of the path is a file, not a directory\)$/);
  });

  it('a call aborted while it runs rejects with the abort', async () => {
    await put('f.txt', 'f\n');
    const controller = new AbortController();
    const pending = ws.call('read_file', { path: 'f.txt' }, controller.signal);
    controller.abort();
    await expect(pending).rejects.toThrow(/aborted/);
  });

  it('an aborted call reads nothing', async () => {
    await put('f.txt', 'f\n');
    const controller = new AbortController();
    controller.abort(new Error('enough'));
    await expect(ws.call('read_file', { path: 'f.txt' }, controller.signal)).rejects.toThrow(/^enough$/);
  });
});
