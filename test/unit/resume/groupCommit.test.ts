import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { RunJournal } from '../../../src/store/runJournal.js';
import type { JournalRow, RunStore } from '../../../src/store/runStore.js';
import { StoreError } from '../../../src/store/storeError.js';

type Append = (rows: readonly JournalRow[]) => void | Promise<void>;

/** A store that keeps what it is handed, append by append, after `refuse` has had its say. */
function storeOf(refuse: Append = () => undefined): { store: RunStore; appends: JournalRow[][] } {
  const appends: JournalRow[][] = [];
  const append: Append = (rows) => {
    const verdict = refuse(rows);
    if (verdict instanceof Promise) return verdict.then(() => void appends.push([...rows]));
    appends.push([...rows]);
    return undefined;
  };
  return { store: { append } as unknown as RunStore, appends };
}

/** A journal on `store` whose write failures are collected rather than thrown. */
function journalOn(store: RunStore, runId: string): { journal: RunJournal; errors: Error[] } {
  const errors: Error[] = [];
  return { journal: new RunJournal(store, runId, 1, (error) => void errors.push(error)), errors };
}

const runsOf = (rows: readonly JournalRow[]): string[] => rows.map((row) => `${row.runId}#${row.seq}`);

describe('group commit: the journals of one store write together', () => {
  it('two runs that step in the same turn share one append', async () => {
    const { store, appends } = storeOf();
    const a = journalOn(store, 'run-a').journal;
    const b = journalOn(store, 'run-b').journal;
    const rootA = a.open('root');
    const rootB = b.open('root');
    rootA.append({ type: 'interrupt' });
    rootB.append({ type: 'interrupt' });
    rootA.append({ type: 'resume' });
    await Promise.all([a.barrier(), b.barrier()]);
    expect(appends.map(runsOf)).toEqual([['run-a#1', 'run-a#2', 'run-b#1']]);
  });

  it('journals of two different stores never share a write', async () => {
    const one = storeOf();
    const two = storeOf();
    const a = journalOn(one.store, 'run-a').journal;
    const b = journalOn(two.store, 'run-b').journal;
    a.open('root').append({ type: 'interrupt' });
    b.open('root').append({ type: 'interrupt' });
    await Promise.all([a.barrier(), b.barrier()]);
    expect(one.appends.map(runsOf)).toEqual([['run-a#1']]);
    expect(two.appends.map(runsOf)).toEqual([['run-b#1']]);
  });

  it('a lone session on the store writes before the event loop turns; with a second run open it waits for the turn', async () => {
    const { store, appends } = storeOf();
    const a = journalOn(store, 'run-a').journal;
    const rootA = a.open('root');
    let turned = false;
    setImmediate(() => {
      turned = true;
    });
    rootA.append({ type: 'interrupt' });
    await a.barrier();
    expect(turned).toBe(false);
    expect(appends).toHaveLength(1);

    const b = journalOn(store, 'run-b').journal;
    b.open('root');
    turned = false;
    setImmediate(() => {
      turned = true;
    });
    rootA.append({ type: 'resume' });
    await a.barrier();
    expect(turned).toBe(true);
  });

  it('with a promise store, what is buffered while a write is under way goes in one next write, after it', async () => {
    const gates: (() => void)[] = [];
    const { store, appends } = storeOf(() => new Promise<void>((open) => gates.push(open)));
    const journals = ['run-a', 'run-b', 'run-c'].map((id) => journalOn(store, id).journal);
    const sessions = journals.map((journal) => journal.open('root'));
    (sessions[0] as ReturnType<RunJournal['open']>).append({ type: 'interrupt' });
    await turn();
    expect(gates).toHaveLength(1);
    // Three turns of records from every run while the first write is under way.
    for (let i = 0; i < 3; i++) {
      for (const session of sessions) session.append({ type: 'resume' });
      await turn();
    }
    expect(gates).toHaveLength(1);
    const waiting = journals.map((journal) => journal.barrier());
    (gates[0] as () => void)();
    await turn();
    expect(gates).toHaveLength(2);
    (gates[1] as () => void)();
    await Promise.all(waiting);
    expect(appends.map((rows) => rows.length)).toEqual([1, 9]);
    expect(appends[1]?.map((row) => row.runId)).toEqual(['run-a', 'run-a', 'run-a', 'run-b', 'run-b', 'run-b', 'run-c', 'run-c', 'run-c']);
  });

  it("one run's conflict fails that run alone: the others of the group are written, once each", async () => {
    const attempts: string[][] = [];
    const { store, appends } = storeOf((rows) => {
      attempts.push(runsOf(rows));
      if (rows.some((row) => row.runId === 'run-b')) throw new StoreError('conflict', '/x.db', 'a journal row of this batch (run and seq)');
    });
    const a = journalOn(store, 'run-a');
    const b = journalOn(store, 'run-b');
    const c = journalOn(store, 'run-c');
    for (const { journal } of [a, b, c]) journal.open('root').append({ type: 'interrupt' });
    await Promise.all([a, b, c].map(({ journal }) => journal.barrier()));
    expect(attempts).toEqual([['run-a#1', 'run-b#1', 'run-c#1'], ['run-a#1'], ['run-b#1'], ['run-c#1']]);
    expect(appends.map(runsOf)).toEqual([['run-a#1'], ['run-c#1']]);
    expect([a.errors.length, b.errors.length, c.errors.length]).toEqual([0, 1, 0]);
    expect(b.journal.error?.message).toContain('already holds');
  });

  it('the same with a promise store, in order, one write at a time', async () => {
    let inFlight = 0;
    let most = 0;
    const { store, appends } = storeOf(async (rows) => {
      inFlight++;
      most = Math.max(most, inFlight);
      await turn();
      inFlight--;
      if (rows.some((row) => row.runId === 'run-a')) throw new StoreError('conflict', 'pg', 'a journal row of this batch (run and seq)');
    });
    const a = journalOn(store, 'run-a');
    const b = journalOn(store, 'run-b');
    for (const { journal } of [a, b]) journal.open('root').append({ type: 'interrupt' });
    await Promise.all([a.journal.barrier(), b.journal.barrier()]);
    expect(appends.map(runsOf)).toEqual([['run-b#1']]);
    expect([a.errors.length, b.errors.length]).toEqual([1, 0]);
    expect(most).toBe(1);
  });

  it('a fault of the whole store fails every run of the group, without writing each again', async () => {
    let attempts = 0;
    const { store } = storeOf(() => {
      attempts++;
      throw new StoreError('unwritable', '/x.db', 'database or disk is full');
    });
    const a = journalOn(store, 'run-a');
    const b = journalOn(store, 'run-b');
    for (const { journal } of [a, b]) journal.open('root').append({ type: 'interrupt' });
    await Promise.all([a.journal.barrier(), b.journal.barrier()]);
    expect(attempts).toBe(1);
    expect([a.errors.length, b.errors.length]).toEqual([1, 1]);
  });

  it('a run that failed takes no more records; the others go on writing', async () => {
    const { store, appends } = storeOf((rows) => {
      if (rows.length === 1 && rows[0]?.runId === 'run-b') throw new StoreError('conflict', '/x.db', 'run-b');
      if (rows.some((row) => row.runId === 'run-b')) throw new StoreError('conflict', '/x.db', 'run-b');
    });
    const a = journalOn(store, 'run-a');
    const b = journalOn(store, 'run-b');
    const rootA = a.journal.open('root');
    const rootB = b.journal.open('root');
    rootA.append({ type: 'interrupt' });
    rootB.append({ type: 'interrupt' });
    await Promise.all([a.journal.barrier(), b.journal.barrier()]);
    rootA.append({ type: 'resume' });
    rootB.append({ type: 'resume' });
    expect(b.journal.barrier()).toBeUndefined();
    await a.journal.barrier();
    expect(appends.map(runsOf)).toEqual([['run-a#1'], ['run-a#2']]);
    expect(b.errors).toHaveLength(1);
  });
});
