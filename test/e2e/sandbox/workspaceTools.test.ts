import { chmod, mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';

/** The workspace tools `exarch run` gives its agents: confinement to the working directory, and each tool's contract. */

let base: string;
/** The working directory. */
let root: string;
/** A sibling of the working directory, which no tool may reach. */
let outside: string;

beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'exarch-workspace-'));
  root = path.join(base, 'work');
  outside = path.join(base, 'outside');
  await mkdir(path.join(root, 'src', 'nested'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(root, 'README.md'), '# hello\nworld\n');
  await writeFile(path.join(root, 'src', 'a.ts'), 'export const a = 1;\n// TODO: more\n');
  await writeFile(path.join(root, 'src', 'nested', 'b.js'), 'const b = 2; // TODO later\n');
  await writeFile(path.join(outside, 'secret.txt'), 'top secret\n');
  // Run as root (CI), exarch runs sandboxed commands as the working directory's owner: a user's project.
  if (canSwitchUser) await giveToNobody(base, root);
});

afterEach(async () => {
  await rm(base, { recursive: true, force: true });
});

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;

/** Calls a tool the way the session does: validation by `prepare`, then the prepared run. */
async function call(tools: readonly Tool[], name: string, input: unknown, signal: AbortSignal = new AbortController().signal): Promise<string> {
  const tool = tools.find((t) => t.name === name);
  if (tool === undefined) throw new Error(`no tool named ${name}`);
  const prepared = tool.prepare(input);
  if (!prepared.ok) throw new Error(prepared.error);
  const value = await prepared.value({ agent, toolUseId: 'toolu_1', signal });
  if (typeof value !== 'string') throw new Error(`expected text from ${name}, got ${typeof value}`);
  return value;
}

const names = (tools: readonly Tool[]): string[] => tools.map((t) => t.name);

describe('which tools are offered', () => {
  it('read_file, list_dir and search_files by default; write_file and run_shell only when allowed', () => {
    expect(names(workspaceTools({ root }))).toEqual(['read_file', 'list_dir', 'search_files']);
    expect(names(workspaceTools({ root, allowWrite: true }))).toEqual(['read_file', 'list_dir', 'search_files', 'write_file']);
    expect(names(workspaceTools({ root, allowShell: true }))).toEqual(['read_file', 'list_dir', 'search_files', 'run_shell']);
  });

  it('every tool has a description and an object input schema', () => {
    for (const tool of workspaceTools({ root, allowWrite: true, allowShell: true })) {
      expect(tool.spec.description.length).toBeGreaterThan(40);
      expect(tool.spec.input_schema['type']).toBe('object');
    }
  });

  it('refuses a working directory that does not exist', () => {
    expect(() => workspaceTools({ root: path.join(base, 'missing') })).toThrow(/does not exist or is not a directory/);
  });
});

describe('confinement to the working directory', () => {
  const tools = (): Tool[] => workspaceTools({ root, allowWrite: true });

  it('reads a file inside the working directory', async () => {
    expect(await call(tools(), 'read_file', { path: 'README.md' })).toBe('# hello\nworld\n');
    expect(await call(tools(), 'read_file', { path: './src/../README.md' })).toBe('# hello\nworld\n');
  });

  it('refuses a path that escapes with ..', async () => {
    await expect(call(tools(), 'read_file', { path: '../outside/secret.txt' })).rejects.toThrow(
      "refused: '../outside/secret.txt' is outside the working directory",
    );
    await expect(call(tools(), 'list_dir', { path: 'src/../..' })).rejects.toThrow("refused: 'src/../..' is outside the working directory");
    await expect(call(tools(), 'write_file', { path: '../x', content: 'x' })).rejects.toThrow("refused: '../x' is outside the working directory");
  });

  it('refuses an absolute path', async () => {
    await expect(call(tools(), 'read_file', { path: '/etc/passwd' })).rejects.toThrow(
      "refused: '/etc/passwd' is an absolute path; use a path relative to the working directory",
    );
    await expect(call(tools(), 'search_files', { pattern: 'root', path: '/etc' })).rejects.toThrow(/'\/etc' is an absolute path/);
  });

  it('refuses a file symlink that points outside', async () => {
    await symlink(path.join(outside, 'secret.txt'), path.join(root, 'leak.txt'));
    await expect(call(tools(), 'read_file', { path: 'leak.txt' })).rejects.toThrow("refused: 'leak.txt' leads outside the working directory through a symlink");
    await expect(call(tools(), 'write_file', { path: 'leak.txt', content: 'pwned' })).rejects.toThrow(/leads outside the working directory/);
    expect(await readFile(path.join(outside, 'secret.txt'), 'utf8')).toBe('top secret\n');
  });

  it('refuses a directory symlink that points outside, wherever it is in the path', async () => {
    await symlink(outside, path.join(root, 'src', 'out'));
    await expect(call(tools(), 'read_file', { path: 'src/out/secret.txt' })).rejects.toThrow(
      "refused: 'src/out/secret.txt' leads outside the working directory through a symlink",
    );
    await expect(call(tools(), 'list_dir', { path: 'src/out' })).rejects.toThrow(/leads outside the working directory through a symlink/);
    await expect(call(tools(), 'search_files', { pattern: 'secret', path: 'src/out' })).rejects.toThrow(/through a symlink/);
  });

  it('write_file refuses a symlinked parent directory that escapes, even for a file that does not exist yet', async () => {
    await symlink(outside, path.join(root, 'out'));
    await expect(call(tools(), 'write_file', { path: 'out/new/file.txt', content: 'x' })).rejects.toThrow(
      "refused: 'out/new/file.txt' leads outside the working directory through a symlink",
    );
    await expect(readFile(path.join(outside, 'new', 'file.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('write_file refuses a dangling symlink whose target is outside', async () => {
    await symlink(path.join(outside, 'created-by-agent.txt'), path.join(root, 'dangling'));
    await expect(call(tools(), 'write_file', { path: 'dangling', content: 'x' })).rejects.toThrow(/'dangling' leads outside the working directory/);
    await expect(readFile(path.join(outside, 'created-by-agent.txt'))).rejects.toThrow(/ENOENT/);
  });

  it('allows a symlink that stays inside the working directory', async () => {
    await symlink(path.join(root, 'src'), path.join(root, 'source'));
    await symlink('README.md', path.join(root, 'readme-link'));
    expect(await call(tools(), 'read_file', { path: 'source/a.ts' })).toBe('export const a = 1;\n// TODO: more\n');
    expect(await call(tools(), 'read_file', { path: 'readme-link' })).toBe('# hello\nworld\n');
    expect(await call(tools(), 'write_file', { path: 'source/c.ts', content: 'c' })).toBe('wrote 1 bytes to source/c.ts');
    expect(await readFile(path.join(root, 'src', 'c.ts'), 'utf8')).toBe('c');
  });

  it('a missing file is a clear one-line error', async () => {
    await expect(call(tools(), 'read_file', { path: 'nope.txt' })).rejects.toThrow(/^no such file: nope\.txt$/);
    await expect(call(tools(), 'list_dir', { path: 'nope' })).rejects.toThrow(/^no such directory: nope$/);
    await expect(call(tools(), 'search_files', { pattern: 'x', path: 'nope' })).rejects.toThrow(/^no such file: nope$/);
  });

  it('invalid input is refused by validation, naming the field', () => {
    const readTool = tools().find((t) => t.name === 'read_file');
    const prepared = readTool?.prepare({ path: 'README.md', offset: 0 });
    expect(prepared?.ok).toBe(false);
    expect(prepared?.ok === false && prepared.error).toMatch(/^invalid input for tool 'read_file': offset: /);
  });
});

describe('read_file', () => {
  const tools = (): Tool[] => workspaceTools({ root });
  const numbered = (n: number): string => `${Array.from({ length: n }, (_, i) => `line ${i + 1}`).join('\n')}\n`;

  it('offset and limit return part of the file under a header saying which part', async () => {
    await writeFile(path.join(root, 'ten.txt'), numbered(10));
    expect(await call(tools(), 'read_file', { path: 'ten.txt', offset: 3, limit: 2 })).toBe(
      'ten.txt (lines 3–4 of 10)\nline 3\nline 4\n[… 6 more lines: call read_file with offset=5 to read on]',
    );
    expect(await call(tools(), 'read_file', { path: 'ten.txt', offset: 9 })).toBe('ten.txt (lines 9–10 of 10)\nline 9\nline 10');
    await expect(call(tools(), 'read_file', { path: 'ten.txt', offset: 11 })).rejects.toThrow("offset 11 is past the end of 'ten.txt', which has 10 lines");
  });

  it('a large file is returned 2,000 lines at a time, saying how to read on', async () => {
    await writeFile(path.join(root, 'big.txt'), numbered(2_500));
    const first = await call(tools(), 'read_file', { path: 'big.txt' });
    expect(first.split('\n')[0]).toBe('big.txt (lines 1–2000 of 2500)');
    expect(first).toContain('\nline 2000\n[… 500 more lines: call read_file with offset=2001 to read on]');
    const rest = await call(tools(), 'read_file', { path: 'big.txt', offset: 2001 });
    expect(rest.split('\n')[0]).toBe('big.txt (lines 2001–2500 of 2500)');
    expect(rest.endsWith('line 2500')).toBe(true);
  });

  it('cuts very long lines and bounds the characters of one call', async () => {
    await writeFile(path.join(root, 'wide.txt'), `${'x'.repeat(5_000)}\nshort\n`);
    const text = await call(tools(), 'read_file', { path: 'wide.txt' });
    expect(text.split('\n')[0]).toBe('wide.txt (lines 1–2 of 2; long lines cut)');
    expect(text).toContain(`${'x'.repeat(2_000)} [… line cut: 5000 bytes in all]\nshort`);
    await writeFile(path.join(root, 'many-wide.txt'), `${'y'.repeat(1_500)}\n`.repeat(100));
    const bounded = await call(tools(), 'read_file', { path: 'many-wide.txt' });
    expect(bounded.length).toBeLessThan(45_000);
    expect(bounded).toMatch(/^many-wide\.txt \(lines 1–\d+ of 100\)\n/);
    expect(bounded).toMatch(/more lines: call read_file with offset=\d+ to read on]$/);
  });

  it('refuses a binary file', async () => {
    await writeFile(path.join(root, 'image.png'), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0x02]));
    await expect(call(tools(), 'read_file', { path: 'image.png' })).rejects.toThrow(
      "'image.png' looks like a binary file (it contains NUL bytes); read_file only reads text",
    );
  });

  it('says when a file is empty and when the path is a directory', async () => {
    await writeFile(path.join(root, 'empty.txt'), '');
    expect(await call(tools(), 'read_file', { path: 'empty.txt' })).toBe('(empty.txt is empty)');
    await expect(call(tools(), 'read_file', { path: 'src' })).rejects.toThrow("'src' is a directory; use list_dir to see what it contains");
  });
});

describe('list_dir', () => {
  const tools = (): Tool[] => workspaceTools({ root });

  it('lists the working directory sorted, directories marked with /', async () => {
    expect(await call(tools(), 'list_dir', {})).toBe('README.md\nsrc/');
    expect(await call(tools(), 'list_dir', { path: 'src' })).toBe('src/a.ts\nsrc/nested/');
  });

  it('recursive lists the tree, showing node_modules and .git but not their contents, and says so', async () => {
    await mkdir(path.join(root, 'node_modules', 'left-pad'), { recursive: true });
    await writeFile(path.join(root, 'node_modules', 'left-pad', 'index.js'), 'module.exports = 1;\n');
    await mkdir(path.join(root, '.git'));
    await writeFile(path.join(root, '.git', 'HEAD'), 'ref: refs/heads/main\n');
    expect(await call(tools(), 'list_dir', { recursive: true })).toBe(
      [
        '.git/',
        'README.md',
        'node_modules/',
        'src/',
        'src/a.ts',
        'src/nested/',
        'src/nested/b.js',
        '[not expanded: .git/, node_modules/ — list one explicitly to see inside]',
      ].join('\n'),
    );
    expect(await call(tools(), 'list_dir', { path: 'node_modules' })).toBe('node_modules/left-pad/');
  });

  it('depth bounds how far down it lists', async () => {
    expect(await call(tools(), 'list_dir', { recursive: true, depth: 2 })).toBe('README.md\nsrc/\nsrc/a.ts\nsrc/nested/');
  });

  it('shows symlinks with their target without following them', async () => {
    await symlink(outside, path.join(root, 'out'));
    const listing = await call(tools(), 'list_dir', { recursive: true });
    expect(listing).toContain(`out -> ${outside}`);
    expect(listing).not.toContain('secret.txt');
  });

  it('cuts a huge listing with a note', async () => {
    await mkdir(path.join(root, 'many'));
    await Promise.all(Array.from({ length: 1_005 }, (_, i) => writeFile(path.join(root, 'many', `f${String(i).padStart(4, '0')}`), '')));
    const listing = (await call(tools(), 'list_dir', { path: 'many' })).split('\n');
    expect(listing).toHaveLength(1_001);
    expect(listing.at(-1)).toBe('[listing cut at 1000 entries: list a subdirectory, or use a smaller depth]');
  });
});

describe('search_files', () => {
  const tools = (): Tool[] => workspaceTools({ root });

  it('reports matches as path:line: text, skipping node_modules and binary files', async () => {
    await mkdir(path.join(root, 'node_modules', 'dep'), { recursive: true });
    await writeFile(path.join(root, 'node_modules', 'dep', 'index.js'), '// TODO in a dependency\n');
    await writeFile(path.join(root, 'blob.bin'), Buffer.concat([Buffer.from('TODO'), Buffer.from([0])]));
    expect(await call(tools(), 'search_files', { pattern: 'TODO' })).toBe(
      ['src/a.ts:2: // TODO: more', 'src/nested/b.js:1: const b = 2; // TODO later', '[not searched: 1 binary file; node_modules/ directories]'].join('\n'),
    );
  });

  it('narrows by path and glob, and says when nothing matched', async () => {
    expect(await call(tools(), 'search_files', { pattern: 'TODO', glob: '*.js' })).toBe('src/nested/b.js:1: const b = 2; // TODO later');
    expect(await call(tools(), 'search_files', { pattern: 'TODO', glob: 'src/**/*.js' })).toBe('src/nested/b.js:1: const b = 2; // TODO later');
    expect(await call(tools(), 'search_files', { pattern: 'TODO', glob: '*.{ts,md}' })).toBe('src/a.ts:2: // TODO: more');
    expect(await call(tools(), 'search_files', { pattern: 'const \\w+ = \\d', path: 'src/nested' })).toBe('src/nested/b.js:1: const b = 2; // TODO later');
    expect(await call(tools(), 'search_files', { pattern: 'todo', path: 'src/a.ts', ignoreCase: true })).toBe('src/a.ts:2: // TODO: more');
    expect(await call(tools(), 'search_files', { pattern: 'nothing here', glob: '*.md' })).toBe("no matches for /nothing here/ in '.' (files matching '*.md')");
  });

  it('an invalid regular expression is a clear error naming it', async () => {
    await expect(call(tools(), 'search_files', { pattern: 'foo(' })).rejects.toThrow("invalid regular expression 'foo(': missing closing )");
    await expect(call(tools(), 'search_files', { pattern: '(?<=a)b' })).rejects.toThrow('(RE2 syntax: no lookarounds or backreferences)');
  });

  it('stops at the match limit with a note', async () => {
    await writeFile(path.join(root, 'lots.txt'), 'match\n'.repeat(300));
    const lines = (await call(tools(), 'search_files', { pattern: 'match', path: 'lots.txt' })).split('\n');
    expect(lines).toHaveLength(201);
    expect(lines[0]).toBe('lots.txt:1: match');
    expect(lines.at(-1)).toBe('[stopped at 200 matches: narrow the pattern, path or glob to see the rest]');
  });

  it('stops when the call is aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('cancelled'));
    await expect(call(tools(), 'search_files', { pattern: 'TODO' }, controller.signal)).rejects.toThrow('cancelled');
  });
});

describe('write_file', () => {
  it('creates the file and its parent directories inside the working directory', async () => {
    const tools = workspaceTools({ root, allowWrite: true });
    expect(await call(tools, 'write_file', { path: 'out/deep/notes.md', content: 'héllo\n' })).toBe('wrote 7 bytes to out/deep/notes.md');
    expect(await readFile(path.join(root, 'out', 'deep', 'notes.md'), 'utf8')).toBe('héllo\n');
    expect(await call(tools, 'write_file', { path: 'README.md', content: 'replaced' })).toBe('wrote 8 bytes to README.md');
    expect(await readFile(path.join(root, 'README.md'), 'utf8')).toBe('replaced');
  });

  it('a file written over keeps its permission bits (it is replaced by a new file, see writeFile.ts)', async () => {
    await writeFile(path.join(root, 'run.sh'), 'echo old\n', { mode: 0o750 });
    await chmod(path.join(root, 'run.sh'), 0o750);
    expect(await call(workspaceTools({ root, allowWrite: true }), 'write_file', { path: 'run.sh', content: 'echo new\n' })).toBe('wrote 9 bytes to run.sh');
    expect((await stat(path.join(root, 'run.sh'))).mode & 0o777).toBe(0o750);
    expect(await readdir(root)).toEqual(['README.md', 'run.sh', 'src']);
  });

  it('refuses to write over a directory or through a file', async () => {
    const tools = workspaceTools({ root, allowWrite: true });
    await expect(call(tools, 'write_file', { path: 'src', content: 'x' })).rejects.toThrow("'src' is a directory");
    await expect(call(tools, 'write_file', { path: 'README.md/x', content: 'x' })).rejects.toThrow(
      /cannot write 'README.md\/x': a part of its directory path is a file/,
    );
  });
});

describe('run_shell', () => {
  const shell = (shellTimeoutMs?: number): Tool[] => workspaceTools({ root, allowShell: true, ...(shellTimeoutMs === undefined ? {} : { shellTimeoutMs }) });

  it('runs in the working directory and reports the exit code, stdout and stderr', async () => {
    expect(await call(shell(), 'run_shell', { command: 'pwd; ls' })).toMatch(/^exit code: 0\n--- stdout ---\n.*\/work\nREADME\.md\nsrc$/);
    expect(await call(shell(), 'run_shell', { command: 'echo oops >&2; exit 3' })).toBe('exit code: 3\n--- stderr ---\noops');
    expect(await call(shell(), 'run_shell', { command: 'true' })).toBe('exit code: 0\n(no output)');
  });

  it('keeps the end of a long output', async () => {
    const text = await call(shell(), 'run_shell', { command: 'seq 1 20000' });
    expect(text).toMatch(/^exit code: 0\n--- stdout ---\n\[… first \d+ bytes of stdout omitted\]\n/);
    expect(text.endsWith('\n19999\n20000')).toBe(true);
    expect(text.length).toBeLessThan(20_200);
  });

  it('kills the command and what it started on timeout', async () => {
    const marker = path.join(root, 'background-finished');
    const started = Date.now();
    const text = await call(shell(300), 'run_shell', { command: `echo started; (sleep 1; touch ${marker}) & sleep 30; echo never` });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(text).toBe('timed out after 300 ms: the command and everything it started were killed\n--- stdout ---\nstarted');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await expect(readFile(marker)).rejects.toThrow(/ENOENT/);
  });

  it('kills the command when the call is aborted', async () => {
    const controller = new AbortController();
    const marker = path.join(root, 'finished');
    const running = call(shell(), 'run_shell', { command: `sleep 2; touch ${marker}` }, controller.signal);
    setTimeout(() => controller.abort(new Error('cancelled by the session')), 100);
    await expect(running).rejects.toThrow('cancelled by the session');
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    await expect(readFile(marker)).rejects.toThrow(/ENOENT/);
  });

  it('its tool time limit leaves room for the command timeout to report first', () => {
    const tool = shell(1_000).find((t) => t.name === 'run_shell');
    expect(tool?.timeoutMs).toBeGreaterThan(1_000);
  });
});

describe('run_shell environment', () => {
  it('does not hand the API key to commands the agent runs', async () => {
    const { shellEnvironment } = await import('../../../src/tools/workspace/shellEnvironment.js');
    expect(shellEnvironment({ PATH: '/bin', ANTHROPIC_API_KEY: 'sk-secret', ANTHROPIC_AUTH_TOKEN: 't', HOME: '/h' })).toEqual({ PATH: '/bin', HOME: '/h' });
  });
});
