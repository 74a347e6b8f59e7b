import { describe, expect, it } from 'vitest';
import { createRunObserver, listRuns, MemoryRunStore, startRun, type ModelRequest, type RunEvent } from '../../../src/index.js';
import { scriptedProvider, type ScriptedStep } from '../../../src/testing/index.js';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';

/**
 * Issue 37, hole 2 (its accounting half): every model request that reached the provider is
 * counted, with what it reported, whether or not the session keeps a response of it. Before, only
 * committed responses were: a retried stream, a failed one and one aborted by a cancel or a spent
 * budget were served and billed, yet the summary, the store (`exarch runs`) and the event stream
 * said nothing of them. The oracle is the scripted provider's own log of the requests it was sent.
 */

/** A run of `steps` for the root, journaled to a memory store, its events and its journal kept. */
async function runWith(root: ScriptedStep[] | ((request: ModelRequest) => ScriptedStep), stop?: (events: RunEvent[]) => boolean) {
  const provider = scriptedProvider({ agents: { root } });
  const store = new MemoryRunStore();
  const observer = createRunObserver();
  const events: RunEvent[] = [];
  const run = await startRun('go', { provider, retry: { maxRetries: 3, baseDelayMs: 1, maxDelayMs: 2 } }, { store, actor: { inspect: observer.inspect } });
  let cancelled = false;
  observer.subscribe((event) => {
    events.push(event);
    // Once: the events that follow the cancel (the root's own end) meet the condition too, and a
    // second cancel would go to a root that had ended.
    if (cancelled || !stop?.(events)) return;
    cancelled = true;
    queueMicrotask(() => run.actor.send({ type: 'cancel', reason: 'enough' }));
  });
  const result = await run.result;
  const [summary] = await listRuns(store);
  const journal = store.journal(run.id).map((row) => row.record as JournalRecord);
  return { provider, result, summary, events, journal };
}

describe('every request the provider served is counted', () => {
  it('a retried stream: two requests, both streams’ tokens, in the context, the journal, the store and the events', async () => {
    const { provider, result, summary, events, journal } = await runWith([
      { text: 'broken', usage: { inputTokens: 40 }, fault: { after: 1 } },
      { text: 'whole', usage: { inputTokens: 40, outputTokens: 5 } },
    ]);
    expect(provider.requestsOf('root')).toHaveLength(2);
    const context = result.snapshot.context;
    expect(context.requests).toBe(2);
    expect(context.usage.inputTokens).toBe(80);
    expect(journal.filter((r) => r.type === 'usage')).toEqual([expect.objectContaining({ requests: 2, lost: expect.objectContaining({ inputTokens: 40 }) })]);
    expect(summary).toMatchObject({ requests: 2, usage: { inputTokens: 80, outputTokens: 5 } });
    expect(events.filter((e) => e.type === 'model.lost')).toEqual([
      expect.objectContaining({ reason: 'retried', requests: 1, usage: expect.objectContaining({ inputTokens: 40 }) }),
    ]);
  });

  it('a failed stream: its request and tokens counted, the loss announced before the error', async () => {
    const { provider, result, summary, events, journal } = await runWith([{ text: 'x', usage: { inputTokens: 30 }, fault: { after: 1, retryable: false } }]);
    expect(provider.requestsOf('root')).toHaveLength(1);
    expect(result.snapshot.value).toBe('failed');
    expect(result.snapshot.context).toMatchObject({ requests: 1, usage: { inputTokens: 30 } });
    expect(journal.filter((r) => r.type === 'lost')).toEqual([{ type: 'lost', requests: 1, usage: expect.objectContaining({ inputTokens: 30 }) }]);
    expect(summary).toMatchObject({ requests: 1, usage: { inputTokens: 30 } });
    const kinds = events.filter((e) => e.type === 'model.lost' || e.type === 'model.error').map((e) => (e.type === 'model.lost' ? `lost ${e.reason}` : e.type));
    expect(kinds).toEqual(['lost failed', 'model.error']);
  });

  it('a request aborted by a cancel while it streams: counted with what it had reported, before the outcome', async () => {
    const { provider, result, summary, events, journal } = await runWith([{ text: 'forever', usage: { inputTokens: 25 }, stallAfter: 1 }], (seen) =>
      seen.some((e) => e.type === 'text.delta' || (e.type === 'agent.state' && e.state === 'streaming' && e.usage.inputTokens > 0)),
    );
    expect(provider.requestsOf('root')).toHaveLength(1);
    expect(result.snapshot.value).toBe('cancelled');
    expect(result.snapshot.context).toMatchObject({ requests: 1, usage: { inputTokens: 25 } });
    const tail = journal.slice(-2).map((r) => r.type);
    expect(tail).toEqual(['lost', 'outcome']);
    expect(journal.at(-1)).toMatchObject({ type: 'outcome', usage: { inputTokens: 25 } });
    expect(summary).toMatchObject({ requests: 1, usage: { inputTokens: 25 } });
    expect(events.filter((e) => e.type === 'model.lost')).toEqual([
      expect.objectContaining({ reason: 'aborted', requests: 1, usage: expect.objectContaining({ inputTokens: 25 }) }),
    ]);
  });
});
