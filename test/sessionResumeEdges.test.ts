import { describe, expect, it } from 'vitest';
import { resumeRun, startRun } from '../src/store/durableRun.js';
import { MemoryRunStore } from '../src/store/memoryStore.js';
import type { JournalRow } from '../src/store/runStore.js';
import type { JournalRecord } from '../src/store/journalRecord.js';
import { ScriptedProvider, type Script } from '../src/testing/scriptedProvider.js';
import type { ModelRequest } from '../src/engine/types.js';
import { RecordingStore, SkewedClock } from './support/durableStore.js';
import { within } from './support/until.js';

/**
 * Resuming from a journal whose last burst was written only in part. exarch's own stores write a
 * burst in one transaction, but a journal is input a resume must take as it finds it (another
 * store, a disk that lost a tail): each test runs a tree durably, then builds the journal a store
 * writing row by row would leave had it stopped after one row of a burst, resumes from it, and
 * checks what the resumed run does (resumedContext and resumedBatch in machines/session.ts).
 */

const assistants = (request: ModelRequest): number => request.messages.filter((m) => m.role === 'assistant').length;
const textsOf = (request: { messages: ModelRequest['messages'] }): string[] =>
  request.messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])));

/**
 * Runs `scripts` durably to its end, then returns a store holding the journal up to and including
 * the first row `cut` matches, as if the process had stopped right after writing it, and the
 * rows the cut left out of that burst.
 */
async function cutAfter(scripts: Record<string, Script>, cut: (row: JournalRow) => boolean) {
  const clock = new SkewedClock();
  const store = new RecordingStore(new MemoryRunStore({ now: clock.now }));
  const run = await startRun('task', { provider: new ScriptedProvider({ agents: scripts }) }, { store });
  expect((await run.result).status).toBe('done');
  const at = store.frozen.findIndex((f) => f.rows.some(cut));
  const burst = store.frozen[at];
  const before = at === 0 ? store.created : store.frozen[at - 1]?.store;
  if (!burst || !before) throw new Error('no row of the journal matched the cut');
  const cutStore = before.clone();
  const kept = burst.rows.slice(0, burst.rows.findIndex(cut) + 1);
  cutStore.append(kept);
  clock.expireLeases();
  return { runId: run.id, store: cutStore, lost: burst.rows.slice(kept.length) };
}

async function resume(runId: string, store: MemoryRunStore, scripts: Record<string, Script>) {
  const provider = new ScriptedProvider({ agents: scripts });
  const resumed = await resumeRun(runId, { provider }, { store });
  if ('finished' in resumed) throw new Error('the cut run was not resumed');
  // A resumed tree that never settles fails here, saying so, not at the test's timeout.
  const result = await within(resumed.result, 20_000, 'the resumed run');
  return { provider, result, journal: store.journal(runId) };
}

const is =
  (type: JournalRecord['type'], session?: string) =>
  (row: JournalRow): boolean =>
    row.record.type === type && (session === undefined || row.session === session);

describe('a resume from a burst cut short', () => {
  const spawnsKid: Record<string, Script> = {
    root: (r) => {
      if (assistants(r) === 0) return { calls: [{ name: 'agent', input: { name: 'kid', task: 'count the files' } }] };
      return textsOf(r).some((t) => t.startsWith("[agent 'kid'")) ? { text: 'done' } : { text: 'waiting for kid' };
    },
    'root/kid': [{ calls: [{ name: 'reply', input: { result: 'kid counted 42 files' } }] }],
  };

  it('a result the sub-agent journaled but its parent never did is delivered on resume, once, and the sub-agent is not run again', async () => {
    const { runId, store, lost } = await cutAfter(spawnsKid, is('outcome', 'root/kid'));
    expect(lost.some(is('inbox', 'root'))).toBe(true);
    const { provider, result, journal } = await resume(runId, store, spawnsKid);
    expect(result.status).toBe('done');
    expect(provider.requestsOf('root/kid')).toEqual([]);
    const delivered = textsOf(result.snapshot.context).filter((t) => t.startsWith("[agent 'kid'"));
    expect(delivered).toHaveLength(1);
    expect(delivered[0]).toContain('kid counted 42 files');
    expect(journal.filter(is('inbox', 'root'))).toHaveLength(1);
  });

  it('a sub-agent whose spawn was journaled but none of its own records starts afresh on its task', async () => {
    const { runId, store, lost } = await cutAfter(spawnsKid, is('spawn', 'root'));
    expect(lost.some((row) => row.session === 'root/kid')).toBe(true);
    const { provider, result } = await resume(runId, store, spawnsKid);
    expect(result.status).toBe('done');
    const [first] = provider.requestsOf('root/kid');
    expect(first?.messageCount).toBe(1);
    expect(first?.lastMessage).toEqual({ role: 'user', content: [{ type: 'text', text: 'count the files' }] });
    expect(textsOf(result.snapshot.context).filter((t) => t.startsWith("[agent 'kid'"))).toHaveLength(1);
  });

  it('a cancel_agent answered before the stop whose sub-agent had not ended is sent again: the sub-agent never reports', async () => {
    const cancelId = 'toolu_cancel_kid';
    const scripts: Record<string, Script> = {
      root: (r) => {
        if (assistants(r) === 0) return { calls: [{ name: 'agent', input: { name: 'kid', task: 'slow work' } }] };
        if (assistants(r) === 1) return { calls: [{ id: cancelId, name: 'cancel_agent', input: { name: 'kid' } }] };
        return { text: 'done' };
      },
      // Slow enough to be cancelled mid-request, in the first run and after the resume alike.
      'root/kid': [{ delayMs: 2_000, calls: [{ name: 'reply', input: { result: 'should never arrive' } }] }],
    };
    const { runId, store } = await cutAfter(
      scripts,
      (row) => row.session === 'root' && row.record.type === 'tool' && row.record.result.tool_use_id === cancelId,
    );
    // What the name promises: the cancel is answered in the journal, the sub-agent's end is not.
    expect(store.journal(runId).some(is('outcome', 'root/kid'))).toBe(false);
    const { result, journal } = await resume(runId, store, scripts);
    expect(result.status).toBe('done');
    expect(textsOf(result.snapshot.context).some((t) => t.includes('should never arrive'))).toBe(false);
    const outcomes = journal.flatMap((row) => (row.session === 'root/kid' && row.record.type === 'outcome' ? [row.record.outcome] : []));
    expect(outcomes).toEqual(['cancelled']);
  });
});
