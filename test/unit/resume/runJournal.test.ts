import { describe, expect, it } from 'vitest';
import { RunJournal } from '../../../src/store/runJournal.js';
import type { JournalRow, RunStore } from '../../../src/store/runStore.js';

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

  describe('when a burst is written', () => {
    /**
     * Resolves with whether the event loop turned by the time what `wait` returns settled: an
     * immediate queued before `wait` runs (and so before any burst it makes) has run by then.
     */
    async function turnedBy(wait: () => Promise<void> | undefined): Promise<boolean> {
      let turned = false;
      setImmediate(() => {
        turned = true;
      });
      await wait();
      return turned;
    }

    it('a lone session: as soon as the step that waits has made its records, before the event loop turns', async () => {
      const { store, appends } = appendsOf();
      const journal = new RunJournal(store, 'run-1', 1);
      const session = journal.open('root');
      const turned = await turnedBy(() => {
        session.append({ type: 'interrupt' });
        const barrier = journal.barrier();
        // Made in the same macrostep after the wait began: in the same burst.
        session.append({ type: 'resume' });
        expect(appends).toHaveLength(0);
        return barrier;
      });
      expect(turned).toBe(false);
      expect(appends.map((rows) => rows.map((row) => row.record.type))).toEqual([['interrupt', 'resume']]);
    });

    it('two sessions open: at the end of the turn, so what both do in it is one write', async () => {
      const { store, appends } = appendsOf();
      const journal = new RunJournal(store, 'run-1', 1);
      const root = journal.open('root');
      const child = journal.open('root/a');
      const turned = await turnedBy(() => {
        root.append({ type: 'interrupt' });
        const barrier = journal.barrier();
        void Promise.resolve().then(() => child.append({ type: 'resume' }));
        return barrier;
      });
      expect(turned).toBe(true);
      expect(appends.map((rows) => rows.map((row) => row.session))).toEqual([['root', 'root/a']]);
    });

    it('a session closed no longer counts: the one left writes without waiting for the turn', async () => {
      const { store, appends } = appendsOf();
      const journal = new RunJournal(store, 'run-1', 1);
      const root = journal.open('root');
      const child = journal.open('root/a');
      child.close();
      child.close();
      const lone = (): Promise<void> | undefined => {
        root.append({ type: 'interrupt' });
        return journal.barrier();
      };
      expect(await turnedBy(lone)).toBe(false);
      expect(appends).toHaveLength(1);
      // Closing twice counted once: with a second session open again, writes wait for the turn.
      journal.open('root/b');
      expect(await turnedBy(lone)).toBe(true);
      expect(appends).toHaveLength(2);
    });
  });
});
