import { describe, expect, it } from 'vitest';
import { RunJournal } from '../src/store/runJournal.js';
import type { JournalRow, RunStore } from '../src/store/runStore.js';

/** A store that only keeps what it is handed, append by append. */
function appendsOf(): { store: RunStore; appends: JournalRow[][] } {
  const appends: JournalRow[][] = [];
  const store = { append: (rows: readonly JournalRow[]) => void appends.push([...rows]) } as unknown as RunStore;
  return { store, appends };
}

describe('run journal bursts', () => {
  it('writes a turn of a few records once, at the end of the turn', async () => {
    const { store, appends } = appendsOf();
    const journal = new RunJournal(store, 'run-1', 1);
    for (let i = 0; i < 5; i++) journal.open(`agent-${i}`).append({ type: 'interrupt' });
    expect(appends).toHaveLength(0);
    await journal.barrier();
    expect(appends.map((rows) => rows.length)).toEqual([5]);
  });

  it('writes a wide turn in slices of at most 128 records, in seq order, before its barrier settles', async () => {
    const { store, appends } = appendsOf();
    const journal = new RunJournal(store, 'run-1', 7);
    const barriers: (Promise<void> | undefined)[] = [];
    for (let i = 0; i < 300; i++) {
      journal.open(`agent-${i}`).append({ type: 'interrupt' });
      barriers.push(journal.barrier());
    }
    await Promise.all(barriers);
    expect(appends.map((rows) => rows.length)).toEqual([128, 128, 44]);
    expect(appends.flat().map((row) => row.seq)).toEqual(Array.from({ length: 300 }, (_, i) => 7 + i));
    expect(appends.flat().map((row) => row.session)).toEqual(Array.from({ length: 300 }, (_, i) => `agent-${i}`));
  });
});
