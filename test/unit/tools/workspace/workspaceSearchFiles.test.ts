import { execFileSync } from 'node:child_process';
import { mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceError } from '../../../../src/tools/workspace/index.js';
import { makeWorkspace, type Workspace } from '../../../support/workspaceFixture.js';

/** search_files: the lines it reports, the files it passes over and says so, and the patterns it refuses. */

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
});
afterEach(async () => {
  await ws.remove();
});

const search = (input: Record<string, unknown>): Promise<string> => ws.call('search_files', input);
const put = async (file: string, content: string | Buffer): Promise<void> => {
  await mkdir(path.dirname(path.join(ws.root, file)), { recursive: true });
  await writeFile(path.join(ws.root, file), content);
};

describe('the lines reported', () => {
  it('numbers lines from 1; a final newline does not make an empty last line, a blank line before it is one', async () => {
    await put('one.txt', 'x\n');
    await put('two.txt', 'x\n\n');
    expect(await search({ pattern: '^$' })).toBe('two.txt:2: ');
  });

  it('a carriage return ending a line is not shown; one inside a line is', async () => {
    await put('dos.txt', 'first\r\nsecond\r\n');
    expect(await search({ pattern: 'second' })).toBe('dos.txt:2: second');
    await put('dos.txt', 'x\ry\r\n');
    expect(await search({ pattern: 'y' })).toBe('dos.txt:1: x\ry');
  });

  it('a last line without a newline is searched, after a blank line too', async () => {
    await put('tail.txt', 'a\n\nneedle');
    expect(await search({ pattern: 'needle' })).toBe('tail.txt:3: needle');
  });

  it('an empty path searches the working directory', async () => {
    await put('d/a.txt', 'alpha\n');
    expect(await search({ pattern: 'alpha', path: '' })).toBe('d/a.txt:1: alpha');
  });

  it('case matters unless ignoreCase is set', async () => {
    await put('a.txt', 'TODO\n');
    expect(await search({ pattern: 'todo' })).toBe("no matches for /todo/ in '.'");
    expect(await search({ pattern: 'todo', ignoreCase: false })).toBe("no matches for /todo/ in '.'");
    expect(await search({ pattern: 'todo', ignoreCase: true })).toBe('a.txt:1: TODO');
  });

  it('a line of 300 characters is shown whole', async () => {
    const line = `${'a'.repeat(299)}Z`;
    await put('w.txt', `${line}\n`);
    expect(await search({ pattern: 'Z' })).toBe(`w.txt:1: ${line}`);
  });

  it('a longer line is shown as 300 characters around the match, marked where cut', async () => {
    const middle = `${'a'.repeat(1_000)}Z${'b'.repeat(999)}`;
    const start = `Z${'c'.repeat(500)}`;
    const end = `${'d'.repeat(500)}Z`;
    await put('m.txt', `${middle}\n${start}\n${end}\n`);
    expect((await search({ pattern: 'Z' })).split('\n')).toEqual([
      `m.txt:1: …${'a'.repeat(100)}Z${'b'.repeat(199)}…`,
      `m.txt:2: Z${'c'.repeat(299)}…`,
      `m.txt:3: …${'d'.repeat(299)}Z`,
    ]);
  });

  it('a line of 301 characters matched at its start is cut at its end only', async () => {
    await put('e.txt', `Z${'e'.repeat(300)}\n`);
    expect(await search({ pattern: 'Z' })).toBe(`e.txt:1: Z${'e'.repeat(299)}…`);
  });

  it('files are searched in name order, depth first', async () => {
    await put('b.txt', 'hit\n');
    await put('a/z.txt', 'hit\n');
    await put('a.txt', 'hit\n');
    expect(await search({ pattern: 'hit' })).toBe('a/z.txt:1: hit\na.txt:1: hit\nb.txt:1: hit');
  });
});

describe('what is searched', () => {
  beforeEach(async () => {
    await put('src/a.ts', 'needle\n');
    await put('src/nested/b.js', 'needle\n');
  });

  it('a glob with a slash is matched against the path below the searched directory', async () => {
    expect(await search({ pattern: 'needle', path: 'src', glob: 'nested/*.js' })).toBe('src/nested/b.js:1: needle');
    expect(await search({ pattern: 'needle', path: 'src', glob: 'src/nested/*.js' })).toBe(
      "no matches for /needle/ in 'src' (files matching 'src/nested/*.js')",
    );
  });

  it('a file named as the path is searched, and a glob is matched against its name', async () => {
    expect(await search({ pattern: 'needle', path: 'src/a.ts', glob: '*.ts' })).toBe('src/a.ts:1: needle');
    expect(await search({ pattern: 'needle', path: 'src/a.ts', glob: '*.md' })).toBe("no matches for /needle/ in 'src/a.ts' (files matching '*.md')");
  });

  it('symlinks and FIFOs in a directory are passed over silently', async () => {
    await symlink('src/a.ts', path.join(ws.root, 'link.ts'));
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    expect(await search({ pattern: 'needle' })).toBe('src/a.ts:1: needle\nsrc/nested/b.js:1: needle');
  });

  it('a FIFO named as the path is refused', async () => {
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    await expect(search({ pattern: 'x', path: 'pipe' })).rejects.toThrow(/^'pipe' is not a regular file or directory$/);
  });

  it('a symlink named as the path is followed inside', async () => {
    await symlink('src', path.join(ws.root, 'code'));
    expect(await search({ pattern: 'needle', path: 'code', glob: '*.ts' })).toBe('code/a.ts:1: needle');
  });
});

describe('the notes on what was passed over', () => {
  it('one binary file, then two', async () => {
    await put('hit.txt', 'needle\n');
    await put('a.bin', Buffer.from('needle\0'));
    expect(await search({ pattern: 'needle' })).toBe('hit.txt:1: needle\n[not searched: 1 binary file]');
    await put('b.bin', Buffer.from('\0'));
    expect(await search({ pattern: 'needle' })).toBe('hit.txt:1: needle\n[not searched: 2 binary files]');
  });

  it('a file of exactly 5 MB is searched, larger ones are counted', async () => {
    const fiveMb = 5 * 1024 * 1024;
    await put('exact.txt', Buffer.concat([Buffer.from('needle\n'), Buffer.alloc(fiveMb - 7, 0x2e)]));
    await put('big1.txt', Buffer.concat([Buffer.from('needle\n'), Buffer.alloc(fiveMb - 6, 0x2e)]));
    expect(await search({ pattern: 'needle' })).toBe('exact.txt:1: needle\n[not searched: 1 file over 5 MB]');
    await put('big2.txt', Buffer.alloc(fiveMb + 1, 0x2e));
    expect(await search({ pattern: 'needle', glob: 'big*' })).toBe("no matches for /needle/ in '.' (files matching 'big*')\n[not searched: 2 files over 5 MB]");
  });

  it('skipped directories are named once each, sorted, after the other notes', async () => {
    await put('x/node_modules/m.js', 'needle\n');
    await put('y/node_modules/m.js', 'needle\n');
    await put('.git/config', 'needle\n');
    await put('bin.dat', Buffer.from('\0'));
    expect(await search({ pattern: 'needle' })).toBe("no matches for /needle/ in '.'\n[not searched: 1 binary file; .git/, node_modules/ directories]");
  });

  it('skipped directories are named sorted, whatever order the walk met them in', async () => {
    await put('a/node_modules/m.js', 'x\n');
    await put('b/.git/config', 'x\n');
    expect(await search({ pattern: 'needle' })).toBe("no matches for /needle/ in '.'\n[not searched: .git/, node_modules/ directories]");
  });

  it('directories deeper than 64 levels are counted, one and then two', async () => {
    const deep = Array.from({ length: 65 }, () => 'd').join('/');
    await put(`${deep}/far.txt`, 'needle\n');
    await put('near.txt', 'needle\n');
    expect(await search({ pattern: 'needle' })).toBe('near.txt:1: needle\n[not searched: 1 directory deeper than 64 levels (search inside one by its path)]');
    const level63 = Array.from({ length: 63 }, () => 'd').join('/');
    await put(`${level63}/e/f/g.txt`, 'needle\n');
    expect((await search({ pattern: 'needle' })).split('\n').at(-1)).toBe(
      '[not searched: 2 directories deeper than 64 levels (search inside one by its path)]',
    );
  });

  it('the match limit note comes before the passed-over note', async () => {
    await put('lots.txt', 'm\n'.repeat(201));
    await put('z.bin', Buffer.from('\0'));
    await put('zz.txt', 'm\n');
    const lines = (await search({ pattern: 'm' })).split('\n');
    expect(lines).toHaveLength(201);
    expect(lines[199]).toBe('lots.txt:200: m');
    expect(lines[200]).toBe('[stopped at 200 matches: narrow the pattern, path or glob to see the rest]');
  });

  it('exactly 200 matches are all shown with no note', async () => {
    await put('lots.txt', 'm\n'.repeat(200));
    const lines = (await search({ pattern: 'm' })).split('\n');
    expect(lines).toHaveLength(200);
    expect(lines.at(-1)).toBe('lots.txt:200: m');
  });

  it('a file of many lines is searched to its end', async () => {
    await put('long.txt', `${'filler\n'.repeat(5_000)}needle\n`);
    expect(await search({ pattern: 'needle' })).toBe('long.txt:5001: needle');
  });
});

describe('patterns it refuses, one line each', () => {
  it('a pattern of 2,000 characters is taken, one of 2,001 refused', async () => {
    await put('a.txt', 'a\n');
    expect(await search({ pattern: 'a'.repeat(2_000) })).toBe(`no matches for /${'a'.repeat(2_000)}/ in '.'`);
    await expect(search({ pattern: 'a'.repeat(2_001) })).rejects.toThrow(/^invalid regular expression: longer than 2000 characters$/);
  });

  it('a pattern that does not parse is named with the reason, without the repeated fragment', async () => {
    await expect(search({ pattern: 'foo(' })).rejects.toThrow(/^invalid regular expression 'foo\(': missing closing \)$/);
    await expect(search({ pattern: 'a**' })).rejects.toThrow(/^invalid regular expression 'a\*\*': invalid nested repetition operator$/);
    await expect(search({ pattern: 'x{2,1}' })).rejects.toThrow(/^invalid regular expression 'x\{2,1\}': invalid repeat count$/);
  });

  it('lookarounds, backreferences and .NET named groups get a hint about RE2', async () => {
    const hint = ' (RE2 syntax: no lookarounds or backreferences)';
    await expect(search({ pattern: '(?=x)' })).rejects.toThrow(`invalid regular expression '(?=x)': invalid or unsupported Perl syntax${hint}`);
    await expect(search({ pattern: '(a)\\1' })).rejects.toThrow(`invalid regular expression '(a)\\1': invalid escape sequence${hint}`);
    await expect(search({ pattern: '(?P<a-b>x)' })).rejects.toThrow(`invalid regular expression '(?P<a-b>x)': invalid named capture${hint}`);
  });

  it('the fragment RE2 repeats is dropped even when it holds spaces', async () => {
    await expect(search({ pattern: 'a (b' })).rejects.toThrow(/^invalid regular expression 'a \(b': missing closing \)$/);
  });

  it('refused patterns are invalid input, a search of a FIFO a wrong type', async () => {
    execFileSync('mkfifo', [path.join(ws.root, 'pipe')]);
    const kindOf = (input: Record<string, unknown>): Promise<unknown> =>
      search(input).then(
        () => 'no error',
        (error: unknown) => (error instanceof WorkspaceError ? error.kind : String(error)),
      );
    expect(await kindOf({ pattern: 'a'.repeat(2_001) })).toBe('invalid-input');
    expect(await kindOf({ pattern: 'foo(' })).toBe('invalid-input');
    expect(await kindOf({ pattern: 'x', path: 'pipe' })).toBe('wrong-type');
  });

  it('a refused pattern is refused before the path is looked at', async () => {
    await expect(search({ pattern: 'foo(', path: 'missing' })).rejects.toThrow(/^invalid regular expression/);
  });

  it('a call aborted while it runs rejects with the abort itself, not a file-system fault', async () => {
    await put('a/b.txt', 'a\n');
    const controller = new AbortController();
    const pending = ws.call('search_files', { pattern: 'a' }, controller.signal);
    controller.abort();
    const error = await pending.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect((error as Error).name).toBe('AbortError');
    expect(error).not.toBeInstanceOf(WorkspaceError);
  });

  it('an aborted call searches nothing', async () => {
    await put('a.txt', 'a\n');
    const controller = new AbortController();
    controller.abort(new Error('halt'));
    await expect(ws.call('search_files', { pattern: 'a', path: 'a.txt' }, controller.signal)).rejects.toThrow(/^halt$/);
  });
});
