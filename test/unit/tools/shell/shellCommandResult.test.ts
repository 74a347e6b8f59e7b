import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tool } from '../../../../src/tools/defineTool.js';
import { WorkspaceError } from '../../../../src/tools/workspace/paths.js';
import { runShellTool } from '../../../../src/tools/workspace/runShell.js';

/**
 * What the model reads back from run_shell (unsandboxed here; test/e2e/sandbox/shellSandboxed.test.ts runs
 * the same tool under bubblewrap): the tool's description and limits, the exit status line, the
 * stdout and stderr sections, and how a long output is cut.
 */

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'exarch-shell-result-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

async function run(command: string, tool: Tool = runShellTool(root)): Promise<string> {
  const prepared = tool.prepare({ command });
  if (!prepared.ok) throw new Error(prepared.error);
  return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
}

/** Runs `cat` on a file holding exactly `content`, to stdout or to stderr. */
async function emit(content: string | Buffer, stream: 'stdout' | 'stderr' = 'stdout'): Promise<string> {
  const file = path.join(root, `out-${Math.random().toString(36).slice(2)}`);
  await writeFile(file, content);
  return run(stream === 'stdout' ? `cat '${file}'` : `cat '${file}' >&2`);
}

describe('the run_shell tool', () => {
  it('describes itself with its output caps and its time limit', () => {
    expect(runShellTool(root).spec.description).toBe(
      'Run a shell command (/bin/sh -c) in the working directory, without a terminal or stdin. Returns the exit code, ' +
        'then the last 20k characters of stdout and 10k of stderr. ' +
        'Killed (with everything it started) after 120 s; processes it leaves in the background end with it. ' +
        'Not interactive: pass flags like --yes, avoid pagers and watchers.',
    );
    expect(runShellTool(root, 1_500).spec.description).toContain('Killed (with everything it started) after 1500 ms; ');
    expect(runShellTool(root, 3_000).spec.description).toContain('Killed (with everything it started) after 3 s; ');
  });

  it('under the sandbox, says what is writable and whether the network is reachable', () => {
    const sandboxed = (network: boolean): string => runShellTool(root, 60_000, { kind: 'bubblewrap', bwrap: '/usr/bin/bwrap', network }).spec.description;
    expect(sandboxed(false)).toBe(
      'Run a shell command (/bin/sh -c) in the working directory, without a terminal or stdin. Returns the exit code, ' +
        'then the last 20k characters of stdout and 10k of stderr. ' +
        'Killed (with everything it started) after 60 s; processes it leaves in the background end with it. ' +
        'It runs in a sandbox: only the working directory and /tmp are writable, there is no network. ' +
        'Not interactive: pass flags like --yes, avoid pagers and watchers.',
    );
    expect(sandboxed(true)).toContain('It runs in a sandbox: only the working directory and /tmp are writable, the network is reachable. ');
  });

  it('is named run_shell, takes a non-empty command, and is never run twice after a crash', () => {
    const tool = runShellTool(root);
    expect(tool.name).toBe('run_shell');
    expect(tool.spec.input_schema).toMatchObject({
      properties: { command: { type: 'string', minLength: 1, description: 'A shell command line, run by /bin/sh -c in the working directory.' } },
      required: ['command'],
    });
    expect(tool.idempotent).toBe(false);
    expect(tool.prepare({ command: '' }).ok).toBe(false);
    expect(tool.prepare({}).ok).toBe(false);
  });

  it("its own time limit is the command's plus ten seconds, so the command's timeout reports first", () => {
    expect(runShellTool(root, 1_500).timeoutMs).toBe(11_500);
    expect(runShellTool(root).timeoutMs).toBe(130_000);
  });

  it('refuses a time limit that is not a positive whole number of milliseconds', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
      expect(() => runShellTool(root, bad)).toThrow(new RangeError(`exarch: shellTimeoutMs must be a positive integer, got ${String(bad)}`));
    }
    expect(runShellTool(root, 1).timeoutMs).toBe(10_001);
  });
});

describe('the result text', () => {
  it('is the exit code, then stdout, then stderr, each section only when there is output', async () => {
    expect(await run('echo out; echo err >&2; exit 4')).toBe('exit code: 4\n--- stdout ---\nout\n--- stderr ---\nerr');
    expect(await run('echo only-out')).toBe('exit code: 0\n--- stdout ---\nonly-out');
    expect(await run('echo only-err >&2; exit 1')).toBe('exit code: 1\n--- stderr ---\nonly-err');
    expect(await run('exit 0')).toBe('exit code: 0\n(no output)');
  });

  it('drops only the final newline of an output', async () => {
    expect(await run("printf 'a\\nb\\n'")).toBe('exit code: 0\n--- stdout ---\na\nb');
    expect(await run("printf 'a\\n\\n'")).toBe('exit code: 0\n--- stdout ---\na\n');
    expect(await run("printf 'no newline'")).toBe('exit code: 0\n--- stdout ---\nno newline');
  });

  it('names the signal that killed the command', async () => {
    expect(await run('echo before; kill -KILL $$')).toBe('killed by SIGKILL\n--- stdout ---\nbefore');
    expect(await run('kill -TERM $$')).toBe('killed by SIGTERM\n(no output)');
  });

  it('says when the working directory cannot be entered', async () => {
    const missing = path.join(root, 'no-such-dir');
    const error = await run('true', runShellTool(missing)).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkspaceError);
    expect(error).toMatchObject({ kind: 'io', message: `the working directory ${missing} is not accessible` });
  });

  it('says when the program cannot be started', async () => {
    const tool = runShellTool(root, 5_000, { kind: 'bubblewrap', bwrap: path.join(root, 'no-bwrap-here'), network: false });
    const error = await run('true', tool).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(WorkspaceError);
    expect(error).toMatchObject({ kind: 'io', message: `could not start ${root}/no-bwrap-here: spawn ${root}/no-bwrap-here ENOENT` });
  });
});

describe('what a command inherits', () => {
  it('no descriptor beyond stdin, stdout and stderr', async () => {
    expect(await run('for fd in 3 4 5; do [ -e /proc/$$/fd/$fd ] && echo "fd $fd open"; done; echo checked')).toBe('exit code: 0\n--- stdout ---\nchecked');
  });
});

describe('a long output', () => {
  it('keeps stdout whole up to 20,000 characters, and the last 20,000 with a count of the bytes left out beyond', async () => {
    expect(await emit('x'.repeat(20_000))).toBe(`exit code: 0\n--- stdout ---\n${'x'.repeat(20_000)}`);
    expect(await emit(`y${'x'.repeat(20_000)}`)).toBe(`exit code: 0\n--- stdout ---\n[… first 1 bytes of stdout omitted]\n${'x'.repeat(20_000)}`);
  });

  it('keeps stderr whole up to 10,000 characters, and the last 10,000 beyond', async () => {
    expect(await emit('e'.repeat(10_000), 'stderr')).toBe(`exit code: 0\n--- stderr ---\n${'e'.repeat(10_000)}`);
    expect(await emit(`f${'e'.repeat(10_000)}`, 'stderr')).toBe(`exit code: 0\n--- stderr ---\n[… first 1 bytes of stderr omitted]\n${'e'.repeat(10_000)}`);
  });

  it('counts characters, not bytes, and the omitted count in bytes (é is two)', async () => {
    expect(await emit('é'.repeat(20_000))).toBe(`exit code: 0\n--- stdout ---\n${'é'.repeat(20_000)}`);
    expect(await emit('é'.repeat(20_003))).toBe(`exit code: 0\n--- stdout ---\n[… first 6 bytes of stdout omitted]\n${'é'.repeat(20_000)}`);
    // U+FF3F (three bytes) sits above the surrogates: a cut before it is already a character boundary.
    expect(await emit('＿'.repeat(20_001))).toBe(`exit code: 0\n--- stdout ---\n[… first 3 bytes of stdout omitted]\n${'＿'.repeat(20_000)}`);
  });

  it('never cuts a character outside the Basic Multilingual Plane in half', async () => {
    // 😀 is two UTF-16 units and four bytes: with 'a' after 15,000 of them the cut falls on a
    // second half, so one more unit goes; with 'a' before, on a first half, so none does.
    expect(await emit(`${'😀'.repeat(15_000)}a`)).toBe(`exit code: 0\n--- stdout ---\n[… first 20004 bytes of stdout omitted]\n${'😀'.repeat(9_999)}a`);
    expect(await emit(`a${'😀'.repeat(15_000)}`)).toBe(`exit code: 0\n--- stdout ---\n[… first 20001 bytes of stdout omitted]\n${'😀'.repeat(10_000)}`);
    // The lowest and the highest second halves (U+10000 ends in DC00, U+1F3FF in DFFF).
    expect(await emit(`${'\u{10000}'.repeat(15_000)}a`)).toBe(
      `exit code: 0\n--- stdout ---\n[… first 20004 bytes of stdout omitted]\n${'\u{10000}'.repeat(9_999)}a`,
    );
    expect(await emit(`${'\u{1F3FF}'.repeat(15_000)}a`)).toBe(
      `exit code: 0\n--- stdout ---\n[… first 20004 bytes of stdout omitted]\n${'\u{1F3FF}'.repeat(9_999)}a`,
    );
  });

  it('that ends in small pieces after a large one still keeps its last 20,000 characters', async () => {
    // Three writes, apart: the pipe most likely delivers them as three pieces, the first 64 KiB.
    const writer = "const w=(s,then)=>process.stdout.write(s,()=>setTimeout(then,100));w('a'.repeat(65536),()=>w('b'.repeat(15000),()=>w('end\\n',()=>{})))";
    const text = await run(`'${process.execPath}' -e "${writer}"`);
    expect(text).toBe(`exit code: 0\n--- stdout ---\n[… first 60540 bytes of stdout omitted]\n${'a'.repeat(4_996)}${'b'.repeat(15_000)}end`);
  });

  it('cuts between characters of every UTF-8 length, at the edges of each range', async () => {
    // [character, its bytes]: the lowest and highest of two-, three- and four-byte sequences, and
    // the edges the decoder treats specially (after E0, ED, F0, F4).
    const table: [string, number][] = [
      ['\u{80}', 2],
      ['\u{7FF}', 2],
      ['\u{800}', 3],
      ['\u{D7FF}', 3],
      ['\u{E000}', 3],
      ['\u{FFFD}', 3],
      ['\u{10000}', 4],
      ['\u{10FFFF}', 4],
    ];
    for (const [character, size] of table) {
      const units = character.length; // one, or two for a surrogate pair
      const count = 20_000 / units;
      expect(await emit(character.repeat(count + 1))).toBe(
        `exit code: 0\n--- stdout ---\n[… first ${size} bytes of stdout omitted]\n${character.repeat(count)}`,
      );
    }
  });

  it('that is not UTF-8 shows one replacement character a byte, and counts the bytes it leaves out', async () => {
    expect(await emit(Buffer.alloc(30_000, 0xff))).toBe(`exit code: 0\n--- stdout ---\n[… first 10000 bytes of stdout omitted]\n${'\uFFFD'.repeat(20_000)}`);
    expect(await emit(Buffer.alloc(100_000, 0xff))).toBe(`exit code: 0\n--- stdout ---\n[… first 80000 bytes of stdout omitted]\n${'\uFFFD'.repeat(20_000)}`);
    // Sequences the decoder refuses byte by byte: overlong forms, a surrogate, past U+10FFFF, leads that never start one, a lone continuation.
    const invalid: number[][] = [
      [0xc0, 0x80],
      [0xc1, 0xbf],
      [0xe0, 0x9f, 0xbf],
      [0xed, 0xa0, 0x80],
      [0xf0, 0x8f, 0xbf, 0xbf],
      [0xf4, 0x90, 0x80, 0x80],
      [0xf5, 0x80, 0x80, 0x80],
      [0x80],
    ];
    for (const sequence of invalid) {
      // 'x' then the sequence repeated past 20,000 bytes: every byte is one U+FFFD.
      const repeats = Math.ceil(20_000 / sequence.length) + 1;
      const bytes = Buffer.concat([Buffer.from('x'), Buffer.from(Array.from({ length: repeats }, () => sequence).flat())]);
      const expectedDropped = bytes.length - 20_000;
      expect(await emit(bytes)).toBe(`exit code: 0\n--- stdout ---\n[… first ${expectedDropped} bytes of stdout omitted]\n${'\uFFFD'.repeat(20_000)}`);
    }
  });

  it('counts a four-byte character and a stray byte after it apart', async () => {
    // 😀 then a stray continuation byte: three units for five bytes; the cut keeps 6,666 of them and one stray byte.
    const bytes = Buffer.concat(Array.from({ length: 7_000 }, () => Buffer.from([0xf0, 0x9f, 0x98, 0x80, 0x80])));
    expect(await emit(bytes)).toBe(`exit code: 0\n--- stdout ---\n[… first 1669 bytes of stdout omitted]\n\uFFFD${'😀\uFFFD'.repeat(6_666)}`);
  });

  it('counts the bytes of a character cut off by plain text one by one, keeping the output under the cap', async () => {
    // F0 9F 98 is 😀 without its last byte, and 'A' ends it: the decoder shows one U+FFFD and the
    // 'A'; the cut counts four units for the four bytes, so it keeps 5,000 of them (10,000 units).
    const bytes = Buffer.concat(Array.from({ length: 6_000 }, () => Buffer.from([0xf0, 0x9f, 0x98, 0x41])));
    expect(await emit(bytes)).toBe(`exit code: 0\n--- stdout ---\n[… first 4000 bytes of stdout omitted]\n${'\uFFFDA'.repeat(5_000)}`);
  });

  it('that ends in a cut-off character keeps that stub as one replacement character', async () => {
    // E2 82 is the start of €, without its last byte: the decoder shows one U+FFFD for the two.
    const bytes = Buffer.concat([Buffer.from('x'.repeat(20_001)), Buffer.from([0xe2, 0x82])]);
    expect(await emit(bytes)).toBe(`exit code: 0\n--- stdout ---\n[… first 3 bytes of stdout omitted]\n${'x'.repeat(19_998)}\uFFFD`);
  });

  it('of hundreds of kilobytes keeps only its end', async () => {
    const text = await run("head -c 300000 /dev/zero | tr '\\0' x; echo; echo the-end");
    expect(text).toBe(`exit code: 0\n--- stdout ---\n[… first 280009 bytes of stdout omitted]\n${'x'.repeat(19_991)}\nthe-end`);
  });
});
