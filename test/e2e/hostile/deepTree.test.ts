import { execFileSync } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';

/**
 * A workspace can hold a directory tree made to trap a crawler: 420 levels of a ten-letter name, whose
 * deepest paths are longer than PATH_MAX (4,096 bytes). Before, a recursive list_dir or
 * search_files walked down until the kernel refused the path, and the whole call failed with
 * ENAMETOOLONG and a path thousands of characters long; now a walk stops at 64 levels and says so.
 */

let root: string;
beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'exarch-deep-'));
  await writeFile(path.join(root, 'top.txt'), 'hello\n');
  // Made one level at a time from inside, as only relative paths reach that deep.
  execFileSync('/bin/sh', ['-c', 'i=0; while [ $i -lt 420 ]; do mkdir dddddddddd && cd -P dddddddddd || exit 1; i=$((i+1)); done; echo needle > leaf.txt'], {
    cwd: root,
  });
});
afterAll(() => {
  // Node's rm goes by absolute paths and cannot reach that deep; GNU rm walks by descriptor.
  execFileSync('rm', ['-rf', root]);
});

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;

async function run(name: string, input: unknown): Promise<string> {
  const tool = workspaceTools({ root }).find((t: Tool) => t.name === name);
  const prepared = tool?.prepare(input);
  if (!prepared?.ok) throw new Error(`cannot prepare ${name}`);
  return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
}

const D = 'dddddddddd';
const chain = (levels: number): string => Array.from({ length: levels }, () => D).join('/');

describe('a directory tree deeper than PATH_MAX', () => {
  it('search_files finds what is within reach and names what it did not search', async () => {
    expect(await run('search_files', { pattern: 'hello' })).toBe(
      'top.txt:1: hello\n[not searched: 1 directory deeper than 64 levels (search inside one by its path)]',
    );
  });

  it('list_dir lists 64 levels and names the directory it did not expand', async () => {
    const lines = (await run('list_dir', { recursive: true })).split('\n');
    expect(lines).toHaveLength(64 + 1 + 1);
    expect(lines[0]).toBe(`${D}/`);
    expect(lines[63]).toBe(`${chain(64)}/`);
    expect(lines[64]).toBe('top.txt');
    expect(lines[65]).toBe(`[not expanded, deeper than 64 levels: ${chain(64)}/ — list one explicitly to see inside]`);
  });

  it('the directory named can be listed from there', async () => {
    expect(await run('list_dir', { path: chain(64) })).toBe(`${chain(65)}/`);
  });
});
