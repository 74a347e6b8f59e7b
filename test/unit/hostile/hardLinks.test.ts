import { link, mkdir, mkdtemp, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';

/**
 * Issue 13, hole 9 (hard links): a hard link inside the working directory to a file outside it
 * is the same file under two names, and write_file wrote into it in place, changing the file
 * outside. Now a write puts a new file under the name (temp file + rename), so the other name
 * keeps its content.
 */

let base: string;
let root: string;
let outside: string;

beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'exarch-links-'));
  root = path.join(base, 'work');
  outside = path.join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  await writeFile(path.join(outside, 'secret.txt'), 'top secret\n');
  await link(path.join(outside, 'secret.txt'), path.join(root, 'linked.txt'));
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;

async function call(name: string, input: unknown): Promise<string> {
  const tool = workspaceTools({ root, allowWrite: true }).find((t: Tool) => t.name === name);
  const prepared = tool?.prepare(input);
  if (!prepared?.ok) throw new Error(`cannot prepare ${name}`);
  return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
}

describe('a hard link to a file outside the working directory', () => {
  it('write_file replaces the name inside; the file outside keeps its content', async () => {
    expect(await call('write_file', { path: 'linked.txt', content: 'pwned\n' })).toBe('wrote 6 bytes to linked.txt');
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('top secret\n');
    expect(await readFile(path.join(root, 'linked.txt'), 'utf8')).toBe('pwned\n');
    // The two names are now two files.
    expect((await stat(path.join(outside, 'secret.txt'))).nlink).toBe(1);
  });

  it('write_file through a symlink inside to the hard link leaves the outside file alone too', async () => {
    await symlink('linked.txt', path.join(root, 'alias.txt'));
    await call('write_file', { path: 'alias.txt', content: 'pwned\n' });
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('top secret\n');
    expect(await readFile(path.join(root, 'alias.txt'), 'utf8')).toBe('pwned\n');
  });

  it('read_file reads it: the name is an entry of the working directory (decided, see readFile.ts)', async () => {
    expect(await call('read_file', { path: 'linked.txt' })).toBe('top secret\n');
  });
});
