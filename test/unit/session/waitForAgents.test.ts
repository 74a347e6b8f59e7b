import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { Message } from '../../../src/engine/types.js';
import { defineTool, type SessionInput } from '../../../src/index.js';
import { runTraced, untilSettled, startTraced, toolResults, until } from '../../support/helpers.js';

/**
 * Issue 15: `wait_for_agents` ends a step without a request; the session waits in
 * `waitingForAgents` and streams again, once, when its sub-agents have delivered.
 */

const spawn = (name: string, task = `task for ${name}`) => ({ name: 'agent', input: { name, task } });
const wait = (until?: 'all' | 'any') => ({ name: 'wait_for_agents', input: until === undefined ? {} : { until } });
const reply = (result: unknown, delayMs = 0) => ({ calls: [{ name: 'reply', input: { result } }], delayMs });

/** The blocks of the last user message, as text: tool results as `result: …`, text as it is. */
function lastUserBlocks(message: Message | undefined): string[] {
  if (message?.role !== 'user') return [];
  return message.content.map((b) =>
    b.type === 'text' ? b.text : `result${b.is_error === true ? ' (error)' : ''}: ${typeof b.content === 'string' ? b.content : JSON.stringify(b.content)}`,
  );
}

describe('wait_for_agents', () => {
  it('a fan-out with a wait takes 2 root requests; the second carries the batch results, then every result once', async () => {
    const { provider, trail } = await runTraced(
      {
        root: [{ calls: [spawn('a'), spawn('b'), spawn('c'), wait()] }, { text: 'all three are in' }],
        a: [reply('from a', 5)],
        b: [reply({ found: 2 }, 30)],
        c: [reply('from c', 60)],
      },
      { task: 'go' },
    );
    const root = provider.requestsOf('root');
    expect(root).toHaveLength(2);
    expect(lastUserBlocks(root[1]?.lastMessage)).toEqual([
      "result: Sub-agent 'a' started. Its result will arrive later as a message beginning with [agent 'a' …].",
      "result: Sub-agent 'b' started. Its result will arrive later as a message beginning with [agent 'b' …].",
      "result: Sub-agent 'c' started. Its result will arrive later as a message beginning with [agent 'c' …].",
      'result: 3 sub-agents finished; their results follow.',
      // CONTRACT §4, in the order they arrived.
      "[agent 'a' replied]\nfrom a\n\n[agent 'b' replied]\n{\n  \"found\": 2\n}\n\n[agent 'c' replied]\nfrom c",
    ]);
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'waitingForAgents', 'streaming', 'readyForUser']);
  });

  it("until 'any' wakes at the first result and says how many still run; the rest arrive as usual", async () => {
    const { provider } = await runTraced(
      {
        root: [{ calls: [spawn('fast'), spawn('slow'), wait('any')] }, { text: 'one in, waiting for the other' }, { text: 'both in' }],
        fast: [reply('quick', 5)],
        slow: [reply('late', 150)],
      },
      { task: 'go' },
    );
    const root = provider.requestsOf('root');
    expect(root).toHaveLength(3);
    const second = lastUserBlocks(root[1]?.lastMessage);
    expect(second.slice(2)).toEqual([
      'result: 1 sub-agent finished; their results follow. 1 still running (waited until any).',
      "[agent 'fast' replied]\nquick",
    ]);
    expect(lastUserBlocks(root[2]?.lastMessage)).toEqual(["[agent 'slow' replied]\nlate"]);
  });

  it('with no sub-agent running it answers at once and the session goes on', async () => {
    const { provider, trail } = await runTraced({ root: [{ calls: [wait()] }, { text: 'nothing to wait for' }] }, { task: 'go' });
    expect(lastUserBlocks(provider.requestsOf('root')[1]?.lastMessage)).toEqual(['result: No sub-agents are running: there was nothing to wait for.']);
    expect(trail.get('root')).not.toContain('waitingForAgents');
  });

  it('a second wait in one response is refused; the first stands', async () => {
    const { provider } = await runTraced({ root: [{ calls: [spawn('a'), wait(), wait('any')] }, { text: 'done' }], a: [reply('ok', 5)] }, { task: 'go' });
    const blocks = lastUserBlocks(provider.requestsOf('root')[1]?.lastMessage);
    expect(blocks[1]).toBe('result: 1 sub-agent finished; their results follow.');
    expect(blocks[2]).toBe('result (error): wait_for_agents was already called in this response; the first one stands');
  });

  it('a wait is not a request: the step cap counts requests, and a cap reached right after a wait ends the session capped', async () => {
    const { provider, snapshot } = await runTraced(
      { root: [{ calls: [spawn('a'), wait()] }, { text: 'never asked' }], a: [reply('ok', 5)] },
      { task: 'go', maxSteps: 1 },
    );
    expect(provider.requestsOf('root')).toHaveLength(1);
    expect(snapshot.value).toBe('capped');
    // The wait was answered, with the result after it: the history stays clean.
    expect(toolResults(snapshot.context.messages).map((r) => r.content)).toEqual([
      expect.stringMatching(/^Sub-agent 'a' started/),
      '1 sub-agent finished; their results follow.',
    ]);
  });

  it('cancelling a waiting session cancels its children first and answers the wait cancelled', async () => {
    const traced = startTraced({ root: [{ calls: [spawn('slow'), wait()] }], slow: [reply('never', 5_000)] }, { task: 'go' });
    await until(traced.actor, (s) => s.value === 'waitingForAgents');
    traced.actor.send({ type: 'cancel', reason: 'stop' });
    const root = await until(traced.actor, (s) => s.status === 'done');
    // Let the stopped child's last snapshot come through.
    await new Promise((r) => setImmediate(r));
    expect(root.value).toBe('cancelled');
    expect(toolResults(root.context.messages).at(-1)).toMatchObject({ content: 'cancelled', is_error: true });
    expect(traced.last.get('root/slow')?.value).toBe('cancelled');
  });

  it('a sub-agent waits for its own sub-agents, is not reminded while it waits, and replies with their results', async () => {
    const { provider, trail, last } = await runTraced(
      {
        root: [{ calls: [spawn('lead'), wait()] }, { text: 'lead reported' }],
        lead: [{ calls: [spawn('x'), spawn('y'), wait()] }, reply('x and y done')],
        x: [reply('x', 100)],
        y: [reply('y', 600)],
      },
      { task: 'go' },
    );
    expect(provider.requestsOf('root')).toHaveLength(2);
    expect(provider.requestsOf('root/lead')).toHaveLength(2);
    expect(trail.get('root/lead')).toContain('waitingForAgents');
    expect(trail.get('root/lead')).not.toContain('nudged');
    expect(last.get('root/lead')?.output).toMatchObject({ outcome: 'replied', text: 'x and y done' });
  });

  it("with wake 'all' a parent that ended its turn is woken once, when the last sub-agent delivered", async () => {
    const { provider } = await runTraced(
      {
        root: [{ calls: [spawn('a'), spawn('b')] }, { text: 'waiting' }, { text: 'both in' }],
        a: [reply('from a', 5)],
        b: [reply('from b', 100)],
      },
      { task: 'go', wake: 'all' },
    );
    const root = provider.requestsOf('root');
    expect(root).toHaveLength(3);
    expect(lastUserBlocks(root[2]?.lastMessage)).toEqual(["[agent 'a' replied]\nfrom a\n\n[agent 'b' replied]\nfrom b"]);
  });

  it("by default (wake 'each') each delivery wakes it", async () => {
    const { provider } = await runTraced(
      {
        root: [{ calls: [spawn('a'), spawn('b')] }, { text: 'waiting' }, { text: 'a in' }, { text: 'b in' }],
        a: [reply('from a', 5)],
        b: [reply('from b', 100)],
      },
      { task: 'go' },
    );
    expect(provider.requestsOf('root')).toHaveLength(4);
  });
});

/** Runs the root's `rootSteps` with a's reply held until the root waits: the wait is what holds the batch open, on any machine. */
async function heldRun(rootSteps: object[], input: Omit<SessionInput, 'provider'>) {
  let open = (): void => undefined;
  const rootWaits = new Promise<void>((resolve) => (open = resolve));
  const traced = startTraced({ root: rootSteps, a: [{ ...reply('ok'), after: rootWaits }] }, input);
  await until(traced.actor, (s) => s.value === 'waitingForAgents');
  open();
  return { trail: traced.trail, snapshot: await untilSettled(traced.actor) };
}

describe('a batch held open by its wait', () => {
  it("keeps the result of the call that settled last, before the wait (the drain's own result)", async () => {
    const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), run: ({ text }) => `echo: ${text}` });
    const { snapshot } = await heldRun([{ calls: [spawn('a'), wait(), { name: 'echo', input: { text: 'x' } }] }, { text: 'done' }], {
      task: 'go',
      tools: [echo],
    });
    expect(lastUserBlocks(snapshot.context.messages[2])).toEqual([
      "result: Sub-agent 'a' started. Its result will arrive later as a message beginning with [agent 'a' …].",
      'result: 1 sub-agent finished; their results follow.',
      'result: echo: x',
      "[agent 'a' replied]\nok",
    ]);
  });
});

describe('a cut-off response whose wait held its batch open', () => {
  // The third call was cut off by the output limit (max_tokens): once the wait holds, the session
  // decides as after any truncated batch, with the batch's results and the report committed first.
  const root = (then: object[] = []) => [{ calls: [spawn('a'), wait(), { ...spawn('b'), cutOff: true }] }, ...then];
  const committed = [
    "result: Sub-agent 'a' started. Its result will arrive later as a message beginning with [agent 'a' …].",
    'result: 1 sub-agent finished; their results follow.',
    expect.stringMatching(/^result \(error\): /),
    "[agent 'a' replied]\nok",
  ];

  it('is reminded of the cut and goes on', async () => {
    const { snapshot, trail } = await heldRun(root([{ text: 'went on' }]), { task: 'go' });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'waitingForAgents', 'nudged', 'streaming', 'readyForUser']);
    const [results, reminder] = [lastUserBlocks(snapshot.context.messages[2]), snapshot.context.messages[2]];
    expect(results.slice(0, 4)).toEqual(committed);
    expect(reminder?.content.at(-1)).toMatchObject({ type: 'text', text: expect.stringMatching(/cut off/) });
  });

  it('fails once the truncation budget is spent', async () => {
    const { snapshot, trail } = await heldRun(root(), { task: 'go', truncationBudget: 0 });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'waitingForAgents', 'failed']);
    expect(snapshot.output?.reason).toBe('output truncated repeatedly');
    expect(lastUserBlocks(snapshot.context.messages.at(-1))).toEqual(committed);
  });

  it('is capped when the step cap is reached', async () => {
    const { snapshot, trail } = await heldRun(root(), { task: 'go', maxSteps: 1 });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'waitingForAgents', 'capped']);
    expect(lastUserBlocks(snapshot.context.messages.at(-1))).toEqual(committed);
  });
});
