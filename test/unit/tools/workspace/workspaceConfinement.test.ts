import { readdirSync } from 'node:fs';
import { mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WorkspaceError, workspaceTools } from '../../../../src/tools/workspace/index.js';
import { callTool, makeWorkspace, type Workspace } from '../../../support/workspaceFixture.js';

/**
 * How every workspace tool resolves the path the model names: the refusals it answers with (read
 * by the model, so pinned word for word), and the symlinks it follows while they stay inside.
 */

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
  await mkdir(path.join(ws.root, 'src'));
  await writeFile(path.join(ws.root, 'src', 'a.ts'), 'alpha\n');
  await writeFile(path.join(ws.root, 'README.md'), 'readme\n');
  await writeFile(path.join(ws.outside, 'secret.txt'), 'secret\n');
});
afterEach(async () => {
  await ws.remove();
});

describe('paths refused by name, the same words from every tool', () => {
  it('a NUL character', async () => {
    for (const tool of ['read_file', 'search_files', 'list_dir'] as const) {
      const input = tool === 'search_files' ? { pattern: 'x', path: 'a\0b' } : { path: 'a\0b' };
      await expect(ws.call(tool, input)).rejects.toThrow(/^refused: 'a\0b' contains a NUL character$/);
    }
  });

  it('a lone surrogate, which no file name can hold', async () => {
    await expect(ws.call('read_file', { path: 'a\uD800b' })).rejects.toThrow(
      /^refused: 'a\uD800b' holds a lone surrogate \(half of a UTF-16 pair\), which no file name can hold$/,
    );
    await expect(ws.call('search_files', { pattern: 'x', path: '\uDC00' })).rejects.toThrow(/holds a lone surrogate/);
  });

  it('an absolute path, even one inside the working directory', async () => {
    const inside = path.join(ws.root, 'README.md');
    await expect(ws.call('read_file', { path: inside })).rejects.toThrow(
      new RegExp(`^refused: '${inside}' is an absolute path; use a path relative to the working directory$`),
    );
    await expect(ws.call('search_files', { pattern: 'x', path: '/' })).rejects.toThrow("refused: '/' is an absolute path");
  });

  it('.. alone, and .. that climbs out after going down', async () => {
    await expect(ws.call('list_dir', { path: '..' })).rejects.toThrow(/^refused: '\.\.' is outside the working directory$/);
    await expect(ws.call('search_files', { pattern: 'x', path: '..' })).rejects.toThrow(/^refused: '\.\.' is outside the working directory$/);
    await expect(ws.call('read_file', { path: 'src/../../outside/secret.txt' })).rejects.toThrow(
      /^refused: 'src\/\.\.\/\.\.\/outside\/secret\.txt' is outside the working directory$/,
    );
  });

  it('a name that merely starts with .. is an ordinary name inside', async () => {
    await writeFile(path.join(ws.root, '..notes'), 'dotted\n');
    await mkdir(path.join(ws.root, '..d'));
    await writeFile(path.join(ws.root, '..d', 'f'), 'in d\n');
    expect(await ws.call('read_file', { path: '..notes' })).toBe('dotted\n');
    expect(await ws.call('search_files', { pattern: 'in', path: '..d' })).toBe('..d/f:1: in d');
    expect(await ws.call('write_file', { path: '..d/g', content: 'g' })).toBe('wrote 1 bytes to ..d/g');
  });
});

describe('how a path is shown back', () => {
  it('relative to the working directory, with . and .. applied and without doubled slashes', async () => {
    await writeFile(path.join(ws.root, 'src', 'b.ts'), 'b1\nb2\n');
    expect(await ws.call('read_file', { path: './src/../src/b.ts', offset: 2 })).toBe('src/b.ts (lines 2–2 of 2)\nb2');
    expect(await ws.call('list_dir', { path: 'src/' })).toBe('src/a.ts\nsrc/b.ts');
    expect(await ws.call('list_dir', { path: 'src//' })).toBe('src/a.ts\nsrc/b.ts');
    expect(await ws.call('search_files', { pattern: 'b2', path: './src/' })).toBe('src/b.ts:2: b2');
    expect(await ws.call('write_file', { path: 'src/./c.ts', content: 'c' })).toBe('wrote 1 bytes to src/c.ts');
  });

  it('the working directory itself is .', async () => {
    expect(await ws.call('search_files', { pattern: 'nothing', path: 'src/..' })).toBe("no matches for /nothing/ in '.'");
    await expect(ws.call('write_file', { path: '.', content: 'x' })).rejects.toThrow(/^'\.' is the working directory itself, not a file$/);
  });
});

describe('file-system faults, one line each', () => {
  it('a missing file, and a path through a file', async () => {
    await expect(ws.call('search_files', { pattern: 'x', path: 'nope.txt' })).rejects.toThrow(/^no such file: nope\.txt$/);
    await expect(ws.call('search_files', { pattern: 'x', path: 'README.md/x' })).rejects.toThrow(
      /^no such file: README\.md\/x \(a part of the path is a file, not a directory\)$/,
    );
    await expect(ws.call('read_file', { path: 'nope/deeper.txt' })).rejects.toThrow(/^no such file: nope\/deeper\.txt$/);
    await expect(ws.call('read_file', { path: 'README.md/x' })).rejects.toThrow(
      /^no such file: README\.md\/x \(a part of the path is a file, not a directory\)$/,
    );
  });

  it('a name too long for the file system names the path and the reason', async () => {
    const long = 'n'.repeat(300);
    await expect(ws.call('read_file', { path: long })).rejects.toThrow(`${long}: ENAMETOOLONG: name too long, realpath '${ws.root}/${long}'`);
    await expect(ws.call('search_files', { pattern: 'x', path: long })).rejects.toThrow(new RegExp(`^${long}: ENAMETOOLONG: name too long`));
  });

  it('a working directory removed after the tools were made', async () => {
    const tools = workspaceTools({ root: ws.root });
    await rm(ws.root, { recursive: true });
    await expect(callTool(tools, 'read_file', { path: 'README.md' })).rejects.toThrow(`the working directory ${ws.root} is not accessible (ENOENT)`);
    await expect(callTool(tools, 'search_files', { pattern: 'x' })).rejects.toThrow(`the working directory ${ws.root} is not accessible (ENOENT)`);
  });

  it('a symlink loop', async () => {
    await symlink('loop2', path.join(ws.root, 'loop1'));
    await symlink('loop1', path.join(ws.root, 'loop2'));
    await expect(ws.call('search_files', { pattern: 'x', path: 'loop1' })).rejects.toThrow(/^cannot resolve 'loop1': too many levels of symlinks$/);
    await expect(ws.call('read_file', { path: 'loop1' })).rejects.toThrow(/^cannot resolve 'loop1': too many levels of symlinks$/);
    await expect(ws.call('write_file', { path: 'loop1/x', content: 'x' })).rejects.toThrow(/^cannot resolve 'loop1\/x': too many levels of symlinks$/);
  });
});

describe('symlinks: followed while they stay inside, refused once they lead out', () => {
  it('a relative link to a file inside is read through, and shown by the name given', async () => {
    await symlink('src/a.ts', path.join(ws.root, 'alias.ts'));
    await symlink('../README.md', path.join(ws.root, 'src', 'up.md'));
    expect(await ws.call('read_file', { path: 'alias.ts' })).toBe('alpha\n');
    expect(await ws.call('read_file', { path: 'src/up.md' })).toBe('readme\n');
    expect(await ws.call('search_files', { pattern: 'alpha', path: 'alias.ts' })).toBe('alias.ts:1: alpha');
  });

  it('an absolute link to a file inside is followed', async () => {
    await symlink(path.join(ws.root, 'src', 'a.ts'), path.join(ws.root, 'abs.ts'));
    await symlink(path.join(ws.root, 'src'), path.join(ws.root, 'abs-src'));
    expect(await ws.call('read_file', { path: 'abs.ts' })).toBe('alpha\n');
    expect(await ws.call('list_dir', { path: 'abs-src' })).toBe('abs-src/a.ts');
    expect(await ws.call('write_file', { path: 'abs-src/new.ts', content: 'n' })).toBe('wrote 1 bytes to abs-src/new.ts');
    expect(await readFile(path.join(ws.root, 'src', 'new.ts'), 'utf8')).toBe('n');
  });

  it('an absolute link naming the working directory through a symlinked ancestor is followed', async () => {
    await symlink(ws.root, path.join(ws.base, 'alias'));
    await symlink(path.join(ws.base, 'alias', 'src', 'a.ts'), path.join(ws.root, 'via-alias.ts'));
    await symlink(path.join(ws.base, 'alias', 'fresh.txt'), path.join(ws.root, 'to-fresh'));
    expect(await ws.call('read_file', { path: 'via-alias.ts' })).toBe('alpha\n');
    expect(await ws.call('write_file', { path: 'to-fresh', content: 'fresh' })).toBe('wrote 5 bytes to to-fresh');
    expect(await readFile(path.join(ws.root, 'fresh.txt'), 'utf8')).toBe('fresh');
  });

  it('tools made with a symlinked working directory follow absolute links through either name', async () => {
    const alias = path.join(ws.base, 'alias');
    await symlink(ws.root, alias);
    await symlink(path.join(alias, 'src', 'a.ts'), path.join(ws.root, 'by-alias.ts'));
    await symlink(path.join(ws.root, 'src', 'a.ts'), path.join(ws.root, 'by-real.ts'));
    const tools = workspaceTools({ root: alias });
    expect(await callTool(tools, 'read_file', { path: 'by-alias.ts' })).toBe('alpha\n');
    expect(await callTool(tools, 'read_file', { path: 'by-real.ts' })).toBe('alpha\n');
    expect(await callTool(tools, 'list_dir', { path: 'src' })).toBe('src/a.ts');
  });

  it('an absolute link to outside, or to a sibling whose name starts like the root, is refused', async () => {
    await mkdir(`${ws.root}2`);
    await writeFile(path.join(`${ws.root}2`, 'f.txt'), 'sibling\n');
    await symlink(path.join(`${ws.root}2`, 'f.txt'), path.join(ws.root, 'sib'));
    await symlink(path.join(ws.outside, 'secret.txt'), path.join(ws.root, 'out'));
    await symlink('/', path.join(ws.root, 'slash'));
    for (const name of ['sib', 'out', 'slash']) {
      await expect(ws.call('read_file', { path: name })).rejects.toThrow(
        new RegExp(`^refused: '${name}' leads outside the working directory through a symlink$`),
      );
    }
  });

  it('a link whose target climbs above the working directory is refused, even to come back; one that climbs within it is followed', async () => {
    await symlink('../src/a.ts', path.join(ws.root, 'src', 'within.ts'));
    await symlink('../../work/src/a.ts', path.join(ws.root, 'src', 'roundtrip.ts'));
    await symlink('../outside/secret.txt', path.join(ws.root, 'escape'));
    expect(await ws.call('read_file', { path: 'src/within.ts' })).toBe('alpha\n');
    await expect(ws.call('read_file', { path: 'src/roundtrip.ts' })).rejects.toThrow(
      /^refused: 'src\/roundtrip\.ts' leads outside the working directory through a symlink$/,
    );
    await expect(ws.call('read_file', { path: 'escape' })).rejects.toThrow(/^refused: 'escape' leads outside the working directory through a symlink$/);
  });

  it('an absolute link whose path leaves through a link out and comes back with .. is refused', async () => {
    // The kernel would land on src/a.ts inside; the walk goes where the path goes, and it goes outside.
    await symlink(ws.outside, path.join(ws.root, 'out'));
    // Written out: path.join would fold the `..` away.
    await symlink(`${ws.root}/out/../work/src/a.ts`, path.join(ws.root, 'round'));
    await expect(ws.call('read_file', { path: 'round' })).rejects.toThrow(/^refused: 'round' leads outside the working directory through a symlink$/);
  });

  it('a dangling link inside is written through: its target is created, parents included', async () => {
    await symlink('made/later.txt', path.join(ws.root, 'pending'));
    expect(await ws.call('write_file', { path: 'pending', content: 'now' })).toBe('wrote 3 bytes to pending');
    expect(await readFile(path.join(ws.root, 'made', 'later.txt'), 'utf8')).toBe('now');
  });

  it('a chain of dangling links is followed to its end, and refused when the end is outside', async () => {
    await symlink('hop2', path.join(ws.root, 'hop1'));
    await symlink('../outside/planted.txt', path.join(ws.root, 'hop2'));
    await expect(ws.call('write_file', { path: 'hop1', content: 'x' })).rejects.toThrow(
      /^refused: 'hop1' leads outside the working directory through a symlink$/,
    );
    await expect(ws.call('search_files', { pattern: 'x', path: 'hop1' })).rejects.toThrow(
      /^refused: 'hop1' leads outside the working directory through a symlink$/,
    );
    await symlink('hop4', path.join(ws.root, 'hop3'));
    await symlink('sub/end.txt', path.join(ws.root, 'hop4'));
    expect(await ws.call('write_file', { path: 'hop3', content: 'end' })).toBe('wrote 3 bytes to hop3');
    expect(await readFile(path.join(ws.root, 'sub', 'end.txt'), 'utf8')).toBe('end');
  });

  it('a dangling link whose target goes up out of a directory that does not exist is not a file to create', async () => {
    await symlink('ghost/../x.txt', path.join(ws.root, 'weird'));
    await expect(ws.call('write_file', { path: 'weird', content: 'x' })).rejects.toThrow(/^no such file: weird$/);
  });

  it('a link through a directory link out is refused wherever it sits in the path', async () => {
    await symlink(ws.outside, path.join(ws.root, 'src', 'door'));
    await expect(ws.call('list_dir', { path: 'src/door' })).rejects.toThrow(/^refused: 'src\/door' leads outside the working directory through a symlink$/);
    await expect(ws.call('write_file', { path: 'src/door/new.txt', content: 'x' })).rejects.toThrow(
      /^refused: 'src\/door\/new\.txt' leads outside the working directory through a symlink$/,
    );
  });
});

describe('each refusal and fault carries its kind, for a host that switches on it', () => {
  const kindOf = async (promise: Promise<unknown>): Promise<unknown> =>
    promise.then(
      () => 'no error',
      (error: unknown) => (error instanceof WorkspaceError ? error.kind : `not a WorkspaceError: ${String(error)}`),
    );

  it('refused, not-found, wrong-type, invalid-input and io', async () => {
    await symlink(path.join(ws.outside, 'secret.txt'), path.join(ws.root, 'out'));
    await symlink('loop2', path.join(ws.root, 'loop1'));
    await symlink('loop1', path.join(ws.root, 'loop2'));
    // Climbs above the root and back into it: the kernel would follow it, the walk refuses it.
    await symlink(`../${path.basename(ws.root)}/README.md`, path.join(ws.root, 'climb'));
    const cases: [string, Record<string, unknown>, string][] = [
      ['read_file', { path: 'a\0b' }, 'refused'],
      ['read_file', { path: '\uD800' }, 'refused'],
      ['read_file', { path: '/etc/hostname' }, 'refused'],
      ['read_file', { path: '../outside/secret.txt' }, 'refused'],
      ['read_file', { path: 'out' }, 'refused'],
      ['read_file', { path: 'climb' }, 'refused'],
      ['search_files', { pattern: 'x', path: 'out' }, 'refused'],
      ['search_files', { pattern: 'x', path: 'nope' }, 'not-found'],
      ['search_files', { pattern: 'x', path: 'README.md/x' }, 'not-found'],
      ['read_file', { path: 'nope' }, 'not-found'],
      ['list_dir', { path: 'README.md' }, 'wrong-type'],
      ['search_files', { pattern: '(' }, 'invalid-input'],
      ['search_files', { pattern: 'x', glob: '[z-a]' }, 'invalid-input'],
      ['read_file', { path: 'loop1' }, 'io'],
      ['search_files', { pattern: 'x', path: 'n'.repeat(300) }, 'io'],
    ];
    for (const [tool, input, kind] of cases) expect([tool, input, await kindOf(ws.call(tool, input))]).toEqual([tool, input, kind]);
  });

  it('a working directory that is gone is an io fault', async () => {
    const tools = workspaceTools({ root: ws.root });
    await rm(ws.root, { recursive: true });
    expect(await kindOf(callTool(tools, 'search_files', { pattern: 'x' }))).toBe('io');
  });
});

describe('symlink chains and paths the walk must get exactly right', () => {
  it('a chain of 40 links is followed, existing or dangling; one of 41 is too many', async () => {
    const chain = async (prefix: string, length: number, end: string): Promise<void> => {
      for (let i = 1; i <= length; i++) await symlink(i === length ? end : `${prefix}${i + 1}`, path.join(ws.root, `${prefix}${i}`));
    };
    await chain('r', 40, 'README.md');
    await chain('w', 40, 'made.txt');
    await chain('x', 41, 'README.md');
    expect(await ws.call('read_file', { path: 'r1' })).toBe('readme\n');
    expect(await ws.call('write_file', { path: 'w1', content: 'end' })).toBe('wrote 3 bytes to w1');
    expect(await readFile(path.join(ws.root, 'made.txt'), 'utf8')).toBe('end');
    await expect(ws.call('read_file', { path: 'x1' })).rejects.toThrow(/^cannot resolve 'x1': too many levels of symlinks$/);
  });

  it('dangling links through a missing directory are counted one by one: 40 are followed, 41 are too many', async () => {
    // Each target goes through `ghost`, which does not exist: every realpath stops after one link,
    // so only the count of dangling links followed can stop a longer chain.
    const chain = async (prefix: string, length: number): Promise<void> => {
      for (let i = 1; i <= length; i++) await symlink(i === length ? 'end.txt' : `ghost/../${prefix}${i + 1}`, path.join(ws.root, `${prefix}${i}`));
    };
    await chain('k', 40);
    await chain('m', 41);
    await expect(ws.call('read_file', { path: 'k1' })).rejects.toThrow(/^no such file: k1$/);
    await expect(ws.call('read_file', { path: 'm1' })).rejects.toThrow(/^cannot resolve 'm1': too many levels of symlinks$/);
    expect(await ws.call('read_file', { path: 'm1' }).catch((error: unknown) => (error instanceof WorkspaceError ? error.kind : error))).toBe('io');
  });

  it('a file three directories down is found in the innermost one', async () => {
    await mkdir(path.join(ws.root, 'a', 'b', 'c'), { recursive: true });
    await writeFile(path.join(ws.root, 'a', 'b', 'c', 'f.txt'), 'deep\n');
    await writeFile(path.join(ws.root, 'a', 'f.txt'), 'shallow\n');
    expect(await ws.call('read_file', { path: 'a/b/c/f.txt' })).toBe('deep\n');
    expect(await ws.call('write_file', { path: 'a/b/c/g.txt', content: 'g' })).toBe('wrote 1 bytes to a/b/c/g.txt');
    expect(await readFile(path.join(ws.root, 'a', 'b', 'c', 'g.txt'), 'utf8')).toBe('g');
  });

  it('. and .. inside a link target are walked like the kernel walks them', async () => {
    await mkdir(path.join(ws.root, 'sub'));
    await writeFile(path.join(ws.root, 'sub', 'README.md'), 'the one in sub\n');
    await symlink('sub/./../README.md', path.join(ws.root, 'dotted'));
    await symlink(`${ws.root}/./sub/../README.md`, path.join(ws.root, 'abs-dotted'));
    expect(await ws.call('read_file', { path: 'dotted' })).toBe('readme\n');
    expect(await ws.call('read_file', { path: 'abs-dotted' })).toBe('readme\n');
  });

  it('an absolute link through a symlinked ancestor that names a subdirectory lands in that subdirectory', async () => {
    await symlink(path.join(ws.root, 'src'), path.join(ws.base, 'src-alias'));
    await writeFile(path.join(ws.root, 'a.ts'), 'the one at the top\n');
    await symlink(path.join(ws.base, 'src-alias', 'a.ts'), path.join(ws.root, 'deep-alias.ts'));
    expect(await ws.call('read_file', { path: 'deep-alias.ts' })).toBe('alpha\n');
  });

  it('a dangling absolute link through a symlinked ancestor into missing directories is written through', async () => {
    await symlink(ws.root, path.join(ws.base, 'alias'));
    await symlink(path.join(ws.base, 'alias', 'no', 'such', 'f.txt'), path.join(ws.root, 'to-nowhere'));
    await expect(ws.call('read_file', { path: 'to-nowhere' })).rejects.toThrow(/^no such file: to-nowhere$/);
    expect(await ws.call('write_file', { path: 'to-nowhere', content: 'made' })).toBe('wrote 4 bytes to to-nowhere');
    expect(await readFile(path.join(ws.root, 'no', 'such', 'f.txt'), 'utf8')).toBe('made');
  });

  it('a dangling absolute link through a symlinked ancestor that climbs out of a missing directory is refused', async () => {
    await symlink(ws.root, path.join(ws.base, 'alias'));
    await symlink(`${path.join(ws.base, 'alias', 'gone')}/../../outside/planted.txt`, path.join(ws.root, 'sneaky'));
    await expect(ws.call('write_file', { path: 'sneaky', content: 'x' })).rejects.toThrow(
      /^refused: 'sneaky' leads outside the working directory through a symlink$/,
    );
  });

  it('a dangling absolute link into a missing directory inside is written through', async () => {
    await symlink(path.join(ws.root, 'newdir', 'deeper', 'f.txt'), path.join(ws.root, 'to-new'));
    expect(await ws.call('write_file', { path: 'to-new', content: 'new' })).toBe('wrote 3 bytes to to-new');
    expect(await readFile(path.join(ws.root, 'newdir', 'deeper', 'f.txt'), 'utf8')).toBe('new');
  });
});

describe('what is not a file-system fault is passed on as it is', () => {
  it('an abort while a listing or a search runs', async () => {
    for (const [tool, input] of [
      ['list_dir', { recursive: true }],
      ['search_files', { pattern: 'x' }],
    ] as const) {
      const controller = new AbortController();
      const pending = ws.call(tool, input, controller.signal);
      controller.abort();
      const error = await pending.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      expect([tool, (error as Error).name, error instanceof WorkspaceError]).toEqual([tool, 'AbortError', false]);
    }
  });
});

describe('calls at the same time', () => {
  it('writes in parallel into the same new directories all succeed, whichever makes each directory first', async () => {
    const names = Array.from({ length: 8 }, (_, i) => `f${i}.txt`);
    const results = await Promise.all(names.map((name) => ws.call('write_file', { path: `new/deeper/${name}`, content: name })));
    expect(results).toEqual(names.map((name) => `wrote ${name.length} bytes to new/deeper/${name}`));
    expect(readdirSync(path.join(ws.root, 'new', 'deeper')).sort()).toEqual(names);
  });
});

describe('resources', () => {
  it('every directory a call opens is closed when it ends, whether it succeeded or not', async () => {
    await mkdir(path.join(ws.root, 'a', 'b'), { recursive: true });
    await writeFile(path.join(ws.root, 'a', 'b', 'f.txt'), 'f\n');
    const openFds = (): number => readdirSync('/proc/self/fd').length;
    // Warm up whatever the first calls open for good (module loading, thread pool).
    await ws.call('read_file', { path: 'a/b/f.txt' });
    const before = openFds();
    for (let i = 0; i < 5; i++) {
      await ws.call('read_file', { path: 'a/b/f.txt' });
      await ws.call('list_dir', { path: 'a/b' });
      await ws.call('write_file', { path: `new${i}/x/y.txt`, content: 'y' });
      await ws.call('write_file', { path: 'a/b/f.txt', content: `f${i}\n` });
      await ws.call('read_file', { path: 'a/b/missing.txt' }).catch(() => undefined);
      await ws.call('read_file', { path: 'a/b' }).catch(() => undefined);
    }
    expect(openFds()).toBe(before);
  });
});
