import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { compileGlob } from '../../../src/tools/workspace/glob.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { call as toolCall, exarch, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 13, holes 1 and 2: a pattern or glob from the model must not freeze the process. Before,
 * `search_files` ran V8's backtracking RegExp on the main thread and globs compiled to one too, so
 * a catastrophic pattern blocked the event loop (only SIGKILL ended it).
 */

/** The line: `^(\w+\s?)*$` backtracks exponentially on it in a backtracking engine (the `!` makes it fail). */
const LINE = 'const someVeryLongIdentifierName_withMoreWords = computeSomething!';
const CATASTROPHIC = '^(\\w+\\s?)*$';
const HUGE_GLOB = `${'**/'.repeat(12)}x`;
/** 30 stars: polynomial of degree 30 in a backtracking matcher (picomatch's included). */
const STARRY_GLOB = `${'a*'.repeat(30)}b`;
/** A path 26 directories deep, as in the issue. */
const DEEP = Array.from({ length: 26 }, (_, i) => `d${i}`).join('/');

let root: string;
beforeEach(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'exarch-runaway-'));
});
afterEach(async () => {
  await rm(root, { recursive: true, force: true });
});

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;

async function run(tools: readonly Tool[], name: string, input: unknown, signal = new AbortController().signal): Promise<unknown> {
  const tool = tools.find((t) => t.name === name);
  if (tool === undefined) throw new Error(`no tool ${name}`);
  const prepared = tool.prepare(input);
  if (!prepared.ok) throw new Error(prepared.error);
  return prepared.value({ agent, toolUseId: 'toolu_1', signal });
}

describe('search_files with a catastrophic pattern', () => {
  it('answers (no line matches: each ends with "!") instead of freezing', async () => {
    await writeFile(path.join(root, 'code.ts'), `${LINE}\n`.repeat(50));
    expect(await run(workspaceTools({ root }), 'search_files', { pattern: CATASTROPHIC })).toBe(`no matches for /${CATASTROPHIC}/ in '.'`);
  });

  it('still finds what the pattern does match', async () => {
    await writeFile(path.join(root, 'words.txt'), 'two words\nnot this one!\nthree more words\n');
    expect(await run(workspaceTools({ root }), 'search_files', { pattern: CATASTROPHIC })).toBe('words.txt:1: two words\nwords.txt:3: three more words');
  });

  /** Five files of 4 MB (under search_files' 5 MB limit per file): 300,000 lines. */
  const bigFiles = async (): Promise<void> => {
    for (let i = 0; i < 5; i++) await writeFile(path.join(root, `big${i}.ts`), `${LINE}\n`.repeat(60_000));
  };

  it('lets timers run while it searches large files', async () => {
    await bigFiles();
    let ticks = 0;
    const timer = setInterval(() => (ticks += 1), 1);
    try {
      await run(workspaceTools({ root }), 'search_files', { pattern: CATASTROPHIC });
    } finally {
      clearInterval(timer);
    }
    // 300,000 lines take far longer than one 10 ms slice: the search must have given way several times.
    expect(ticks).toBeGreaterThan(5);
  });

  it('stops when the call is aborted', async () => {
    await bigFiles();
    const controller = new AbortController();
    const searching = run(workspaceTools({ root }), 'search_files', { pattern: CATASTROPHIC }, controller.signal);
    setTimeout(() => controller.abort(new Error('stop now')), 5);
    await expect(searching).rejects.toThrow('stop now');
  });

  it('refuses a pattern of more than 2,000 characters with one line', async () => {
    await expect(run(workspaceTools({ root }), 'search_files', { pattern: 'a'.repeat(2_001) })).rejects.toThrow(
      'invalid regular expression: longer than 2000 characters',
    );
  });
});

describe('globs', () => {
  it("the issue's glob against a path 26 directories deep answers at once", () => {
    expect(compileGlob(HUGE_GLOB).matches(`${DEEP}/y`)).toBe(false);
    expect(compileGlob(HUGE_GLOB).matches(`${DEEP}/x`)).toBe(true);
    expect(compileGlob(STARRY_GLOB).matches(`${'a'.repeat(60)}c`)).toBe(false);
    expect(compileGlob(STARRY_GLOB).matches(`${'a'.repeat(60)}b`)).toBe(true);
  });

  // The oracle is this table, written by hand from the grammar in glob.ts's JSDoc.
  const table: [glob: string, path: string, matches: boolean][] = [
    ['*.ts', 'src/a.ts', true],
    ['*.ts', 'src/a.tsx', false],
    ['*.{ts,tsx}', 'a.tsx', true],
    ['*.{ts,{md,txt}}', 'notes.txt', true],
    ['src/*.ts', 'src/a.ts', true],
    ['src/*.ts', 'src/x/a.ts', false],
    ['src/**/*.ts', 'src/a.ts', true],
    ['src/**/*.ts', 'src/x/y/a.ts', true],
    ['src/**/*.ts', 'lib/a.ts', false],
    ['**/test/*.ts', 'test/a.ts', true],
    ['**/test/*.ts', 'a/b/test/a.ts', true],
    ['?.md', 'a.md', true],
    ['?.md', 'ab.md', false],
    ['file[0-9].txt', 'file7.txt', true],
    ['file[0-9].txt', 'fileA.txt', false],
    ['file[!0-9].txt', 'fileA.txt', true],
    ['file[!0-9].txt', 'file7.txt', false],
    ['a/[!x]', 'a//', false],
    ['[]]', ']', true],
    ['[a-]', '-', true],
    ['\\*.md', '*.md', true],
    ['\\*.md', 'a.md', false],
    ['a.b', 'axb', false],
    ['(x)+', '(x)+', true],
    ['[unclosed', '[unclosed', true],
    ['.env*', '.env.local', true],
    ['{a,b', 'a', true],
    ['*', 'name\nwith newline', true],
  ];
  it.each(table)('%j against %j: %s', (glob, file, expected) => {
    expect(compileGlob(glob).matches(file)).toBe(expected);
  });

  it('refuses a glob of more than 1,000 characters through the tool, with one line', async () => {
    await expect(run(workspaceTools({ root }), 'search_files', { pattern: 'x', glob: '*'.repeat(1_001) })).rejects.toThrow(
      'invalid glob: longer than 1000 characters',
    );
  });
});

describe('freeze guard: the real CLI', () => {
  it('Ctrl-C exits 130 within 2 s while a catastrophic pattern and a huge glob are being searched', async () => {
    const cwd = workdir();
    await mkdir(path.join(cwd, DEEP), { recursive: true });
    await writeFile(path.join(cwd, DEEP, 'y'), `${LINE}\n`);
    for (let i = 0; i < 5; i++) await writeFile(path.join(cwd, `big${i}.ts`), `${LINE}\n`.repeat(60_000));
    const server = await serve({
      root: [
        stream({
          toolCalls: [
            toolCall('search_files', { pattern: CATASTROPHIC }),
            toolCall('search_files', { pattern: CATASTROPHIC, glob: HUGE_GLOB }),
            toolCall('search_files', { pattern: 'x', glob: STARRY_GLOB }),
          ],
        }),
        // Should the searches end first, the next request hangs until Ctrl-C.
        stream({ text: 'never finished' }, { stallAfter: 1 }),
      ],
    });
    let signalledAt = 0;
    const result = await exarch(['run', '--no-store', 'search hard'], {
      server,
      cwd,
      whenRequests: {
        count: 1,
        then: (child) => {
          signalledAt = performance.now();
          child.kill('SIGINT');
        },
      },
    });
    const took = performance.now() - signalledAt;
    expect(result.code).toBe(130);
    expect(took).toBeLessThan(2_000);
  });
});
