import { describe, expect, it } from 'vitest';
import { createActor } from 'xstate';
import { sessionMachine } from '../../../machines/session.js';
import { z } from 'zod';
import { createSessionActor, defineTool } from '../../../src/index.js';
import type { Message } from '../../../src/engine/types.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import { startRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider } from '../../../src/testing/index.js';
import { RecordingStore } from '../../support/durableStore.js';
import { hangingTool } from '../../support/hangingTool.js';
import { runTraced, untilSettled, startTraced, until } from '../../support/helpers.js';

/**
 * What a session's actions hand the provider, its tools and its log at a turn's edges (the
 * actions of machines/session.ts and the files beside it): results that arrive while a turn's first request waits for
 * the journal, the model a session asks for, the session's tool time limit, a nudge's total over
 * turns, and a stop while a batch waits. Expected texts are written out here.
 */

/** Each block of a message as one line: `text: …`, `call: name`, `result: content (error)`. */
function blocksOf(message: Message | undefined): string[] {
  return (message?.content ?? []).map((b) => {
    if (b.type === 'text') return `text: ${b.text}`;
    if (b.type === 'tool_use') return `call: ${b.name}`;
    return `result: ${String(b.content)}${b.is_error ? ' (error)' : ''}`;
  });
}

/** A journal whose writes can be held back (a slow networked store), so a request waits for it. */
class HeldStore extends RecordingStore {
  holding = false;
  private readonly held: (() => void)[] = [];
  override append(rows: readonly JournalRow[]): void | Promise<void> {
    if (!this.holding) return super.append(rows);
    const copy = structuredClone(rows);
    return new Promise((resolve) => this.held.push(() => resolve(super.append(copy))));
  }
  letThrough(): void {
    this.holding = false;
    for (const write of this.held.splice(0)) write();
  }
}

describe('a result that arrives while the first request of a turn waits for the journal', () => {
  it('joins that turn: one request carries the message that started the turn and the result, and no second turn is made for it', async () => {
    let started: () => void = () => undefined;
    const gateStarted = new Promise<void>((resolve) => (started = resolve));
    let open: () => void = () => undefined;
    const gate = defineTool({
      name: 'gate',
      description: 'Waits for the test.',
      input: z.object({}),
      readOnly: true,
      run: async () => {
        started();
        await new Promise<void>((resolve) => (open = resolve));
        return 'open';
      },
    });
    const store = new HeldStore(new MemoryRunStore());
    const provider = new ScriptedProvider({
      agents: {
        root: [{ calls: [{ name: 'agent', input: { name: 'b', task: 'Wait at the gate.' } }] }, { text: 'Started.' }, { text: 'Both.' }, { text: 'Again.' }],
        b: [
          {
            calls: [
              { name: 'gate', input: {} },
              { name: 'reply', input: { result: 'b done' } },
            ],
          },
        ],
      },
    });
    const run = await startRun('Task.', { provider, tools: [gate] }, { store });
    await gateStarted;
    await until(run.actor, (s) => s.value === 'readyForUser');
    store.holding = true;
    run.actor.send({ type: 'user.message', text: 'Next.' });
    expect(run.actor.getSnapshot().value).toBe('streaming');
    // b's result arrives while the turn's request waits for the journal.
    open();
    await until(run.actor, (s) => s.context.inbox.length > 0);
    store.letThrough();
    await until(run.actor, (s) => s.value === 'readyForUser' && s.context.children.size === 0 && s.context.inbox.length === 0);
    const requests = provider.requestsOf('root');
    expect(requests.map((r) => blocksOf(r.lastMessage))).toEqual([
      ['text: Task.'],
      ["result: Sub-agent 'b' started. Its result will arrive later as a message beginning with [agent 'b' …]."],
      ['text: Next.', "text: [agent 'b' replied]\nb done"],
    ]);
    // The turn delivered everything that waited: the run ends there, with no further request.
    expect(await run.result).toMatchObject({ status: 'done', text: 'Both.' });
    expect(provider.requestsOf('root')).toHaveLength(3);
  });
});

describe('what the provider is asked', () => {
  it('a sub-agent of a declared type whose profile names a model asks for it in each request; its parent, given none, names no model', async () => {
    const { provider } = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'r', task: 'Look.', type: 'researcher' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'ok' },
        ],
        r: [{ calls: [{ name: 'wait_for_agents', input: {} }] }, { calls: [{ name: 'reply', input: { result: 'found' } }] }],
      },
      { task: 'Go.', agents: { researcher: { description: 'Looks things up.', model: 'small-model' } } },
    );
    expect(provider.requests.map((r) => `${r.agentId}: ${'model' in r ? r.model : 'none'}`)).toEqual([
      'root: none',
      'root/r: small-model',
      'root/r: small-model',
      'root: none',
    ]);
  });
});

describe("a tool's time limit", () => {
  const hang = (timeoutMs?: number) =>
    defineTool({
      name: 'hang',
      description: 'Never answers.',
      input: z.object({}),
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
      run: (_input, { signal }) => new Promise<string>((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
    });

  it("is the session's toolTimeoutMs for a tool that sets none, and the tool's own where it sets one", async () => {
    for (const [tool, expected] of [
      [hang(), "tool 'hang' timed out after 40 ms"],
      [hang(30), "tool 'hang' timed out after 30 ms"],
    ] as const) {
      const { snapshot } = await runTraced(
        { root: [{ calls: [{ name: 'hang', input: {} }] }, { text: 'ok' }] },
        { task: 'Go.', tools: [tool], toolTimeoutMs: 40 },
      );
      expect(blocksOf(snapshot.context.messages[2]).map((line) => line.replace(/\s+\(error\)$/, ''))).toEqual([`result: ${expected}`]);
    }
  });
});

describe('a nudge with a total', () => {
  it('does not fire again in a later turn once its total is spent: a new turn restarts only the per-turn count', async () => {
    const check = { id: 'check', on: 'end_turn' as const, total: 1, fires: () => true, message: 'Check your work.' };
    const traced = startTraced(
      { root: [{ text: 'Done.' }, { text: 'Checked.' }, { text: 'Next done.' }, { text: 'never' }] },
      { task: 'Go.', nudges: [check] },
    );
    await untilSettled(traced.actor);
    traced.actor.send({ type: 'user.message', text: 'Next.' });
    await untilSettled(traced.actor);
    expect(traced.provider.requestsOf('root').map((r) => blocksOf(r.lastMessage))).toEqual([['text: Go.'], ['text: Check your work.'], ['text: Next.']]);
    expect(traced.logs.records('root').filter((r) => r.type === 'nudge')).toHaveLength(1);
  });
});

describe('a session stopped while its batch waits', () => {
  it("answers the open wait_for_agents call as cancelled in its log, so the log's history pairs", async () => {
    const traced = startTraced(
      {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'slow', task: 'Take long.' } },
              { name: 'wait_for_agents', input: {}, id: 'toolu_wait' },
            ],
          },
          { text: 'never' },
        ],
        slow: [{ text: 'never', delayMs: 10_000 }],
      },
      { task: 'Go.' },
    );
    await until(traced.actor, (s) => s.value === 'waitingForAgents');
    traced.actor.stop();
    const answers = traced.logs
      .records('root')
      .flatMap((r) => (r.type === 'message' && r.role === 'user' ? r.content.filter((b) => b.type === 'tool_result') : []));
    expect(answers.map((b) => [b.tool_use_id === 'toolu_wait' ? 'wait' : 'agent', String(b.content), b.is_error === true])).toEqual([
      ['agent', "Sub-agent 'slow' started. Its result will arrive later as a message beginning with [agent 'slow' …].", false],
      ['wait', 'cancelled', true],
    ]);
  });

  it("answers the calls waiting for a person as cancelled in its log, so the log's history pairs", async () => {
    const note = defineTool({ name: 'note', description: 'Takes a note.', input: z.object({}), run: () => 'noted' });
    const traced = startTraced(
      { root: [{ calls: [{ name: 'note', input: {}, id: 'toolu_note' }] }, { text: 'never' }] },
      { task: 'Go.', tools: [note], approve: ['note'], onApprovalRequest: () => undefined },
    );
    await until(traced.actor, (s) => s.value === 'awaitingApproval');
    traced.actor.stop();
    const answers = traced.logs
      .records('root')
      .flatMap((r) => (r.type === 'message' && r.role === 'user' ? r.content.filter((b) => b.type === 'tool_result') : []));
    expect(answers.map((b) => [b.tool_use_id, String(b.content), b.is_error === true])).toEqual([['toolu_note', 'cancelled', true]]);
  });
});

describe('a session stopped while a tool runs', () => {
  it("by a cancel: aborts the tool's signal with the reason 'cancelled', and answers the call so", async () => {
    const { wait, running, reasons } = hangingTool();
    const traced = startTraced({ root: [{ calls: [{ name: 'wait', input: {} }] }] }, { task: 'Go.', tools: [wait] });
    await running;
    traced.actor.send({ type: 'cancel' });
    expect(reasons).toEqual(['cancelled']);
    expect(blocksOf(traced.actor.getSnapshot().context.messages[2])).toEqual(['result: cancelled (error)']);
  });

  it("by its spent budget: aborts the tool's signal as a cancel does, answers the call with the budget, and ends capped", async () => {
    const { wait, running, reasons } = hangingTool();
    // The root's own request costs 100 tokens of its 1,000; its sub-agent's first costs 5,000.
    const traced = startTraced(
      {
        root: [
          {
            usage: { inputTokens: 100, outputTokens: 0 },
            calls: [
              { name: 'agent', input: { name: 'kid', task: 'Spend.' } },
              { name: 'wait', input: {} },
            ],
          },
        ],
        // It answers once the root's tool runs, so the budget is spent while that call is in flight.
        kid: [{ after: running, usage: { inputTokens: 5_000, outputTokens: 0 }, text: 'spent' }],
      },
      { task: 'Go.', tools: [wait], subtreeBudget: { tokens: 1_000 } },
    );
    await running;
    const snapshot = await until(traced.actor, (s) => s.status === 'done');
    expect(snapshot.value).toBe('capped');
    expect(reasons).toEqual(['cancelled']);
    expect(blocksOf(snapshot.context.messages[2]).at(-1)).toBe('result: not run: the budget is spent (error)');
  });
});

describe("a sub-agent's reply", () => {
  it('hands up a parsed value only when the sub-agent was given a reply schema: an untyped reply is text alone', async () => {
    const traced = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'w', task: 'Work.' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'ok' },
        ],
        w: [{ calls: [{ name: 'reply', input: { result: { n: 1 } } }] }],
      },
      { task: 'Go.' },
    );
    const outcome = traced.logs.records('root/w').find((r) => r.type === 'outcome');
    expect(outcome).toMatchObject({ outcome: 'replied', text: '{\n  "n": 1\n}' });
    expect(outcome && 'value' in outcome).toBe(false);
    const output = traced.last.get('root/w')?.output;
    expect(output?.outcome).toBe('replied');
    expect(output && 'value' in output).toBe(false);
  });
});

describe('a session given a history', () => {
  const history: Message[] = [
    { role: 'user', content: [{ type: 'text', text: 'What is 2 + 2?' }] },
    { role: 'assistant', content: [{ type: 'text', text: '4.' }] },
  ];

  it('continues it: its first request shows the history, then its task', async () => {
    const asked: string[][][] = [];
    await runTraced(
      {
        root: (request) => {
          asked.push(request.messages.map(blocksOf));
          return { text: '8.' };
        },
      },
      { task: 'And doubled?', history },
    );
    expect(asked).toEqual([[['text: What is 2 + 2?'], ['text: 4.'], ['text: And doubled?']]]);
  });

  it('that breaks the pairing rule is refused at creation, with the problem named', () => {
    const broken: Message[] = [
      { role: 'user', content: [{ type: 'text', text: 'Look.' }] },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'read_file', input: {} }] },
      { role: 'user', content: [{ type: 'text', text: 'Never mind.' }] },
    ];
    const problem = 'history breaks the tool_use/tool_result pairing rule: message 1: tool_use toolu_1 has no tool_result in message 2';
    expect(() => startTraced({ root: [] }, { task: 'go', history: broken })).toThrow(problem);
    // An embedder's own actor of the machine (no createSessionActor in between) errors with it as it starts.
    const actor = createActor(sessionMachine, { input: { provider: new ScriptedProvider({ agents: { root: [] } }), task: 'go', history: broken } });
    actor.subscribe({ error: () => undefined });
    actor.start();
    expect(actor.getSnapshot().status).toBe('error');
    expect(String(actor.getSnapshot().error)).toBe(`PairingError: ${problem}`);
  });

  it('with a task that is not a string is refused at creation, in one line', () => {
    const provider = new ScriptedProvider({ agents: { root: [] } });
    expect(() => createSessionActor({ provider, task: 42 as unknown as string })).toThrow(new TypeError('exarch: `task` must be a string'));
    expect(() => createSessionActor({ provider })).not.toThrow();
  });
});

describe('a user message to a durable session', () => {
  it('is journaled as queued once, unless it says it is journaled already (a worker hands on one read from the journal)', async () => {
    const store = new MemoryRunStore();
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'busy', delayMs: 100 }, { text: 'read both' }] } });
    const run = await startRun('Task.', { provider }, { store });
    await until(run.actor, (s) => s.value === 'streaming');
    run.actor.send({ type: 'user.message', text: 'typed here' });
    run.actor.send({ type: 'user.message', text: 'from the journal', journaled: true });
    expect((await run.result).status).toBe('done');
    const queued = store.journal(run.id).flatMap((row) => (row.record.type === 'queued' ? [row.record.text] : []));
    expect(queued).toEqual(['typed here']);
    expect(blocksOf(provider.requestsOf('root')[1]?.lastMessage)).toEqual(['text: typed here', 'text: from the journal']);
  });
});
