import { setImmediate as turn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import type { Queued } from '../../../src/store/jobStore.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import { SharedCommits } from '../../../src/store/sharedCommits.js';

const row = (runId: string, text: string): JournalRow => ({ runId, seq: 1, session: 'root', ts: 1, record: { type: 'queued', text } });

describe('shared commits', () => {
  it('what is asked for while a write is under way waits, then goes in one write; one write at a time', async () => {
    const writes: string[][] = [];
    const gates: (() => void)[] = [];
    let inFlight = 0;
    let most = 0;
    const commits = new SharedCommits(async (rows) => {
      inFlight++;
      most = Math.max(most, inFlight);
      writes.push(rows.map((r) => (r.record.type === 'queued' ? r.record.text : '?')));
      await new Promise<void>((open) => gates.push(open));
      inFlight--;
    });
    const first = commits.commit([row('a', 'a1')]);
    await turn();
    const later = [commits.commit([row('a', 'a2')]), commits.commit([row('b', 'b1')])];
    await turn();
    const latest = commits.commit([row('b', 'b2')]);
    await turn();
    expect(writes).toEqual([['a1']]);
    (gates[0] as () => void)();
    await first;
    await turn();
    expect(writes).toEqual([['a1'], ['a2', 'b1', 'b2']]);
    (gates[1] as () => void)();
    await Promise.all([...later, latest]);
    expect(most).toBe(1);
  });

  it("hands every commit's jobs to the one write, in the order asked", async () => {
    const seen: Queued[][] = [];
    const commits = new SharedCommits(async (_rows, queued) => void seen.push([...queued]));
    const queue = { insert: async () => undefined };
    await Promise.all([
      commits.commit([row('a', 'a1')], { queue, jobs: [{ name: 'one', data: {} }] }),
      commits.commit([row('b', 'b1')]),
      commits.commit([row('b', 'b2')], { queue, jobs: [{ name: 'two', data: {} }] }),
    ]);
    expect(seen.map((group) => group.flatMap((q) => q.jobs.map((job) => job.name)))).toEqual([['one', 'two']]);
  });

  it('a commit of no rows writes nothing', async () => {
    let writes = 0;
    const commits = new SharedCommits(async () => void writes++);
    await commits.commit([]);
    expect(writes).toBe(0);
  });
});
