import { describe, expect, it } from 'vitest';
import { FileError } from '../../../src/engine/fs/fileError.js';
import { HeldLines } from '../../../src/engine/fs/heldLines.js';

/**
 * The lines of exarch's append-only files (session logs, the trace, a recording) while the file
 * cannot be written (issue 37, hole 3): held in order, written whole once it can be, the fault said
 * once; past 16 MiB held, given up. The file here is a list of appends that refuses while `full`
 * (the CLI tests fill a real disk: test/e2e/hostile/diskFull.test.ts).
 */

function file() {
  const appended: string[] = [];
  const faults: FileError[] = [];
  const state = { full: false };
  const lines = new HeldLines(
    (data) => {
      if (state.full) throw Object.assign(new Error('no space'), { code: 'ENOSPC' });
      appended.push(data);
    },
    (error) => new FileError('no-space', 'log.jsonl', (error as Error).message, { what: 'the log', writing: true }),
    (fault) => faults.push(fault),
  );
  return { lines, appended, faults, state };
}

describe('HeldLines', () => {
  it('writes what is held as one append, and nothing when nothing is held', () => {
    const { lines, appended } = file();
    lines.flush();
    lines.add('a\n');
    lines.add('b\n');
    expect(lines.held).toBe(4);
    lines.flush((text) => text.toUpperCase());
    lines.flush();
    expect(appended).toEqual(['A\nB\n']);
    expect([lines.held, lines.heldSinceFault, lines.hasFaulted]).toEqual([0, 0, false]);
  });

  it('holds the lines of a failed write, says the fault once, and writes them all, in order, once it can', () => {
    const { lines, appended, faults, state } = file();
    state.full = true;
    lines.add('1\n');
    lines.flush();
    lines.add('22\n');
    expect([lines.held, lines.heldSinceFault]).toEqual([5, 3]);
    lines.flush();
    expect(faults.map((f) => f.message)).toEqual([expect.stringContaining('no space')]);
    expect(lines.hasFaulted).toBe(true);
    state.full = false;
    lines.add('333\n');
    lines.flush();
    expect(appended).toEqual(['1\n22\n333\n']);
    expect([lines.held, lines.heldSinceFault]).toEqual([0, 0]);
  });

  it('gives the file up past 16 MiB held: nothing more is kept or written, and the fault is still said once', () => {
    const { lines, appended, faults, state } = file();
    state.full = true;
    const mib = `${'x'.repeat(1024 * 1024 - 1)}\n`;
    for (let i = 0; i < 16; i++) lines.add(mib);
    lines.flush();
    // 16 MiB exactly is still held.
    expect(lines.held).toBe(16 * 1024 * 1024);
    lines.add('one more\n');
    lines.flush();
    expect(lines.held).toBe(0);
    state.full = false;
    lines.add('after\n');
    lines.flush();
    expect(lines.held).toBe(0);
    expect(appended).toEqual([]);
    expect(faults).toHaveLength(1);
  });
});
