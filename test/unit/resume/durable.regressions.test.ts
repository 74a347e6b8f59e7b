import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { sleep } from '../../../src/engine/model/streamModel.js';
import { resumeRun, startRun, type DurableRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider, type Script } from '../../../src/testing/scriptedProvider.js';
import { defineTool } from '../../../src/tools/defineTool.js';
import type { ModelRequest } from '../../../src/engine/types.js';
import { RecordingStore, SkewedClock } from '../../support/durableStore.js';
import { interruptingEffect } from '../../support/interruptingEffect.js';

/**
 * Bugs the durability tests found (test/property/durable.property.test.ts, test/property/modelBased.test.ts), each
 * kept as a minimal regression test.
 */

const assistants = (request: ModelRequest): number => request.messages.filter((m) => m.role === 'assistant').length;

/**
 * Runs `scripts` durably; the first `effect` call presses Ctrl-C (`interrupt()`) while it runs; then
 * resumes the run from the same store with a fresh provider. Returns that provider and the resumed result.
 */
async function interruptDuringBatch(scripts: Record<string, Script>, options: { maxSteps?: number } = {}) {
  const store = new MemoryRunStore();
  let run: DurableRun | undefined;
  const { tool: effect } = interruptingEffect({ at: 1, run: () => run, ms: 20 });
  run = await startRun('task', { provider: new ScriptedProvider({ agents: scripts }), tools: [effect], ...options }, { store });
  expect((await run.result).status).toBe('interrupted');
  const provider = new ScriptedProvider({ agents: scripts });
  const resumed = await resumeRun(run.id, { provider, tools: [effect], ...options }, { store });
  if ('finished' in resumed) throw new Error('the interrupted run was not resumed');
  return { provider, result: await resumed.result, journal: store.journal(run.id) };
}

describe('durable runs: regressions', () => {
  it('interrupt() after the run has ended (status written, run released) writes nothing to its journal and sends nothing to the stopped root', async () => {
    const store = new MemoryRunStore();
    const run = await startRun('task', { provider: new ScriptedProvider({ agents: { root: [{ text: 'hello' }] } }) }, { store });
    const result = await run.result;
    expect(result.status).toBe('done');
    expect(store.getRun(run.id)?.owner).toBeNull(); // released: this process no longer holds the run
    const rows = store.journal(run.id).length;
    // A Ctrl-C that lands just after the run ended (the CLI listens until its summary is written).
    run.interrupt();
    await new Promise((resolve) => setTimeout(resolve, 10));
    // It once appended an `interrupt` row to a finished run the process had released, and sent
    // `cancel` to the stopped root actor.
    expect(
      store
        .journal(run.id)
        .slice(rows)
        .map((row) => row.record.type),
    ).toEqual([]);
  });

  // Ctrl-C while a batch runs commits the batch with its open calls answered 'cancelled'; a resume
  // replays any committed batch as "on to the next request" (`streaming`), so what the batch's
  // drain would have decided is skipped: the staged reply, the step cap, the truncation reminder.

  it('Ctrl-C during the request after a wait_for_agents batch drained, then resume: the reports that batch delivered are not delivered again', async () => {
    const store = new MemoryRunStore();
    const scripts: Record<string, Script> = {
      root: [
        {
          calls: [
            { name: 'agent', input: { name: 'a', task: 'A.' } },
            { name: 'agent', input: { name: 'b', task: 'B.' } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { text: 'both reported', delayMs: 5_000 },
      ],
      a: [{ calls: [{ name: 'reply', input: { result: 'from a' } }] }],
      b: [{ calls: [{ name: 'reply', input: { result: 'from b' } }] }],
    };
    const first = new ScriptedProvider({ agents: scripts });
    const run = await startRun('task', { provider: first }, { store });
    for (let i = 0; i < 500 && first.requestsOf('root').length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 5));
    expect(first.requestsOf('root')).toHaveLength(2);
    run.interrupt();
    expect((await run.result).status).toBe('interrupted');
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'both reported' }, { text: 'woken again' }] } });
    const resumed = await resumeRun(run.id, { provider }, { store });
    if ('finished' in resumed) throw new Error('the interrupted run was not resumed');
    expect((await resumed.result).status).toBe('done');
    // The interrupted request is asked again, once, with each report in it once; nothing wakes the root after.
    expect(provider.requestsOf('root')).toHaveLength(1);
    // The task, the response that started them, then its results with both reports after them.
    expect(provider.requestsOf('root')[0]?.messageCount).toBe(3);
    const heard = JSON.stringify(provider.requestsOf('root')[0]?.lastMessage);
    expect(heard.match(/\[agent 'a' replied\]/g)).toHaveLength(1);
    expect(heard.match(/\[agent 'b' replied\]/g)).toHaveLength(1);
  });

  it('Ctrl-C while a sub-agent runs a call next to its reply, then resume: the reply stands (uninterrupted, it replies R)', async () => {
    const { provider, journal } = await interruptDuringBatch({
      root: (r) => (assistants(r) === 0 ? { calls: [{ name: 'agent', input: { name: 'a', task: 'do it' } }] } : { text: 'done' }),
      // Its model trusts "Reply recorded.": asked again, it has nothing to add.
      a: (r) =>
        assistants(r) === 0
          ? {
              calls: [
                { name: 'effect', input: {} },
                { name: 'reply', input: { result: 'R' } },
              ],
            }
          : { text: 'I already replied.' },
    });
    const delivered = journal.flatMap((row) => (row.session === 'root' && row.record.type === 'inbox' ? [row.record.result] : []));
    // Once: a was resumed in `streaming`, asked again, and ended `empty` ("[agent 'a' finished with no output]").
    expect(provider.requestsOf('root/a')).toHaveLength(0);
    expect(delivered.map((result) => [result.outcome, result.text])).toEqual([['replied', 'R']]);
  });

  it('Ctrl-C during the batch of the last step a turn may take, then resume: no request beyond the step cap (uninterrupted: capped after 1)', async () => {
    const { provider, result } = await interruptDuringBatch({ root: () => ({ calls: [{ name: 'effect', input: {} }] }) }, { maxSteps: 1 });
    expect(result.state).toBe('capped');
    // Once: the resumed root asked the model again (its 2nd request of a turn capped at 1), then capped.
    expect(provider.requests).toHaveLength(0);
    expect(result.snapshot.context.steps).toBeLessThanOrEqual(1);
  });

  it('Ctrl-C during the batch of a response cut off at max_tokens, then resume: the next request carries the truncation reminder', async () => {
    const { provider } = await interruptDuringBatch({
      root: (r) =>
        assistants(r) === 0
          ? {
              calls: [
                { name: 'effect', input: {} },
                { name: 'effect', input: {}, cutOff: true },
              ],
            }
          : { text: 'done' },
    });
    const next = provider.requestsOf('root')[0]?.lastMessage?.content ?? [];
    // Once: it carried the two tool results only; uninterrupted, the reminder follows them.
    expect(next.some((block) => block.type === 'text' && /cut off/.test(block.text))).toBe(true);
  });

  it('a name spawned before the crash and again after the resume gets a fresh id: the two sub-agents never share a transcript', async () => {
    const { provider, journal } = await interruptDuringBatch({
      root: (r) => {
        const step = assistants(r);
        if (step === 0 || step === 2)
          return {
            calls: [
              { name: 'agent', input: { name: 'scout', task: step === 0 ? 'first' : 'second' } },
              { name: 'wait_for_agents', input: {} },
            ],
          };
        return step === 1 ? { calls: [{ name: 'effect', input: {} }] } : { text: 'done' };
      },
      scout: (r) => ({ calls: [{ name: 'reply', input: { result: JSON.stringify(r.messages[0]).includes('second') ? 'second report' : 'first report' } }] }),
    });
    // Before the crash the first scout ran as root/scout; after the resume the root spawned the same
    // name again, which must be a new agent (id root/scout#2), not a second life of the first.
    const spawned = journal.flatMap((row) => (row.record.type === 'spawn' ? [row.record.id] : []));
    expect(spawned).toEqual(['root/scout', 'root/scout#2']);
    expect(provider.requestsOf('root/scout')).toHaveLength(0);
    expect(provider.requestsOf('root/scout#2')).toHaveLength(1);
    const delivered = journal.flatMap((row) => (row.session === 'root' && row.record.type === 'inbox' ? [row.record.result.text] : []));
    expect(delivered).toEqual(['first report', 'second report']);
  });
});

describe('durable runs: a run that cannot start', () => {
  it('bad input is refused with one line, and the run is let go instead of held by this live process', async () => {
    const store = new MemoryRunStore();
    const tool = defineTool({ name: 'effect', description: 'x', input: z.object({}), run: () => 'ok' });
    // Two tools of one name: the session cannot be made.
    await expect(startRun('task', { provider: new ScriptedProvider({ agents: { root: [{ text: 'hi' }] } }), tools: [tool, tool] }, { store })).rejects.toThrow(
      /two tools are named 'effect'/,
    );
    const [run] = store.listRuns();
    expect(run).toMatchObject({ status: 'failed', owner: null });
  });

  it('a result delivered with a wait_for_agents batch is not delivered again by a resumed session', async () => {
    const store = new MemoryRunStore();
    const first = new ScriptedProvider({
      agents: {
        // The request after the wait streams until the interrupt.
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'kid', task: 'k' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'never finished', stallAfter: 0 },
        ],
        kid: [{ calls: [{ name: 'reply', input: { result: 'kid done' } }] }],
      },
    });
    const run = await startRun('task', { provider: first, stallTimeoutMs: 600_000 }, { store });
    while (first.requestsOf('root').length < 2) await sleep(2, new AbortController().signal);
    run.interrupt();
    expect((await run.result).status).toBe('interrupted');
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'answered' }, { text: 'asked twice' }] } });
    const resumed = await resumeRun(run.id, { provider }, { store });
    if ('finished' in resumed) throw new Error('the interrupted run was not resumed');
    expect((await resumed.result).text).toBe('answered');
    // It once kept the result in the resumed inbox too, and asked again with it a second time.
    expect(provider.requestsOf('root')).toHaveLength(1);
    const texts = resumed.actor.getSnapshot().context.messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])));
    const delivered = texts.filter((t) => t.startsWith("[agent 'kid'"));
    expect(delivered).toHaveLength(1);
  });
});

/**
 * What a resumed batch redoes or keeps (resumedBatch in machines/resume.ts): each test crashes a
 * run at one append (a `RecordingStore` copy, test/support/durableStore.ts) or interrupts it, and
 * checks what the resumed run does that only the journal could have told it.
 */
describe('durable runs: what a resumed batch redoes', () => {
  it('a crash while a non-idempotent call runs, then resume: it is not run again, and its unknown-effect answer is journaled', async () => {
    let runs = 0;
    const effect = defineTool({ name: 'effect', description: 'x', input: z.object({}), run: () => `run ${++runs}` });
    const scripts: Record<string, Script> = {
      root: (r) => (assistants(r) === 0 ? { calls: [{ name: 'effect', id: 'toolu_effect', input: {} }] } : { text: 'done' }),
    };
    const clock = new SkewedClock();
    const store = new RecordingStore(new MemoryRunStore({ now: clock.now }));
    const run = await startRun('task', { provider: new ScriptedProvider({ agents: scripts }), tools: [effect] }, { store });
    expect((await run.result).status).toBe('done');
    expect(runs).toBe(1);
    // The crash: just after the append that journaled the call (its effect may have happened), before its result.
    const at = store.frozen.find((f) => f.rows.some((row) => row.record.type === 'message' && JSON.stringify(row.record).includes('toolu_effect')));
    if (!at) throw new Error('the call was never journaled');
    const crashed = at.store.clone();
    // The crashed process's lease, made to look expired.
    clock.expireLeases();
    const before = crashed.journal(run.id).length;
    const resumed = await resumeRun(run.id, { provider: new ScriptedProvider({ agents: scripts }), tools: [effect] }, { store: crashed });
    if ('finished' in resumed) throw new Error('the crashed run was not resumed');
    expect((await resumed.result).status).toBe('done');
    expect(runs).toBe(1);
    const answers = crashed
      .journal(run.id)
      .slice(before)
      .flatMap((row) => (row.record.type === 'tool' ? [row.record.result] : []));
    expect(answers).toEqual([
      {
        type: 'tool_result',
        tool_use_id: 'toolu_effect',
        is_error: true,
        content:
          "tool 'effect' was running when the process stopped, so its effect is unknown: it may or may not have taken effect, and it was not run again. Check before you repeat it.",
      },
    ]);
  });

  it('Ctrl-C in a batch of a sub-agent with two reply calls, then resume: the first reply is its result, as it would have been', async () => {
    const { journal } = await interruptDuringBatch({
      root: (r) => (assistants(r) === 0 ? { calls: [{ name: 'agent', input: { name: 'a', task: 'do it' } }] } : { text: 'done' }),
      a: (r) =>
        assistants(r) === 0
          ? {
              calls: [
                { name: 'effect', input: {} },
                { name: 'reply', input: { result: 'first' } },
                { name: 'reply', input: { result: 'second' } },
              ],
            }
          : { text: 'I already replied.' },
    });
    const delivered = journal.flatMap((row) => (row.session === 'root' && row.record.type === 'inbox' ? [row.record.result] : []));
    expect(delivered.map((result) => [result.outcome, result.text])).toEqual([['replied', 'first']]);
  });
});
