import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../../src/tools/defineTool.js';
import { type DurableSessionInput, resumeRun, startRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import { type RecordedRequest, ScriptedProvider, type Script } from '../../../src/testing/scriptedProvider.js';
import type { ModelRequest } from '../../../src/engine/types.js';
import { RecordingStore, SkewedClock } from '../../support/durableStore.js';
import { within } from '../../support/until.js';
import { createSessionActor, waitForSettled } from '../../../src/run/runtime.js';
import { MemoryLogSink } from '../../../src/engine/log/sessionLog.js';
import type { RemoteChild, RemoteChildren, RemoteChildSpec } from '../../../src/engine/remoteChildren.js';
import { restoreAlone, restoreRun } from '../../../src/store/restoreRun.js';
import type { RestoredSession } from '../../../src/store/restoredSession.js';

/**
 * Resuming from a journal whose last burst was written only in part. exarch's own stores write a
 * burst in one transaction, but a journal is input a resume must take as it finds it (another
 * store, a disk that lost a tail): each test runs a tree durably, then builds the journal a store
 * writing row by row would leave had it stopped after one row of a burst, resumes from it, and
 * checks what the resumed run does (resumedContext and resumedBatch in machines/resume.ts).
 */

/** What both runs of a test are started with, besides the provider. */
type Options = Omit<DurableSessionInput, 'provider'>;

const assistants = (request: ModelRequest): number => request.messages.filter((m) => m.role === 'assistant').length;
const textsOf = (request: { messages: ModelRequest['messages'] }): string[] =>
  request.messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])));

/**
 * Runs `scripts` durably to its end, then returns a store holding the journal up to and including
 * the first row `cut` matches, as if the process had stopped right after writing it, and the
 * rows the cut left out of that burst.
 */
async function cutAfter(scripts: Record<string, Script>, cut: (row: JournalRow) => boolean, options: Options = {}) {
  const clock = new SkewedClock();
  const store = new RecordingStore(new MemoryRunStore({ now: clock.now }));
  const run = await startRun('task', { ...options, provider: new ScriptedProvider({ agents: scripts }) }, { store });
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

async function resume(runId: string, store: MemoryRunStore, scripts: Record<string, Script>, options: Options = {}) {
  const provider = new ScriptedProvider({ agents: scripts });
  const resumed = await resumeRun(runId, { ...options, provider }, { store });
  if ('finished' in resumed) throw new Error('the cut run was not resumed');
  // A resumed tree that never settles fails here, saying so, not at the test's timeout.
  const result = await within(resumed.result, 20_000, 'the resumed run');
  return { provider, result, journal: store.journal(runId) };
}

const is =
  (type: JournalRecord['type'], session?: string) =>
  (row: JournalRow): boolean =>
    row.record.type === type && (session === undefined || row.session === session);

/** The root starts one sub-agent, and ends once its report has arrived. */
const spawnsKid: Record<string, Script> = {
  root: (r) => {
    if (assistants(r) === 0) return { calls: [{ name: 'agent', input: { name: 'kid', task: 'count the files' } }] };
    return textsOf(r).some((t) => t.startsWith("[agent 'kid'")) ? { text: 'done' } : { text: 'waiting for kid' };
  },
  'root/kid': [{ calls: [{ name: 'reply', input: { result: 'kid counted 42 files' } }] }],
};

describe('a resume from a burst cut short', () => {
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

  it("a wait whose sub-agent's result was journaled before the stop is answered as the session resumes, with no new 'waiting' record", async () => {
    const waitsForKid: Record<string, Script> = {
      ...spawnsKid,
      root: (r) => {
        if (assistants(r) === 0)
          return {
            calls: [
              { name: 'agent', input: { name: 'kid', task: 'count the files' } },
              { name: 'wait_for_agents', input: {} },
            ],
          };
        return { text: 'done' };
      },
      // Slow enough that the root is waiting (its `waiting` record journaled) when the result comes.
      'root/kid': [{ calls: [{ name: 'reply', input: { result: 'kid counted 42 files' } }], delayMs: 50 }],
    };
    const { runId, store, lost } = await cutAfter(waitsForKid, is('inbox', 'root'));
    expect(store.journal(runId).filter(is('waiting', 'root'))).toHaveLength(1);
    expect(lost.length).toBeGreaterThan(0);
    const { provider, result, journal } = await resume(runId, store, waitsForKid);
    expect(result.status).toBe('done');
    expect(provider.requestsOf('root/kid')).toEqual([]);
    const resumedAt = journal.findIndex(is('resumed', 'root'));
    expect(resumedAt).toBeGreaterThan(0);
    // The wait held as the session came back: its commit is the record that counts, and a `waiting`
    // after it would tell a reader (the trace, a later resume) that the session waits again.
    expect(journal.slice(resumedAt).filter(is('waiting', 'root'))).toEqual([]);
    const [asked] = provider.requestsOf('root');
    expect(asked?.lastMessage?.content.slice(1)).toEqual([
      { type: 'tool_result', tool_use_id: expect.any(String), content: '1 sub-agent finished; their results follow.' },
      { type: 'text', text: "[agent 'kid' replied]\nkid counted 42 files" },
    ]);
  });

  it('a root whose session record is all its journal holds starts on its task', async () => {
    const { runId, store, lost } = await cutAfter(spawnsKid, is('session', 'root'));
    expect(store.journal(runId).map((row) => row.record.type)).toEqual(['session']);
    expect(lost).toEqual([]);
    const { provider, result } = await resume(runId, store, spawnsKid);
    expect(result.status).toBe('done');
    expect(provider.requestsOf('root')[0]?.lastMessage).toEqual({ role: 'user', content: [{ type: 'text', text: 'task' }] });
  });

  it('a sub-agent stopped right after it was reminded to reply goes on from the reminder', async () => {
    const quietKid: Record<string, Script> = {
      ...spawnsKid,
      // Ends its first step without replying: the machine reminds it (nudged), then it replies.
      'root/kid': (r) => (assistants(r) === 0 ? { text: 'I counted them.' } : { calls: [{ name: 'reply', input: { result: 'kid counted 42 files' } }] }),
    };
    const { runId, store } = await cutAfter(quietKid, is('nudge', 'root/kid'));
    const { provider, result } = await resume(runId, store, quietKid);
    expect(result.status).toBe('done');
    const [asked] = provider.requestsOf('root/kid');
    expect(asked?.messageCount).toBe(3);
    expect(asked?.lastMessage).toMatchObject({ role: 'user', content: [{ type: 'text', text: expect.stringMatching(/reply/) }] });
    expect(textsOf(result.snapshot.context).filter((t) => t.startsWith("[agent 'kid'"))).toEqual(["[agent 'kid' replied]\nkid counted 42 files"]);
  });

  it('a sub-agent resumed after its reminder keeps the reminder spent: quiet again, it ends without a second one', async () => {
    const alwaysQuiet: Record<string, Script> = { ...spawnsKid, 'root/kid': () => ({ text: 'I counted them.' }) };
    const { runId, store } = await cutAfter(alwaysQuiet, is('nudge', 'root/kid'));
    const { provider, result, journal } = await resume(runId, store, alwaysQuiet);
    expect(result.status).toBe('done');
    expect(provider.requestsOf('root/kid')).toHaveLength(1);
    expect(journal.filter(is('nudge', 'root/kid'))).toHaveLength(1);
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

describe('a resumed batch', () => {
  const resultsOf = (request: RecordedRequest | undefined): string[] =>
    (request?.lastMessage?.content ?? []).flatMap((b) => (b.type === 'tool_result' ? [`${String(b.content)}${b.is_error ? ' (error)' : ''}`] : []));

  const spawnsTwo: Record<string, Script> = {
    root: (r) => {
      if (assistants(r) > 0) return { text: 'done' };
      return {
        calls: [
          { id: 'toolu_spawn', name: 'agent', input: { name: 'kid', task: 'count the files' } },
          { id: 'toolu_bad', name: 'agent', input: { name: 'nameless' } },
        ],
      };
    },
    'root/kid': [{ calls: [{ name: 'reply', input: { result: 'kid counted 42 files' } }] }],
  };

  it('cut between the response and its usage: the response was never committed, and its request is asked again', async () => {
    const { runId, store, lost } = await cutAfter(spawnsTwo, (row) => is('message', 'root')(row) && JSON.stringify(row.record).includes('toolu_spawn'));
    expect(lost[0]?.record.type).toBe('usage');
    const { provider, result } = await resume(runId, store, spawnsTwo);
    expect(result.status).toBe('done');
    const [asked] = provider.requestsOf('root');
    expect(asked?.messageCount).toBe(1);
    expect(asked?.lastMessage).toEqual({ role: 'user', content: [{ type: 'text', text: 'task' }] });
    expect(textsOf(result.snapshot.context).filter((t) => t.startsWith("[agent 'kid'"))).toEqual(["[agent 'kid' replied]\nkid counted 42 files"]);
  });

  it('cut after the response was committed: the calls answered at once keep their answers, a sub-agent not yet started is reported not started', async () => {
    const { runId, store, lost } = await cutAfter(spawnsTwo, is('usage', 'root'));
    expect(lost.some(is('spawn', 'root'))).toBe(true);
    const { provider, result } = await resume(runId, store, spawnsTwo);
    expect(result.status).toBe('done');
    expect(provider.requestsOf('root/kid')).toEqual([]);
    const [answered] = provider.requestsOf('root');
    expect(resultsOf(answered)).toEqual([
      'not answered: the process stopped before this call was handled (error)',
      "invalid input for tool 'agent': task: Invalid input: expected string, received undefined (error)",
    ]);
  });

  it('a cancel_agent refused because no sub-agent of that name ran yet cancels nothing on resume, though one by that name runs by then', async () => {
    const scripts: Record<string, Script> = {
      root: (r) => {
        if (assistants(r) > 0) return { text: 'done' };
        return {
          calls: [
            { name: 'cancel_agent', input: { name: 'kid' } },
            { id: 'toolu_spawn', name: 'agent', input: { name: 'kid', task: 'count the files' } },
            { name: 'wait_for_agents', input: {} },
          ],
        };
      },
      'root/kid': [{ delayMs: 50, calls: [{ name: 'reply', input: { result: 'kid counted 42 files' } }] }],
    };
    const { runId, store } = await cutAfter(scripts, (row) => is('tool', 'root')(row) && JSON.stringify(row.record).includes('toolu_spawn'));
    const { result, journal } = await resume(runId, store, scripts);
    expect(result.status).toBe('done');
    expect(textsOf(result.snapshot.context).filter((t) => t.startsWith("[agent 'kid'"))).toEqual(["[agent 'kid' replied]\nkid counted 42 files"]);
    expect(journal.flatMap((row) => (is('outcome', 'root/kid')(row) && row.record.type === 'outcome' ? [row.record.outcome] : []))).toEqual(['replied']);
  });

  it('a call of an idempotent tool running at the stop is run again, and its answer is that of the new run', async () => {
    let runs = 0;
    const fetch = defineTool({ name: 'fetch', description: 'Fetches.', input: z.object({}), idempotent: true, run: () => `fetched ${++runs}` });
    const scripts: Record<string, Script> = { root: (r) => (assistants(r) === 0 ? { calls: [{ name: 'fetch', input: {} }] } : { text: 'done' }) };
    const { runId, store } = await cutAfter(scripts, is('usage', 'root'), { tools: [fetch] });
    const { provider, result } = await resume(runId, store, scripts, { tools: [fetch] });
    expect(result.status).toBe('done');
    expect(resultsOf(provider.requestsOf('root')[0])).toEqual(['fetched 2']);
  });

  it("a cancel_agent whose sub-agent ended before the stop, while another call of the batch ran, is not sent again: the sub-agent's end is delivered once", async () => {
    const pause = defineTool({
      name: 'pause',
      description: 'Waits a little.',
      input: z.object({}),
      run: async () => {
        await new Promise((resolve) => setTimeout(resolve, 300));
        return 'paused';
      },
    });
    const scripts: Record<string, Script> = {
      root: (r) => {
        if (assistants(r) === 0) return { calls: [{ name: 'agent', input: { name: 'kid', task: 'slow work' } }] };
        if (assistants(r) === 1) {
          return {
            calls: [
              { name: 'cancel_agent', input: { name: 'kid' } },
              { name: 'pause', input: {} },
            ],
          };
        }
        return { text: 'done' };
      },
      'root/kid': [{ delayMs: 2_000, calls: [{ name: 'reply', input: { result: 'should never arrive' } }] }],
    };
    const { runId, store } = await cutAfter(scripts, is('outcome', 'root/kid'), { tools: [pause] });
    // The cut is inside the batch: the pause had not answered yet.
    expect(store.journal(runId).some((row) => is('tool', 'root')(row) && JSON.stringify(row.record).includes('paused'))).toBe(false);
    const { provider, result, journal } = await resume(runId, store, scripts, { tools: [pause] });
    expect(result.status).toBe('done');
    expect(textsOf(result.snapshot.context).filter((t) => t.startsWith("[agent 'kid'"))).toEqual(["[agent 'kid' was cancelled]"]);
    // The pause was running at the stop and is not idempotent: not run again, its effect reported unknown.
    expect(resultsOf(provider.requestsOf('root')[0])).toEqual([
      "Sub-agent 'kid' is being cancelled; [agent 'kid' was cancelled] will arrive.",
      "tool 'pause' was running when the process stopped, so its effect is unknown: it may or may not have taken effect, and it was not run again. Check before you repeat it. (error)",
    ]);
    expect(journal.filter(is('outcome', 'root/kid'))).toHaveLength(1);
  });
});

/** Runs every sub-agent "elsewhere": keeps each spec it is started with and answers at once, naming it. */
class Elsewhere implements RemoteChildren {
  readonly started: RemoteChildSpec[] = [];
  start(spec: RemoteChildSpec): RemoteChild {
    this.started.push(spec);
    const usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
    return {
      result: Promise.resolve({ name: spec.agent.name, outcome: 'replied' as const, text: `${spec.agent.name} done elsewhere`, usage }),
      cancel: () => undefined,
    };
  }
}

describe('a resumed session whose sub-agents run elsewhere', () => {
  const scripts: Record<string, Script> = {
    root: (r) => {
      if (assistants(r) > 0) return { text: 'done' };
      return {
        calls: [
          { name: 'agent', input: { name: 'r', task: 'Look it up.', type: 'researcher', budget: { tokens: 500 } } },
          { id: 'toolu_plain', name: 'agent', input: { name: 'plain', task: 'Just do it.' } },
          { name: 'wait_for_agents', input: {} },
        ],
      };
    },
    // Asked only if a sub-agent runs here.
    'root/r': [{ calls: [{ name: 'reply', input: { result: 'r done here' } }] }],
    'root/plain': [{ calls: [{ name: 'reply', input: { result: 'plain done here' } }] }],
  };
  const agents = { researcher: { description: 'Looks things up.' } };
  const bothSpawned = (row: JournalRow): boolean => is('tool', 'root')(row) && JSON.stringify(row.record).includes('toolu_plain');

  it('starts them elsewhere again with what they were first started with, declared type and budget only where given', async () => {
    const first = new Elsewhere();
    const { runId, store } = await cutAfter(scripts, bothSpawned, { agents, remoteChildren: first });
    const again = new Elsewhere();
    const { provider, result } = await resume(runId, store, scripts, { agents, remoteChildren: again });
    expect(result.status).toBe('done');
    // What a first start hands over is checked in sessionBatchOpen; a resume hands over the same,
    // strictly: an absent type or budget is no key at all.
    expect(first.started.map((spec) => [spec.agent.id, spec.profile, spec.budget])).toEqual([
      ['root/r', 'researcher', { tokens: 500 }],
      ['root/plain', undefined, undefined],
    ]);
    expect(again.started).toStrictEqual(first.started);
    expect(provider.requests.map((r) => r.agentId)).toEqual(['root']);
    expect(textsOf(result.snapshot.context).filter((t) => t.startsWith('[agent '))).toEqual([
      "[agent 'r' replied]\nr done elsewhere\n\n[agent 'plain' replied]\nplain done elsewhere",
    ]);
  });

  it('keeps them here when it spends within a budget, as before the stop', async () => {
    const options = { agents, subtreeBudget: { tokens: 1_000_000 } };
    const first = new Elsewhere();
    const { runId, store } = await cutAfter(scripts, bothSpawned, { ...options, remoteChildren: first });
    expect(first.started).toEqual([]);
    const again = new Elsewhere();
    const { provider, result } = await resume(runId, store, scripts, { ...options, remoteChildren: again });
    expect(result.status).toBe('done');
    expect(again.started).toEqual([]);
    expect(provider.requests.map((r) => r.agentId).sort()).toEqual(['root', 'root/plain', 'root/r']);
  });
});

describe("a session's resumed record", () => {
  it('says `alone` only for a session taken up alone, as one session of a run spread over workers', async () => {
    const { runId, store } = await cutAfter(spawnsKid, is('spawn', 'root'));
    const rows = store.journal(runId);
    const whole = restoreRun(rows);
    const alone = restoreAlone(rows, 'root');
    if (whole.kind !== 'resumable' || alone.kind !== 'resumable') throw new Error('the cut run is not resumable');
    const resumedRecord = async (restore: RestoredSession) => {
      const logs = new MemoryLogSink();
      const actor = createSessionActor({ provider: new ScriptedProvider({ agents: spawnsKid }), logs, restore });
      actor.start();
      expect((await within(waitForSettled(actor), 20_000, 'the restored session')).value).toBe('readyForUser');
      return logs.records('root').find((record) => record.type === 'resumed');
    };
    // Strict: no `alone` key at all for a whole tree's root.
    const ts = expect.any(Number);
    expect(await resumedRecord(whole.root)).toStrictEqual({ ts, type: 'resumed', state: 'dispatchingBatch' });
    expect(await resumedRecord(alone.session)).toStrictEqual({ ts, type: 'resumed', state: 'dispatchingBatch', alone: true });
  });
});
