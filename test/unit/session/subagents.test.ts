import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, MemoryLogSink, runAgent, type ModelRequest } from '../../../src/index.js';
import { scriptedProvider, type ScriptedStep } from '../../../src/testing/index.js';
import { runTraced, startTraced, toolResults, until, userTexts } from '../../support/helpers.js';

/** Sub-agents as spawned actors: CONTRACT §2–§4 and §6. */

const spawn = (name: string, task = `task for ${name}`) => ({ name: 'agent', input: { name, task } });
const reply = (result: unknown) => ({ calls: [{ name: 'reply', input: { result } }] });

describe('spawning', () => {
  it('the agent tool returns at once and the child starts with the task verbatim', async () => {
    const task = 'Map the testing setup.\nLook at package.json first.';
    const { provider, snapshot } = await runTraced(
      { root: [{ calls: [spawn('c', task)] }, { text: 'wait' }, { text: 'done' }], c: [reply('ok')] },
      { task: 'go' },
    );
    const childFirst = provider.requestsOf('root/c')[0];
    expect(childFirst?.lastMessage).toEqual({ role: 'user', content: [{ type: 'text', text: task }] });
    expect(toolResults(snapshot.context.messages)[0]?.content).toMatch(/^Sub-agent 'c' started/);
  });

  it('children run in parallel and their results arrive in the inbox, delivered together as one user turn', async () => {
    const { snapshot, provider } = await runTraced(
      {
        // Both children finish while the root is still streaming, so both wait for its next boundary.
        root: [{ calls: [spawn('a'), spawn('b')] }, { text: 'waiting', delayMs: 30 }, { text: 'both in' }],
        a: [reply('from a')],
        b: [reply('from b')],
      },
      { task: 'go' },
    );
    const inboxTurns = userTexts(snapshot.context.messages).filter((t) => t.startsWith('[agent'));
    expect(inboxTurns).toHaveLength(1);
    expect(inboxTurns[0]).toBe("[agent 'a' replied]\nfrom a\n\n[agent 'b' replied]\nfrom b");
    expect(provider.requestsOf('root')).toHaveLength(3);
  });

  it('a second live child with the same name is refused; the name is free again once the first has finished', async () => {
    const { snapshot, last } = await runTraced(
      {
        root: [{ calls: [spawn('dup'), spawn('dup')] }, { text: 'wait' }, { calls: [spawn('dup')] }, { text: 'wait again' }, { text: 'done' }],
        dup: [{ ...reply('first'), delayMs: 5 }],
        'root/dup#2': [reply('second')],
      },
      { task: 'go' },
    );
    const results = toolResults(snapshot.context.messages);
    expect(results[1]).toMatchObject({ is_error: true, content: "a sub-agent named 'dup' is still running; pick another name or cancel it first" });
    expect(results[2]?.is_error).toBeUndefined();
    expect(userTexts(snapshot.context.messages).filter((t) => t.startsWith('[agent'))).toEqual([
      "[agent 'dup' replied]\nfirst",
      "[agent 'dup' replied]\nsecond",
    ]);
    expect(last.get('root/dup#2')?.value).toBe('replied');
  });

  it('an invalid name gets an error result naming the field', async () => {
    const { snapshot } = await runTraced({ root: [{ calls: [{ name: 'agent', input: { name: 'bad name!', task: 't' } }] }, { text: 'ok' }] }, { task: 'go' });
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({
      is_error: true,
      content: expect.stringMatching(/^invalid input for tool 'agent': name: must be 1–64 characters/),
    });
  });

  it('the depth limit decides who is offered the spawn family; reply is offered to every sub-agent and never the root', async () => {
    const { provider } = await runTraced(
      {
        root: [{ calls: [spawn('child')] }, { text: 'wait' }, { text: 'done' }],
        child: [{ calls: [spawn('grandchild')] }, { text: 'wait' }, reply('c')],
        grandchild: [reply('g')],
      },
      { task: 'go' },
    );
    expect(provider.requestsOf('root')[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents']);
    expect(provider.requestsOf('root/child')[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply']);
    expect(provider.requestsOf('root/child/grandchild')[0]?.tools).toEqual(['reply']);
  });

  it('a session at the depth limit that calls agent is refused by the allow-check', async () => {
    const { last } = await runTraced(
      { root: [{ calls: [spawn('c')] }, { text: 'wait' }, { text: 'done' }], c: [{ calls: [spawn('g')] }, reply('no spawning here')] },
      { task: 'go', maxDepth: 1 },
    );
    const child = last.get('root/c');
    expect(toolResults(child?.context.messages ?? [])[0]).toMatchObject({ is_error: true, content: "tool 'agent' is not available to this agent" });
  });

  it('a maxDepth of 0 offers the root no sub-agents at all', async () => {
    const { provider } = await runTraced({ root: [{ text: 'alone' }] }, { task: 'go', maxDepth: 0 });
    expect(provider.requests[0]?.tools).toEqual([]);
  });
});

describe('delivery', () => {
  it('capped, failed and cancelled children deliver their tags with no text', async () => {
    const echo = defineTool({ name: 'echo', description: 'e', input: z.object({}), run: () => 'x' });
    const { snapshot } = await runTraced(
      {
        root: (_request, index) =>
          index === 0 ? { calls: [spawn('capper'), spawn('failer'), spawn('slow'), { name: 'cancel_agent', input: { name: 'slow' } }] } : { text: 'ok' },
        capper: [{ calls: [{ name: 'echo', input: {} }] }, { calls: [{ name: 'echo', input: {} }] }],
        failer: [{ text: 'no', stopReason: 'refusal' }],
        slow: [{ text: 'never', delayMs: 60_000 }],
      },
      { task: 'go', tools: [echo], maxSteps: 2 },
    );
    const inbox = userTexts(snapshot.context.messages)
      .filter((t) => t.startsWith('[agent'))
      .join('\n\n');
    expect(inbox).toContain("[agent 'capper' hit the step cap]");
    expect(inbox).toMatch(/\[agent 'failer' failed: the model refused to continue \(stop reason: refusal\)\]/);
    expect(inbox).toContain("[agent 'slow' was cancelled]");
  });

  it('a child that crashes does not take its parent down: it is delivered as failed', async () => {
    const provider = scriptedProvider({ agents: { root: [{ calls: [spawn('c')] }, { text: 'wait' }, { text: 'carried on' }], c: [reply('never')] } });
    const result = await runAgent('go', {
      provider,
      // A host's prompt function that throws for sub-agents crashes the child actor itself.
      system: (agent) => {
        if (agent.depth > 0) throw new Error('prompt template missing');
        return 'root prompt';
      },
    });
    expect(result.state).toBe('readyForUser');
    expect(result.text).toBe('carried on');
    expect(userTexts(result.snapshot.context.messages)).toContain("[agent 'c' failed: sub-agent crashed: prompt template missing]");
  });

  it('a child whose log fails mid-run crashes alone, and its parent carries on', async () => {
    const inner = new MemoryLogSink();
    const logs = {
      open: (agent: { id: string; depth: number }) => {
        const log = inner.open(agent as never);
        return {
          ...log,
          append: (record: { type: string }) => {
            if (agent.depth > 0 && record.type === 'usage') throw new Error('ENOSPC: no space left on device');
            log.append(record as never);
          },
        };
      },
    };
    // The child crashes after its first (slow) response, while its parent waits in readyForUser.
    const provider = scriptedProvider({
      agents: { root: [{ calls: [spawn('c')] }, { text: 'wait' }, { text: 'carried on' }], c: [{ ...reply('r'), delayMs: 20 }] },
    });
    const states: unknown[] = [];
    const result = await runAgent(
      'go',
      { provider, logs },
      {
        inspect: (e) => {
          const snapshot = e.type === '@xstate.snapshot' ? (e.snapshot as { value?: unknown; context?: { agent?: { id: string } } }) : undefined;
          if (snapshot?.context?.agent?.id === 'root' && states.at(-1) !== snapshot.value) states.push(snapshot.value);
        },
      },
    );
    expect(states.slice(-3)).toEqual(['readyForUser', 'streaming', 'readyForUser']);
    expect(result.text).toBe('carried on');
    expect(userTexts(result.snapshot.context.messages)).toContain("[agent 'c' failed: sub-agent crashed: ENOSPC: no space left on device]");
  });

  it('finished children are stopped and dropped from the actor tree', async () => {
    const { snapshot } = await runTraced(
      { root: [{ calls: [spawn('a'), spawn('b')] }, { text: 'wait' }, { text: 'done' }], a: [reply('a')], b: [reply('b')] },
      { task: 'go' },
    );
    // Sub-agents live in crews of the session (machines/crew.ts); neither may outlive its work.
    expect(Object.keys(snapshot.children).filter((id) => id.startsWith('crew.') || /^\d+$/.test(id))).toEqual([]);
    expect(snapshot.context.children.size).toBe(0);
  });

  it("an inspector tells a crew from a session by its machine id, 'crew' (one per batch, beside a session per agent)", async () => {
    const ids: unknown[] = [];
    await runAgent(
      'go',
      {
        provider: scriptedProvider({
          agents: { root: [{ calls: [spawn('a'), spawn('b')] }, { text: 'wait' }, { text: 'done' }], a: [reply('a')], b: [reply('b')] },
        }),
      },
      {
        inspect: (e) => {
          if (e.type === '@xstate.actor') ids.push((e.actorRef as unknown as { logic?: { id?: unknown } }).logic?.id);
        },
      },
    );
    expect(ids).toEqual(['session', 'crew', 'session', 'session']);
  });

  it("token usage rolls up from grandchildren through children to the root's result", async () => {
    const usage = { inputTokens: 100, outputTokens: 10, cacheReadInputTokens: 1, cacheCreationInputTokens: 2 };
    const step = (s: ScriptedStep): ScriptedStep => ({ ...s, usage });
    const { actor, snapshot } = await runTraced(
      {
        root: [step({ calls: [spawn('c')] }), step({ text: 'wait' }), step({ text: 'done' })],
        c: [step({ calls: [spawn('g')] }), step({ text: 'wait' }), step(reply('c'))],
        g: [step(reply('g'))],
      },
      { task: 'go' },
    );
    expect(snapshot.context.childUsage).toEqual({ inputTokens: 400, outputTokens: 40, cacheReadInputTokens: 4, cacheCreationInputTokens: 8 });
    actor.send({ type: 'cancel' });
    expect(actor.getSnapshot().output?.usage).toEqual({ inputTokens: 700, outputTokens: 70, cacheReadInputTokens: 7, cacheCreationInputTokens: 14 });
  });

  it('1,000 sub-agents fanned out from one parent all deliver', async () => {
    const n = 1000;
    const names = Array.from({ length: n }, (_, i) => `worker-${i}`);
    const provider = scriptedProvider({
      agents: {
        root: (request: ModelRequest, index: number) =>
          index === 0 ? { calls: names.map((name) => spawn(name)) } : { text: `received ${request.messages.length}` },
        '*': (request: ModelRequest) => reply(`result of ${request.agent.name}`),
      },
    });
    const result = await runAgent('fan out', { provider });
    const inbox = userTexts(result.snapshot.context.messages)
      .filter((t) => t.startsWith('[agent'))
      .join('\n\n');
    const delivered = inbox.match(/\[agent 'worker-\d+' replied\]\nresult of worker-\d+/g) ?? [];
    expect(new Set(delivered).size).toBe(n);
    expect(provider.pairingViolations).toEqual([]);
    expect(result.state).toBe('readyForUser');
    expect(Object.keys(result.snapshot.children).filter((id) => id.startsWith('crew.'))).toEqual([]);
  });
});

describe('cancel_agent', () => {
  it('cancels a live child and its whole subtree, and the parent is told', async () => {
    const { snapshot, last, logs } = await runTraced(
      {
        // The root's second step starts late enough for c to have spawned g.
        root: [{ calls: [spawn('c')] }, { calls: [{ name: 'cancel_agent', input: { name: 'c' } }], delayMs: 20 }, { text: 'wait' }, { text: 'done' }],
        c: [{ calls: [spawn('g')] }, { text: 'waiting for g' }],
        g: [{ text: 'working forever', delayMs: 60_000 }],
      },
      { task: 'go' },
    );
    expect(userTexts(snapshot.context.messages).filter((t) => t.startsWith('[agent'))).toEqual(["[agent 'c' was cancelled]"]);
    expect(last.get('root/c')?.value).toBe('cancelled');
    expect(last.get('root/c/g')?.value).toBe('cancelled');
    expect(logs.records('root/c/g').at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled' });
  });

  it('a name with no live child gets an error result', async () => {
    const { snapshot } = await runTraced({ root: [{ calls: [{ name: 'cancel_agent', input: { name: 'ghost' } }] }, { text: 'ok' }] }, { task: 'go' });
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({ is_error: true, content: "no running sub-agent named 'ghost'" });
  });

  it('a child cancelled by its parent still delivers exactly one result', async () => {
    const { snapshot } = await runTraced(
      {
        root: [{ calls: [spawn('c'), { name: 'cancel_agent', input: { name: 'c' } }] }, { text: 'wait' }, { text: 'done' }],
        c: [{ text: 'never', delayMs: 60_000 }],
      },
      { task: 'go' },
    );
    expect(userTexts(snapshot.context.messages).filter((t) => t.startsWith('[agent'))).toEqual(["[agent 'c' was cancelled]"]);
  });
});

describe('cancellation', () => {
  const hang = defineTool({
    name: 'hang',
    description: 'never returns until aborted',
    input: z.object({}),
    run: (_input, { signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')))),
  });
  const quick = defineTool({ name: 'quick', description: 'q', input: z.object({}), run: () => 'quick result' });

  it('cancelling mid-batch answers every pending tool_use and keeps finished results', async () => {
    const { actor, logs } = startTraced(
      {
        root: [
          {
            calls: [
              { name: 'quick', input: {} },
              { name: 'hang', input: {} },
              { name: 'hang', input: {} },
            ],
          },
        ],
      },
      { task: 'go', tools: [hang, quick] },
    );
    await until(actor, (s) => s.value === 'dispatchingBatch' && (s.context.batch?.results.size ?? 0) >= 1);
    actor.send({ type: 'cancel', reason: 'user interrupted' });
    const messages = actor.getSnapshot().context.messages;
    expect(toolResults(messages).map((r) => [r.content, r.is_error ?? false])).toEqual([
      ['quick result', false],
      ['cancelled', true],
      ['cancelled', true],
    ]);
    const { findPairingProblems } = await import('../../../src/index.js');
    expect(findPairingProblems(messages)).toEqual([]);
    expect(logs.records('root').at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled', reason: 'user interrupted' });
  });

  it('stopping the actor mid-batch also answers the pending calls in the log, and aborts the tools', async () => {
    let aborted = 0;
    const watch = defineTool({
      name: 'watch',
      description: 'w',
      input: z.object({}),
      run: (_i, { signal }) => new Promise((_, reject) => signal.addEventListener('abort', () => reject(new Error(`aborted ${++aborted}`)))),
    });
    const { actor, logs } = startTraced(
      {
        root: [
          {
            calls: [
              { name: 'watch', input: {} },
              { name: 'watch', input: {} },
            ],
          },
        ],
      },
      { task: 'go', tools: [watch] },
    );
    await until(actor, (s) => s.value === 'dispatchingBatch');
    actor.stop();
    await new Promise((r) => setTimeout(r, 5));
    expect(aborted).toBe(2);
    const records = logs.records('root');
    const last = records.filter((r) => r.type === 'message').at(-1);
    expect(last?.type === 'message' && last.content.map((b) => b.type === 'tool_result' && b.content)).toEqual(['cancelled', 'cancelled']);
    expect(records.at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled', reason: 'session actor stopped' });
  });

  it('cancelling while streaming aborts the request through its signal', async () => {
    let signalSeen: AbortSignal | undefined;
    const provider = {
      name: 'spy',
      stream: (request: ModelRequest) => {
        signalSeen = request.signal;
        return new Promise<never>((_, reject) => request.signal.addEventListener('abort', () => reject(request.signal.reason)));
      },
    };
    const { createSessionActor } = await import('../../../src/index.js');
    const actor = createSessionActor({ provider, task: 'go' });
    actor.start();
    await until(actor, (s) => s.value === 'streaming');
    expect(signalSeen?.aborted).toBe(false);
    actor.send({ type: 'cancel' });
    expect(signalSeen?.aborted).toBe(true);
    expect(actor.getSnapshot().value).toBe('cancelled');
  });

  it('cancelling the root cancels its children first', async () => {
    const { actor, logs } = startTraced({ root: [{ calls: [spawn('c')] }, { text: 'wait' }], c: [{ text: 'slow', delayMs: 60_000 }] }, { task: 'go' });
    await until(actor, (s) => s.value === 'readyForUser' && s.context.children.size === 1);
    actor.send({ type: 'cancel' });
    expect(logs.records('root/c').at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled', reason: 'parent cancelled' });
  });
});
