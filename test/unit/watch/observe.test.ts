import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionActor, defineTool, events, observe, respond, waitForSettled, type RunEvent } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';

/**
 * Issue 16.1: one observation layer. The oracles are written by hand from the session protocol
 * (docs/protocol.md): the states a session passes through, what a step commits, when a child's
 * result reaches its parent. Nothing here is derived from the module under test.
 */

const echo = defineTool({ name: 'echo', description: 'Echo the text.', input: z.object({ text: z.string() }), run: ({ text }) => text });

/** root → researcher → reader: each parent waits for its child with `wait_for_agents`. */
const threeLevels = {
  root: [
    {
      text: 'Delegating.',
      calls: [
        { name: 'agent', input: { name: 'researcher', task: 'Find the cause.' } },
        { name: 'wait_for_agents', input: {} },
      ],
    },
    { text: 'The cause is the cookie.' },
  ],
  researcher: [
    {
      calls: [
        { name: 'agent', input: { name: 'reader', task: 'Read a.md' } },
        { name: 'wait_for_agents', input: {} },
      ],
    },
    { calls: [{ name: 'echo', input: { text: 'cookie' } }] },
    { calls: [{ name: 'reply', input: { result: 'the cookie' } }] },
  ],
  reader: [{ text: 'Reading.', calls: [{ name: 'reply', input: { result: 'a.md: cookie' } }] }],
};

/** One line per event, in the test's own words (agent.snapshot, every snapshot's echo, is left out). */
function line(e: RunEvent): string | undefined {
  switch (e.type) {
    case 'agent.started':
      return `started ${e.name} parent=${String(e.parent)} depth=${e.depth} task=${e.task}`;
    case 'agent.state':
      return `state ${e.state}`;
    case 'text.delta':
      return `text ${e.text}`;
    case 'model.response':
      return `response ${e.stopReason} ${e.toolCalls.map((c) => c.name).join(',')}`;
    case 'tool.call':
      return `call ${e.name} ${JSON.stringify(e.input)}`;
    case 'tool.result':
      return `result ${e.content}${e.isError ? ' (error)' : ''}`;
    case 'delivery':
      return `delivery ${e.child} ${e.outcome} ${e.text}`;
    case 'usage':
      return 'usage';
    case 'message':
      return `message ${e.index} ${e.message.role}`;
    case 'agent.ended':
      return `ended ${e.status}${e.outcome ? ` ${e.outcome}` : ''}`;
    case 'agent.snapshot':
      return undefined;
    default:
      return e.type;
  }
}

function byAgent(seen: readonly RunEvent[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const e of seen) {
    const text = line(e);
    if (text !== undefined) (out[e.agent] ??= []).push(text);
  }
  return out;
}

describe('events(actor): the run as typed events', () => {
  it('a three-level tree: the exact sequence of each agent, with paths and causal order across agents', async () => {
    const actor = createSessionActor({ provider: scriptedProvider({ agents: threeLevels }), task: 'Why?', tools: [echo] });
    const seen: RunEvent[] = [];
    const consumed = (async () => {
      for await (const event of events(actor)) seen.push(event);
    })();
    actor.start();
    await waitForSettled(actor);
    actor.stop();
    // The iterator ends by itself with the root.
    await consumed;

    expect(byAgent(seen)).toEqual({
      root: [
        'started root parent=null depth=0 task=Why?',
        'state starting',
        'message 0 user',
        'state streaming',
        'text Delegating.',
        'response tool_use agent,wait_for_agents',
        'call agent {"name":"researcher","task":"Find the cause."}',
        'call wait_for_agents {}',
        'usage',
        'message 1 assistant',
        'state dispatchingBatch',
        'state waitingForAgents',
        'delivery root/researcher replied the cookie',
        // The wait's results and the inbox, then the answer.
        'message 2 user',
        'state streaming',
        'text The cause is the cookie.',
        'response end_turn ',
        'usage',
        'message 3 assistant',
        'state readyForUser',
        'ended stopped',
      ],
      'root/researcher': [
        'started researcher parent=root depth=1 task=Find the cause.',
        'state starting',
        'message 0 user',
        'state streaming',
        'response tool_use agent,wait_for_agents',
        'call agent {"name":"reader","task":"Read a.md"}',
        'call wait_for_agents {}',
        'usage',
        'message 1 assistant',
        'state dispatchingBatch',
        'state waitingForAgents',
        'delivery root/researcher/reader replied a.md: cookie',
        'message 2 user',
        'state streaming',
        'response tool_use echo',
        'call echo {"text":"cookie"}',
        'usage',
        'message 3 assistant',
        'state dispatchingBatch',
        'result cookie',
        'message 4 user',
        'state streaming',
        'response tool_use reply',
        'call reply {"result":"the cookie"}',
        'usage',
        'message 5 assistant',
        'state dispatchingBatch',
        'message 6 user',
        'state replied',
        'ended done replied',
      ],
      'root/researcher/reader': [
        'started reader parent=root/researcher depth=2 task=Read a.md',
        'state starting',
        'message 0 user',
        'state streaming',
        'text Reading.',
        'response tool_use reply',
        'call reply {"result":"a.md: cookie"}',
        'usage',
        'message 1 assistant',
        'state dispatchingBatch',
        'message 2 user',
        'state replied',
        'ended done replied',
      ],
    });

    // Paths are the agent ids' segments; every event has a time.
    const paths = new Map(seen.map((e) => [e.agent, e.path.join(' › ')]));
    expect([...paths]).toEqual([
      ['root', 'root'],
      ['root/researcher', 'root › researcher'],
      ['root/researcher/reader', 'root › researcher › reader'],
    ]);
    expect(seen.every((e) => Number.isFinite(e.time) && e.time > 0)).toBe(true);
    const times = seen.map((e) => e.time);
    expect([...times].sort((a, b) => a - b)).toEqual(times);

    // Across agents: a child starts after its parent asked for it, ends before its parent is told, and
    // the parent's next request comes after the delivery.
    const at = (agent: string, text: string) => seen.findIndex((e) => e.agent === agent && line(e) === text);
    expect(at('root', 'call agent {"name":"researcher","task":"Find the cause."}')).toBeLessThan(
      at('root/researcher', 'started researcher parent=root depth=1 task=Find the cause.'),
    );
    expect(at('root/researcher/reader', 'ended done replied')).toBeLessThan(at('root/researcher', 'delivery root/researcher/reader replied a.md: cookie'));
    expect(at('root/researcher', 'ended done replied')).toBeLessThan(at('root', 'delivery root/researcher replied the cookie'));
    expect(at('root', 'delivery root/researcher replied the cookie')).toBeLessThan(at('root', 'text The cause is the cookie.'));
    // The delivered result and the ended event carry the child's typed output.
    const delivered = seen.find((e) => e.type === 'delivery' && e.agent === 'root');
    expect(delivered).toMatchObject({ name: 'researcher', result: { name: 'researcher', outcome: 'replied', text: 'the cookie' } });
  });

  it('observe(actor, listener) sees the same events, synchronously; unsubscribing stops them', async () => {
    const actor = createSessionActor({ provider: scriptedProvider({ agents: threeLevels }), task: 'Why?', tools: [echo] });
    const viaListener: RunEvent[] = [];
    const viaIterator: RunEvent[] = [];
    const stop = observe(actor, (event) => viaListener.push(event));
    const consumed = (async () => {
      for await (const event of events(actor)) viaIterator.push(event);
    })();
    actor.start();
    const settled = await waitForSettled(actor);
    expect(settled.value).toBe('readyForUser');
    stop();
    const before = viaListener.length;
    actor.send({ type: 'user.message', text: 'Again?' });
    actor.stop();
    await consumed;
    expect(viaListener.length).toBe(before);
    // The iterator went on to the end; up to the unsubscription the two saw the same events.
    expect(viaIterator.slice(0, before).map(line)).toEqual(viaListener.map(line));
    expect(viaIterator.at(-1)).toMatchObject({ type: 'agent.ended', agent: 'root', status: 'stopped' });
  });

  it('attached to a running tree: its sessions as they are now, then everything live', async () => {
    const actor = createSessionActor({ provider: scriptedProvider({ agents: { root: [{ text: 'one' }, { text: 'two' }] } }), task: 'first' });
    actor.start();
    await waitForSettled(actor);
    const seen: RunEvent[] = [];
    const stop = observe(actor, (event) => seen.push(event));
    actor.send({ type: 'user.message', text: 'second' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    await waitForSettled(actor);
    stop();
    actor.stop();
    expect(byAgent(seen)['root']).toEqual([
      // The catch-up: the session and the history it already has.
      'started root parent=null depth=0 task=first',
      'message 0 user',
      'message 1 assistant',
      'state readyForUser',
      // Live.
      'user.message',
      'message 2 user',
      'state streaming',
      'text two',
      'response end_turn ',
      'usage',
      'message 3 assistant',
      'state readyForUser',
    ]);
  });
});

describe('backpressure: a slow consumer never holds the run back', () => {
  it('the run settles while the consumer still lags; it then gets every event in order, waiting deltas merged', async () => {
    const text = 'abcdefghij'.repeat(300);
    const agents = {
      root: [
        {
          text,
          chunkSize: 1,
          calls: [
            { name: 'agent', input: { name: 'c', task: 't' } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { text: 'done' },
      ],
      c: [{ text: 'zyx'.repeat(100), chunkSize: 1, calls: [{ name: 'reply', input: { result: 'ok' } }] }],
    };
    const actor = createSessionActor({ provider: scriptedProvider({ agents }), task: 'go' });
    const all: RunEvent[] = [];
    observe(actor, (event) => all.push(event));
    const slow: RunEvent[] = [];
    const consumed = (async () => {
      for await (const event of events(actor)) {
        slow.push(event);
        // A consumer that does real I/O per event.
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
    actor.start();
    await waitForSettled(actor);
    const settledAfter = slow.length;
    actor.stop();
    await consumed;

    // The machine ran to the end while the consumer had taken only a few events.
    const deltas = all.filter((e) => e.type === 'text.delta');
    // One delta per character, and 'done' in one (the scripted model's default chunk is 64).
    expect(deltas.length).toBe(text.length + 300 + 1);
    expect(settledAfter).toBeLessThan(all.length / 10);

    // The oracle: the listener's events with consecutive deltas of one agent joined, by a fold written here.
    const merged: { type: string; agent: string; text?: string }[] = [];
    for (const e of all) {
      const last = merged[merged.length - 1];
      if (e.type === 'text.delta' && last?.type === 'text.delta' && last.agent === e.agent) last.text += e.text;
      else merged.push(e.type === 'text.delta' ? { type: e.type, agent: e.agent, text: e.text } : { type: e.type, agent: e.agent });
    }
    const shape = (e: RunEvent) => (e.type === 'text.delta' ? { type: e.type, agent: e.agent, text: e.text } : { type: e.type, agent: e.agent });
    // What the slow consumer got is the same run: every non-delta event in order, and all the text.
    expect(slow.filter((e) => e.type !== 'text.delta').map(shape)).toEqual(merged.filter((e) => e.type !== 'text.delta'));
    const textOf = (events: readonly { type: string; agent: string; text?: string }[], agent: string) =>
      events
        .filter((e) => e.type === 'text.delta' && e.agent === agent)
        .map((e) => e.text)
        .join('');
    expect(textOf(slow.map(shape), 'root')).toBe(`${text}done`);
    expect(textOf(slow.map(shape), 'root/c')).toBe('zyx'.repeat(100));
    // Deltas it took while lagging came merged: far fewer events than the model sent.
    expect(slow.filter((e) => e.type === 'text.delta').length).toBeLessThan(deltas.length / 10);
  });

  it('a listener that throws does not stop the run or the other listeners', async () => {
    const actor = createSessionActor({ provider: scriptedProvider({ agents: { root: [{ text: 'hi' }] } }), task: 'go' });
    const thrown: unknown[] = [];
    const onUncaught = (error: unknown): void => void thrown.push(error);
    process.on('uncaughtException', onUncaught);
    try {
      const seen: string[] = [];
      observe(actor, () => {
        throw new Error('a broken listener');
      });
      observe(actor, (event) => seen.push(event.type));
      actor.start();
      const settled = await waitForSettled(actor);
      actor.stop();
      await new Promise((resolve) => setTimeout(resolve, 10));
      expect(settled.value).toBe('readyForUser');
      expect(seen).toContain('agent.ended');
      expect(thrown.length).toBeGreaterThan(0);
      expect(String(thrown[0])).toContain('a broken listener');
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});

/**
 * Issue 17: approvals and budgets are run events too, so a host following `events(actor)` needs no
 * callback: it sees which agent asks (its path), the tool, the input, the call id and the agent's
 * task, answers with `respond`, and sees the answer; a budget reached is one event before what it causes.
 */
describe('approvals and budgets as run events', () => {
  it('a grandchild asks through the event stream; the host answers with respond() and sees each answer', async () => {
    const written: string[] = [];
    const writeNote = defineTool({
      name: 'write_note',
      description: 'Write a note',
      input: z.object({ path: z.string() }),
      run: async ({ path }) => {
        written.push(path);
        return `wrote ${path}`;
      },
    });
    const provider = scriptedProvider({
      agents: {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'lead', task: 'Lead the notes.' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'Handled.' },
        ],
        lead: [
          {
            calls: [
              { name: 'agent', input: { name: 'scribe', task: 'Write the notes.' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { calls: [{ name: 'reply', input: { result: 'ok' } }] },
        ],
        scribe: [
          {
            calls: [
              { name: 'write_note', input: { path: 'a.md' } },
              { name: 'write_note', input: { path: '/etc/motd' } },
            ],
          },
          { calls: [{ name: 'write_note', input: { path: 'b.md' } }] },
          { calls: [{ name: 'write_note', input: { path: 'c.md' } }] },
          { calls: [{ name: 'reply', input: { result: 'done' } }] },
        ],
      },
    });
    const actor = createSessionActor({ provider, tools: [writeNote], task: 'Take notes', approve: ['write_note'] });
    const seen: RunEvent[] = [];
    const followed = (async () => {
      for await (const event of events(actor)) {
        seen.push(event);
        if (event.type !== 'approval.requested') continue;
        // a.md: approved; /etc/motd: denied; b.md: always (c.md then runs unasked).
        const path = String(event.input['path']);
        respond(
          actor,
          path === 'a.md'
            ? { callId: event.callId, decision: 'approve' }
            : path === 'b.md'
              ? { callId: event.callId, decision: 'always' }
              : { callId: event.callId, decision: 'deny', reason: 'outside the project' },
        );
      }
    })();
    actor.start();
    await waitForSettled(actor);
    actor.stop();
    await followed;
    const asked = seen.filter((e) => e.type === 'approval.requested');
    expect(provider.requests).toHaveLength(8);
    expect(asked.map((e) => ({ agent: e.agent, path: e.path, tool: e.tool, input: e.input, task: e.task, callId: /^toolu_/.test(e.callId) }))).toEqual([
      { agent: 'root/lead/scribe', path: ['root', 'lead', 'scribe'], tool: 'write_note', input: { path: 'a.md' }, task: 'Write the notes.', callId: true },
      { agent: 'root/lead/scribe', path: ['root', 'lead', 'scribe'], tool: 'write_note', input: { path: '/etc/motd' }, task: 'Write the notes.', callId: true },
      { agent: 'root/lead/scribe', path: ['root', 'lead', 'scribe'], tool: 'write_note', input: { path: 'b.md' }, task: 'Write the notes.', callId: true },
    ]);
    const answered = seen.filter((e) => e.type === 'approval.answered');
    expect(answered.map((e) => [e.agent, e.tool, e.decision, e.reason])).toEqual([
      ['root/lead/scribe', 'write_note', 'approve', undefined],
      ['root/lead/scribe', 'write_note', 'deny', 'outside the project'],
      ['root/lead/scribe', 'write_note', 'always', undefined],
    ]);
    expect(answered.map((e) => e.callId)).toEqual(asked.map((e) => e.callId));
    // Each request follows the state it waits in, and its answer follows it.
    const at = (e: RunEvent): number => seen.indexOf(e);
    const waiting = seen.findIndex((e) => e.type === 'agent.state' && e.agent === 'root/lead/scribe' && e.state === 'awaitingApproval');
    expect(waiting).toBeGreaterThanOrEqual(0);
    expect(asked.every((e) => at(e) > waiting)).toBe(true);
    expect(answered.every((e, i) => at(e) > at(asked[i] as RunEvent))).toBe(true);
    expect(written).toEqual(['a.md', 'b.md', 'c.md']);
  });

  it('budget.exceeded: the tree’s, then the cancellations it causes; a sub-agent’s, naming it', async () => {
    const ping = defineTool({ name: 'ping', description: 'ping', input: z.object({}), readOnly: true, run: async () => 'pong' });
    const step = { calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 100, outputTokens: 0 } };
    const provider = scriptedProvider({
      agents: {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'capped', task: 'Spend.', budget: { tokens: 200 } } },
              { name: 'agent', input: { name: 'other', task: 'Spend slowly.' } },
              { name: 'wait_for_agents', input: { until: 'any' } },
            ],
            usage: { inputTokens: 10, outputTokens: 0 },
          },
          { calls: [{ name: 'wait_for_agents', input: {} }], usage: { inputTokens: 10, outputTokens: 0 } },
          { text: 'final', usage: { inputTokens: 10, outputTokens: 0 } },
        ],
        capped: [step, step, step],
        other: Array.from({ length: 20 }, () => ({ ...step, delayMs: 5 })),
      },
    });
    const actor = createSessionActor({ provider, tools: [ping], task: 'go', budget: { maxTokens: 1_000 } });
    const seen: RunEvent[] = [];
    const stop = observe(actor, (event) => seen.push(event));
    actor.start();
    await waitForSettled(actor);
    actor.stop();
    stop();
    const exceeded = seen.filter((e) => e.type === 'budget.exceeded');
    expect(exceeded.map((e) => ({ agent: e.agent, path: e.path, scope: e.scope, limit: e.limit }))).toEqual([
      { agent: 'root/capped', path: ['root', 'capped'], scope: 'agent', limit: { tokens: 200 } },
      { agent: 'root', path: ['root'], scope: 'tree', limit: { tokens: 1_000 } },
    ]);
    expect(exceeded[0]?.tokens).toBe(200);
    // The tree's is reached short of 1,000: at the line that keeps room for the root's final request,
    // which is then made, and the whole tree ends within the budget and one running request.
    expect(exceeded[1]?.tokens).toBeLessThan(1_000);
    expect(provider.requestsOf('root')).toHaveLength(3);
    expect(actor.getSnapshot().context.options.budget.totals.tokens).toBeLessThanOrEqual(1_000 + 100);
    // The sub-agent's ends capped after its event; the tree's comes before the cancel it sends.
    const index = (p: (e: RunEvent) => boolean): number => seen.findIndex(p);
    expect(index((e) => e.type === 'agent.ended' && e.agent === 'root/capped' && e.outcome === 'capped')).toBeGreaterThan(
      seen.indexOf(exceeded[0] as RunEvent),
    );
    expect(index((e) => e.type === 'agent.cancel' && e.agent === 'root/other')).toBeGreaterThan(seen.indexOf(exceeded[1] as RunEvent));
  });
});
