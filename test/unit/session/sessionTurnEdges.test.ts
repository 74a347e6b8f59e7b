import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, findPairingProblems, messageAgent } from '../../../src/index.js';
import type { Message } from '../../../src/engine/types.js';
import { startRun } from '../../../src/run/durableRun.js';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider, type ScriptedProviderOptions } from '../../../src/testing/index.js';
import { delegating, runTraced, untilSettled, startTraced } from '../../support/helpers.js';

/**
 * Edges of a turn the other suites do not reach: a refusal that leaves calls open, a message the
 * root gets while its batch runs, and what the journal says about cut-off calls, outcomes and turn
 * input. Expected texts are written out here.
 */

/** Each block of a message as one line: `text: …`, `call: name`, `result: content (error)`. */
function blocksOf(message: Message | undefined): string[] {
  return (message?.content ?? []).map((b) => {
    if (b.type === 'text') return `text: ${b.text}`;
    if (b.type === 'tool_use') return `call: ${b.name}`;
    return `result: ${String(b.content)}${b.is_error ? ' (error)' : ''}`;
  });
}

/** A tool that counts its runs, and each waits for `state.release()`. */
function slowTool() {
  const state: { runs: number; started: () => void; release: () => void } = { runs: 0, started: () => undefined, release: () => undefined };
  const started = new Promise<void>((resolve) => (state.started = resolve));
  const tool = defineTool({
    name: 'slow',
    description: 'A slow call.',
    input: z.object({}),
    run: async () => {
      state.runs += 1;
      state.started();
      await new Promise<void>((resolve) => (state.release = resolve));
      return 'slow result';
    },
  });
  return { tool, state, started };
}

async function journalOf(agents: ScriptedProviderOptions['agents'], session: Record<string, unknown> = {}): Promise<JournalRecord[]> {
  const store = new MemoryRunStore();
  const run = await startRun('Task.', { provider: new ScriptedProvider({ agents }), ...session }, { store });
  await run.result;
  return store.journal(run.id).map((row) => row.record);
}

describe('a refusal that leaves calls open', () => {
  it('answers each call of the refused message as not executed, so the history pairs, and runs none of them', async () => {
    const { tool, state } = slowTool();
    const { snapshot, provider } = await runTraced(
      { root: [{ content: ['I will not.', { name: 'slow', input: {} }, { name: 'slow', input: {} }], stopReason: 'refusal' }] },
      { task: 'Do it.', tools: [tool] },
    );
    expect(snapshot.value).toBe('failed');
    expect(snapshot.context.failure).toBe('the model refused to continue (stop reason: refusal)');
    expect(state.runs).toBe(0);
    const history = snapshot.context.messages;
    expect(history.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(blocksOf(history[1])).toEqual(['text: I will not.', 'call: slow', 'call: slow']);
    expect(blocksOf(history[2])).toEqual(['result: not executed: the session failed (error)', 'result: not executed: the session failed (error)']);
    expect(findPairingProblems(history)).toEqual([]);
    expect(provider.requestsOf('root')).toHaveLength(1);
  });

  it('a refusal with text only ends the history with that text: no empty user message follows', async () => {
    const { snapshot } = await runTraced({ root: [{ text: 'No.', stopReason: 'refusal' }] }, { task: 'Do it.' });
    expect(snapshot.value).toBe('failed');
    expect(snapshot.context.messages.map((m) => `${m.role}: ${blocksOf(m).join(' | ')}`)).toEqual(['user: text: Do it.', 'assistant: text: No.']);
  });
});

describe('messages to the root while its batch runs', () => {
  it('wait for the end of its turn: the request after the batch carries only the results, the message starts the next turn', async () => {
    const { tool, state, started } = slowTool();
    const traced = startTraced(
      { root: [{ calls: [{ name: 'slow', input: {} }] }, { text: 'Batch done.' }, { text: 'Read you.' }] },
      { task: 'Go.', tools: [tool] },
    );
    await started;
    traced.actor.send({ type: 'user.message', text: 'Also this.' });
    state.release();
    await untilSettled(traced.actor);
    const requests = traced.provider.requestsOf('root');
    expect(requests.map((r) => blocksOf(r.lastMessage))).toEqual([['text: Go.'], ['result: slow result'], ['text: Also this.']]);
    expect(traced.actor.getSnapshot().context.pendingUser).toEqual([]);
  });
});

describe('input that reaches a sub-agent while it works', () => {
  it("a sub-agent's result that arrives while its parent streams a step without a reply is the parent's next turn, not a reply reminder", async () => {
    const traced = startTraced(
      {
        root: delegating('lead', 'Lead.'),
        lead: [
          { calls: [{ name: 'agent', input: { name: 'worker', task: 'Work.' } }] },
          // The worker's result arrives during this request: the lead is not quiet when it ends.
          { text: 'thinking', delayMs: 150 },
          { calls: [{ name: 'reply', input: { result: 'lead done' } }] },
        ],
        worker: [{ calls: [{ name: 'reply', input: { result: 'worked' } }], delayMs: 20 }],
      },
      { task: 'Go.' },
    );
    await untilSettled(traced.actor);
    const lead = traced.provider.requestsOf('root/lead');
    expect(lead).toHaveLength(3);
    expect(blocksOf(lead[2]?.lastMessage)).toEqual(["text: [agent 'worker' replied]\nworked"]);
    expect(traced.logs.records('root/lead').filter((r) => r.type === 'nudge')).toEqual([]);
    expect(traced.last.get('root/lead')?.output?.text).toBe('lead done');
  });

  it('an empty message sent to a sub-agent during its batch adds no empty text block to its next request', async () => {
    const { tool, state, started } = slowTool();
    const traced = startTraced(
      { root: delegating('worker', 'Work.'), worker: [{ calls: [{ name: 'slow', input: {} }] }, { calls: [{ name: 'reply', input: { result: 'worked' } }] }] },
      { task: 'Go.', tools: [tool] },
    );
    await started;
    expect(messageAgent(traced.actor, 'root/worker', '')).toBe(true);
    state.release();
    await untilSettled(traced.actor);
    expect(blocksOf(traced.provider.requestsOf('root/worker')[1]?.lastMessage)).toEqual(['result: slow result']);
  });
});

describe('what the journal says about a turn', () => {
  it('a response with a cut-off call lists it as incomplete in its usage record; a whole one lists none', async () => {
    const records = await journalOf({
      root: [
        { calls: [{ name: 'wait_for_agents', input: {}, id: 'toolu_cut', cutOff: true }] },
        { calls: [{ name: 'wait_for_agents', input: {} }] },
        { text: 'ok' },
      ],
    });
    const usages = records.filter((r) => r.type === 'usage');
    expect(usages.map((r) => ('incomplete' in r ? r.incomplete : 'none'))).toEqual([['toolu_cut'], 'none', 'none']);
  });

  it("a failed session's outcome record gives the reason; a reply's value is in its outcome record and its result", async () => {
    const failed = await journalOf({ root: [{ text: 'No.', stopReason: 'refusal' }] });
    // Nothing was left open: no (empty) message answers it.
    expect(failed.filter((r) => r.type === 'message').map((r) => r.type === 'message' && r.role)).toEqual(['user', 'assistant']);
    expect(failed.filter((r) => r.type === 'outcome')).toEqual([
      expect.objectContaining({ outcome: 'failed', text: '', reason: 'the model refused to continue (stop reason: refusal)' }),
    ]);
    const replied = await journalOf({ root: [{ calls: [{ name: 'reply', input: { count: 3 } }] }] }, { output: z.object({ count: z.number() }) });
    const outcome = replied.find((r) => r.type === 'outcome');
    expect(outcome).toMatchObject({ outcome: 'replied', value: { count: 3 } });
    expect(outcome && 'reason' in outcome).toBe(false);
    // And the session's own result carries the value.
    const { snapshot } = await runTraced(
      { root: [{ calls: [{ name: 'reply', input: { count: 3 } }] }] },
      { task: 'Count.', output: z.object({ count: z.number() }) },
    );
    expect(snapshot.output).toMatchObject({ outcome: 'replied', value: { count: 3 } });
  });

  it("a refusal's open calls are journaled answered, as the history holds them", async () => {
    const records = await journalOf({ root: [{ content: ['No.', { name: 'wait_for_agents', input: {}, id: 'toolu_open' }], stopReason: 'refusal' }] });
    const messages = records.flatMap((r) =>
      r.type === 'message' ? [`${r.role}: ${blocksOf({ role: r.role, content: r.content } as Message).join(' | ')}`] : [],
    );
    expect(messages).toEqual(['user: text: Task.', 'assistant: text: No. | call: wait_for_agents', 'user: result: not executed: the session failed (error)']);
  });

  it('an empty response is not journaled as an empty assistant message', async () => {
    const records = await journalOf({ root: [{ text: '' }] });
    expect(records.filter((r) => r.type === 'message').map((r) => r.type === 'message' && r.role)).toEqual(['user']);
  });

  it('a turn started by sub-agent results is journaled as a user message holding the inbox', async () => {
    const records = await journalOf({
      root: [{ calls: [{ name: 'agent', input: { name: 'helper', task: 'Help.' } }] }, { text: 'Started.' }, { text: 'Thanks.' }],
      helper: [{ calls: [{ name: 'reply', input: { result: 'helped' } }], delayMs: 20 }],
    });
    const turnInput = records.filter(
      (r) => r.type === 'message' && r.role === 'user' && r.content.some((b) => b.type === 'text' && b.text.includes("[agent 'helper' replied]")),
    );
    expect(turnInput).toHaveLength(1);
  });
});
