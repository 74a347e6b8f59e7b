import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';

/**
 * Group commit (issue 40): the journals of two runs in one process share each write to their
 * store. A process killed with a group buffered and not yet committed loses the whole group, never
 * part of it, and each run resumes from where its own journal stands: every effect exactly once,
 * both runs answered as an uninterrupted run is. The oracles: the effects file the tool appends
 * to, the seqs the doomed group held (printed by the fixture before it killed itself), and the
 * journal read with the test's own SQLite connection.
 */

const FIXTURE = fileURLToPath(new URL('../../fixtures/groupCommit/twoRuns.mjs', import.meta.url));
const STEPS = 6;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function fixture(dir: string, ...args: string[]): { status: number | null; signal: NodeJS.Signals | null; lines: Record<string, unknown>[] } {
  const child = spawnSync(process.execPath, [FIXTURE, dir, ...args], { encoding: 'utf8', timeout: 60_000 });
  if (child.stderr.trim() !== '') throw new Error(`the fixture wrote to stderr: ${child.stderr}`);
  const lines = child.stdout
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  return { status: child.status, signal: child.signal, lines };
}

/** The highest seq each run's journal holds, read from the file without exarch's code. */
function storedSeqs(dir: string): Record<string, number> {
  const db = new Database(join(dir, 'exarch.db'), { readonly: true });
  try {
    const runs = db.prepare('SELECT id, num AS n FROM runs').all() as { id: string; n: number }[];
    const bursts = db.prepare('SELECT key, last FROM bursts').all() as { key: number; last: number }[];
    const out: Record<string, number> = {};
    // A burst's key is the run's number × 2^32 + its first seq; `last` is its last seq.
    for (const { id, n } of runs) {
      const own = bursts.filter((b) => Math.floor(b.key / 2 ** 32) === n);
      out[id] = own.length === 0 ? 0 : Math.max(...own.map((b) => b.last));
    }
    return out;
  } finally {
    db.close();
  }
}

const effectsOf = (dir: string): string[] => {
  const file = join(dir, 'effects.log');
  return existsSync(file) ? readFileSync(file, 'utf8').trim().split('\n').filter(Boolean) : [];
};
const everyEffect = ['a', 'b'].flatMap((name) => Array.from({ length: STEPS }, (_, step) => `${name} ${step}`)).sort();

describe('group commit: a kill between a group of appends and its commit', () => {
  it('the uninterrupted pair: both runs done, every effect once, writes shared', () => {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-group-'));
    dirs.push(dir);
    const { status, lines } = fixture(dir, 'start', '0');
    expect(status).toBe(0);
    const last = lines.at(-1) as { ended: string[]; appends: number; shared: number };
    expect(last.ended).toEqual(['done', 'done']);
    // Both runs step in the same turns: all but a few of the writes hold rows of both.
    expect(last.shared).toBeGreaterThanOrEqual(STEPS);
    expect(last.appends).toBeLessThanOrEqual(last.shared + 4);
    expect(effectsOf(dir).sort()).toEqual(everyEffect);
  });

  for (const killAt of [1, 2, 4, 7]) {
    it(`killed before the store takes group ${killAt}: neither run keeps any of it, and both resume to the same end`, () => {
      const dir = mkdtempSync(join(tmpdir(), 'exarch-group-'));
      dirs.push(dir);
      const crashed = fixture(dir, 'start', String(killAt));
      expect(crashed.signal).toBe('SIGKILL');
      const doomed = crashed.lines.find((line) => 'doomed' in line)?.['doomed'] as Record<string, number[]> | undefined;
      expect(Object.keys(doomed ?? {}).sort()).toEqual(['run-a', 'run-b']);
      // The store ends where the group began, for both runs: nothing of the group, all before it.
      const stored = storedSeqs(dir);
      for (const [run, seqs] of Object.entries(doomed ?? {})) expect(stored[run]).toBe(Math.min(...seqs) - 1);
      // No effect ran whose planning rows were in the lost group (the barrier holds effects back).
      const before = effectsOf(dir);
      expect(new Set(before).size).toBe(before.length);

      const resumed = fixture(dir, 'resume', 'run-a', 'run-b');
      expect(resumed.status).toBe(0);
      expect(resumed.lines.at(-1)).toEqual({
        resumed: [
          { id: 'run-a', status: 'done', text: 'done' },
          { id: 'run-b', status: 'done', text: 'done' },
        ],
      });
      expect(effectsOf(dir).sort()).toEqual(everyEffect);
    });
  }
});
