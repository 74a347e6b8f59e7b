import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionActor, defineTool, respond, ZERO_USAGE, type ApprovalRequest } from '../../../src/index.js';
import type { Message, ModelResponse, Provider } from '../../../src/engine/types.js';
import { ApprovalStop } from '../../../src/engine/approvalStop.js';
import { resumeRun, startRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { recordApproval } from '../../../src/store/runApprovals.js';
import { ScriptedProvider } from '../../../src/testing/index.js';
import { runTraced, untilSettled, startTraced, toolResults } from '../../support/helpers.js';

/**
 * Issue 17, approvals: a call of a tool that needs a person is not run; its session rests in
 * `awaitingApproval` (the rest of the tree goes on) and the request surfaces at the root; the answer
 * given at the root resumes exactly that call.
 */

/** A host tool with an effect the test can count: each run appends its note. */
function noteTool() {
  const written: string[] = [];
  const tool = defineTool({
    name: 'write_note',
    description: 'Write a note',
    input: z.object({ text: z.string() }),
    run: async ({ text }) => {
      written.push(text);
      return `wrote ${text}`;
    },
  });
  return { tool, written };
}

const spawn = (name: string, task: string) => ({ name: 'agent', input: { name, task } });
const note = (text: string) => ({ name: 'write_note', input: { text } });
const reply = (result: unknown) => ({ calls: [{ name: 'reply', input: { result } }] });

function resultsOf(messages: readonly Message[]): string[] {
  return toolResults(messages).map((r) => `${r.is_error === true ? 'error' : 'ok'}: ${r.content}`);
}

/** Resolves with the first `count` requests the root hears of. */
function requests(count: number): { seen: ApprovalRequest[]; arrived: Promise<void>; onApprovalRequest: (r: ApprovalRequest) => void } {
  const seen: ApprovalRequest[] = [];
  let done: () => void = () => undefined;
  const arrived = new Promise<void>((resolve) => (done = resolve));
  return {
    seen,
    arrived,
    onApprovalRequest: (request) => {
      seen.push(request);
      if (seen.length === count) done();
    },
  };
}

describe('approvals', () => {
  it("a grandchild's call waits in awaitingApproval while its sibling finishes; approved at the root, it runs once", async () => {
    const { tool, written } = noteTool();
    const asked = requests(1);
    const traced = startTraced(
      {
        root: [{ calls: [spawn('lead', 'Lead the notes.'), { name: 'wait_for_agents', input: {} }] }, { text: 'all done' }],
        lead: [{ calls: [spawn('scribe', 'Write the note hello.'), spawn('sibling', 'Say hi.'), { name: 'wait_for_agents', input: {} }] }, reply('lead done')],
        scribe: [{ calls: [note('hello')] }, reply('written')],
        sibling: [reply('hi')],
      },
      { task: 'Take notes', tools: [tool], approve: ['write_note'], onApprovalRequest: asked.onApprovalRequest },
    );
    await asked.arrived;
    const [request] = asked.seen;
    expect(request).toMatchObject({ type: 'approval.requested', tool: 'write_note', input: { text: 'hello' }, task: 'Write the note hello.' });
    expect(request?.agent.path).toEqual(['root', 'lead', 'scribe']);
    expect(request?.callId).toMatch(/^toolu_/);
    // The sibling finishes while the scribe waits; nothing is written before the answer.
    await until(() => traced.last.get('root/lead/sibling')?.status === 'done');
    expect(traced.last.get('root/lead/scribe')?.value).toBe('awaitingApproval');
    expect(written).toEqual([]);
    respond(traced.actor, { callId: request?.callId ?? '', decision: 'approve' });
    const settled = await untilSettled(traced.actor);
    expect(settled.context.failure).toBe(null);
    expect(settled.value).toBe('readyForUser');
    expect(written).toEqual(['hello']);
    expect(traced.trail.get('root/lead/scribe')).toEqual([
      'starting',
      'streaming',
      'awaitingApproval',
      'dispatchingBatch',
      'streaming',
      'dispatchingBatch',
      'replied',
    ]);
    expect(resultsOf(lastMessageOf(traced, 'root/lead/scribe', 1))).toEqual(['ok: wrote hello']);
  });

  it('a denial is an is_error result carrying the reason, and the tool does not run', async () => {
    const { tool, written } = noteTool();
    const asked = requests(1);
    const traced = startTraced(
      { root: [{ calls: [note('secret')] }, { text: 'understood' }] },
      { task: 'Note it', tools: [tool], approve: 'all', onApprovalRequest: asked.onApprovalRequest },
    );
    await asked.arrived;
    respond(traced.actor, { callId: asked.seen[0]?.callId ?? '', decision: 'deny', reason: 'not in this folder' });
    await untilSettled(traced.actor);
    expect(written).toEqual([]);
    expect(resultsOf(lastMessageOf(traced, 'root', 1))).toEqual(["error: tool 'write_note' was not run: a person denied this call: not in this folder"]);
  });

  it('always approves the call and every later call of that tool in the run without asking', async () => {
    const { tool, written } = noteTool();
    const asked = requests(1);
    const traced = startTraced(
      {
        root: [{ calls: [note('one')] }, { calls: [spawn('helper', 'Write two.')] }, { text: 'waiting' }, { text: 'done' }],
        helper: [{ calls: [note('two'), note('three')] }, reply('ok')],
      },
      { task: 'Notes', tools: [tool], approve: ['write_note'], onApprovalRequest: asked.onApprovalRequest },
    );
    await asked.arrived;
    respond(traced.actor, { callId: asked.seen[0]?.callId ?? '', decision: 'always' });
    await untilSettled(traced.actor);
    expect(asked.seen).toHaveLength(1);
    expect(written.sort()).toEqual(['one', 'three', 'two']);
    expect(traced.trail.get('root/helper')).not.toContain('awaitingApproval');
  });

  it('a predicate decides per call; an answer for a call that is not waiting changes nothing', async () => {
    const { tool, written } = noteTool();
    const asked = requests(1);
    const traced = startTraced(
      { root: [{ calls: [note('safe'), note('rm -rf')] }, { text: 'ok' }] },
      { task: 'Notes', tools: [tool], approve: ({ input }) => String(input['text']).includes('rm'), onApprovalRequest: asked.onApprovalRequest },
    );
    await asked.arrived;
    expect(asked.seen.map((r) => r.input)).toEqual([{ text: 'rm -rf' }]);
    expect(respond(traced.actor, { callId: 'toolu_not_waiting', decision: 'approve' })).toBe(false);
    expect(traced.actor.getSnapshot().value).toBe('awaitingApproval');
    respond(traced.actor, { callId: asked.seen[0]?.callId ?? '', decision: 'deny' });
    await untilSettled(traced.actor);
    // Nothing of a batch runs while one of its calls waits: the safe call ran after the answer.
    expect(written).toEqual(['safe']);
  });

  it("names the session's task: the whole text of its first user message, a given history's included", async () => {
    const { tool } = noteTool();
    const asked = requests(1);
    const history: Message[] = [
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Keep notes. ' },
          { type: 'text', text: 'Ask before writing.' },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'Will do.' }] },
    ];
    const traced = startTraced(
      { root: [{ calls: [note('first')] }, { text: 'ok' }] },
      { task: 'Write the first note.', history, tools: [tool], approve: 'all', onApprovalRequest: asked.onApprovalRequest },
    );
    await asked.arrived;
    expect(asked.seen[0]?.task).toBe('Keep notes. Ask before writing.');
    respond(traced.actor, { callId: asked.seen[0]?.callId ?? '', decision: 'deny' });
    await untilSettled(traced.actor);
  });

  it('cancelling a session that waits answers its calls cancelled and withdraws the request', async () => {
    const { tool, written } = noteTool();
    const asked = requests(1);
    const traced = startTraced(
      { root: [{ calls: [note('x')] }] },
      { task: 'Notes', tools: [tool], approve: 'all', onApprovalRequest: asked.onApprovalRequest },
    );
    await asked.arrived;
    traced.actor.send({ type: 'cancel' });
    const snapshot = traced.actor.getSnapshot();
    expect(snapshot.value).toBe('cancelled');
    expect(resultsOf(snapshot.context.messages)).toEqual(['error: cancelled']);
    // Withdrawn, not just hidden (`waiting()` also drops the calls of ended sessions, so ask first): a late answer finds no call.
    expect(respond(traced.actor, { callId: asked.seen[0]?.callId ?? '', decision: 'approve' })).toBe(false);
    expect(snapshot.context.options.approvals.waiting()).toEqual([]);
    expect(written).toEqual([]);
  });

  it('an answer event for a call that is not waiting, sent straight to the session, changes nothing: the session waits on for its own', async () => {
    const { tool, written } = noteTool();
    const asked = requests(1);
    const traced = startTraced(
      { root: [{ calls: [note('x')] }, { text: 'ok' }] },
      { task: 'Notes', tools: [tool], approve: 'all', onApprovalRequest: asked.onApprovalRequest },
    );
    await asked.arrived;
    traced.actor.send({ type: 'approval.answer', callId: 'toolu_not_waiting', decision: 'deny', reason: 'stray' });
    expect(traced.actor.getSnapshot()).toMatchObject({ status: 'active', value: 'awaitingApproval' });
    expect(written).toEqual([]);
    respond(traced.actor, { callId: asked.seen[0]?.callId ?? '', decision: 'approve' });
    const settled = await untilSettled(traced.actor);
    expect(settled.context.failure).toBe(null);
    expect(written).toEqual(['x']);
  });
});

describe('which calls the approval policy is asked about', () => {
  it('a predicate is asked once, and only about complete, well-formed calls of host tools: not about text, protocol calls, unknown tools, over-deep or cut-off input', async () => {
    const { tool } = noteTool();
    const asked: string[] = [];
    // Past MAX_TOOL_INPUT_DEPTH (64): the call is refused with an error and never executed.
    let deep: unknown = 'bottom';
    for (let i = 0; i < 70; i++) deep = [deep];
    await runTraced(
      {
        root: [
          {
            content: [
              'Let me write.',
              note('fine'),
              { name: 'wait_for_agents', input: {} },
              { name: 'no_such_tool', input: { text: 'x' } },
              { name: 'write_note', input: { text: deep } },
              { name: 'write_note', input: { text: 'cut off mid-input' }, cutOff: true },
            ],
          },
          { text: 'ok' },
        ],
      },
      {
        task: 'Notes',
        tools: [tool],
        approve: (call) => {
          asked.push(`${call.tool} ${JSON.stringify(call.input)}`);
          return false;
        },
      },
    );
    // Once: a host's predicate may prompt or count.
    expect(asked).toEqual(['write_note {"text":"fine"}']);
  });

  it('a predicate that tells agents apart is asked per session, even when a provider hands two sessions one response object', async () => {
    const { tool, written } = noteTool();
    const use = (id: string, name: string, input: Record<string, unknown>) => ({ type: 'tool_use' as const, id, name, input });
    const respondWith = (content: ModelResponse['content'], stopReason: ModelResponse['stopReason'] = 'tool_use'): ModelResponse =>
      Object.freeze({ content, stopReason, usage: ZERO_USAGE, incompleteToolUseIds: [] });
    // A provider that memoises: both sub-agents' first step is this very object.
    const shared = respondWith([use('toolu_note', 'write_note', { text: 'x' })]);
    const steps = new Map<string, number>();
    const provider: Provider = {
      name: 'memoising',
      async stream(request) {
        const step = steps.get(request.agent.id) ?? 0;
        steps.set(request.agent.id, step + 1);
        if (request.agent.depth === 0) {
          return step === 0
            ? respondWith([
                use('toolu_a', 'agent', { name: 'a', task: 'Note.' }),
                use('toolu_b', 'agent', { name: 'b', task: 'Note.' }),
                use('toolu_w', 'wait_for_agents', {}),
              ])
            : respondWith([{ type: 'text', text: 'done' }], 'end_turn');
        }
        return step === 0 ? shared : respondWith([use('toolu_reply', 'reply', { result: 'noted' })]);
      },
    };
    const askedAbout: string[] = [];
    const actor = createSessionActor({
      provider,
      task: 'Notes',
      tools: [tool],
      approve: (call) => call.agent.name === 'b',
      onApprovalRequest: (request) => {
        askedAbout.push(request.agent.name);
        respond(actor, { callId: request.callId, decision: 'approve' });
      },
    });
    actor.start();
    const settled = await untilSettled(actor);
    expect(settled.value).toBe('readyForUser');
    expect(askedAbout).toEqual(['b']);
    expect(written).toEqual(['x', 'x']);
  });

  it('a durable run whose calls need no approval journals no approval records', async () => {
    const { tool, written } = noteTool();
    const store = new MemoryRunStore();
    const agents = { root: [{ calls: [note('x'), { name: 'no_such_tool', input: {} }] }, { text: 'done' }] };
    const run = await startRun('Notes', { provider: new ScriptedProvider({ agents }), tools: [tool] }, { store });
    expect((await run.result).status).toBe('done');
    expect(written).toEqual(['x']);
    const types = store.journal(run.id).map((row) => row.record.type);
    expect(types).toContain('tool');
    expect(types.filter((type) => type === 'awaiting' || type === 'approval' || type === 'dispatching')).toEqual([]);
  });
});

describe('approvals with no one to ask (a worker, a run without a terminal)', () => {
  it("ApprovalStop stops the run waiting once only the call is left; approved and resumed, the call runs once and the batch's wait is answered", async () => {
    const { tool, written } = noteTool();
    const store = new MemoryRunStore();
    // The root's batch starts a sub-agent, writes (which waits), and waits for the sub-agent; it finishes meanwhile.
    const agents = { root: [{ calls: [spawn('p', 'Say.'), note('x'), { name: 'wait_for_agents', input: {} }] }, { text: 'done' }], p: [reply('said')] };
    const stop = new ApprovalStop();
    const run = await startRun(
      'Notes',
      { provider: new ScriptedProvider({ agents }), tools: [tool], approve: ['write_note'] },
      { store, actor: { inspect: stop.inspect } },
    );
    stop.watch(run);
    expect((await run.result).status).toBe('waiting');
    stop.close();
    expect(stop.waiting.map((r) => `${r.tool} by ${r.agent.id}`)).toEqual(['write_note by root']);
    expect(written).toEqual([]);

    await recordApproval(store, run.id, { callId: stop.waiting[0]?.callId ?? '', decision: 'approve' });
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'done' }] } });
    const resumed = await resumeRun(run.id, { provider, tools: [tool], approve: ['write_note'] }, { store });
    if ('finished' in resumed) throw new Error('the run should have been resumable');
    expect((await resumed.result).status).toBe('done');
    expect(written).toEqual(['x']);
    // One request, answering the whole batch: the write's result, the wait's, and the sub-agent's report after them.
    expect(provider.requestsOf('root')).toHaveLength(1);
    const last = provider.requestsOf('root')[0]?.lastMessage;
    expect(resultsOf(last ? [last] : [])).toEqual([
      expect.stringMatching(/^ok: Sub-agent 'p' started/),
      'ok: wrote x',
      'ok: 1 sub-agent finished; their results follow.',
    ]);
    expect(JSON.stringify(last?.content)).toContain("[agent 'p' replied]");
  });

  it('a run stopped waiting and resumed with no answer recorded journals that it resumed there, and waits again for the same calls, asking with their inputs', async () => {
    const { tool, written } = noteTool();
    const store = new MemoryRunStore();
    const session = (agents: Record<string, readonly object[]>) => ({ provider: new ScriptedProvider({ agents }), tools: [tool], approve: ['write_note'] });
    const stop = new ApprovalStop();
    const first = { content: ['Two notes.', note('x'), note('y')] };
    const run = await startRun('Notes', session({ root: [first] }), { store, actor: { inspect: stop.inspect } });
    stop.watch(run);
    expect((await run.result).status).toBe('waiting');
    stop.close();
    const rowsBefore = store.journal(run.id).length;
    const again = new ApprovalStop();
    const resumed = await resumeRun(run.id, session({ root: [] }), { store, actor: { inspect: again.inspect } });
    if ('finished' in resumed) throw new Error('the run should have been resumable');
    again.watch(resumed);
    expect((await resumed.result).status).toBe('waiting');
    again.close();
    expect(store.journal(run.id)[rowsBefore]).toMatchObject({ session: 'root', record: { type: 'resumed', state: 'awaitingApproval' } });
    const [x, y] = stop.waiting.map((r) => r.callId);
    expect(again.waiting.map((r) => ({ callId: r.callId, tool: r.tool, input: r.input }))).toEqual([
      { callId: x, tool: 'write_note', input: { text: 'x' } },
      { callId: y, tool: 'write_note', input: { text: 'y' } },
    ]);
    expect(written).toEqual([]);
  });

  it("'always' recorded for one of two waiting calls while the run is stopped: on resume the other call of that tool runs unasked, and its approval is journaled", async () => {
    const { tool, written } = noteTool();
    const store = new MemoryRunStore();
    const stop = new ApprovalStop();
    const agents = { root: [{ calls: [note('one'), note('two')] }] };
    const run = await startRun(
      'Notes',
      { provider: new ScriptedProvider({ agents }), tools: [tool], approve: ['write_note'] },
      { store, actor: { inspect: stop.inspect } },
    );
    stop.watch(run);
    expect((await run.result).status).toBe('waiting');
    stop.close();
    const [one, two] = stop.waiting.map((r) => r.callId);
    expect(stop.waiting.map((r) => r.input)).toEqual([{ text: 'one' }, { text: 'two' }]);

    await recordApproval(store, run.id, { callId: one ?? '', decision: 'always' });
    const rowsBefore = store.journal(run.id).length;
    const again = new ApprovalStop();
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'done' }] } });
    const resumed = await resumeRun(run.id, { provider, tools: [tool], approve: ['write_note'] }, { store, actor: { inspect: again.inspect } });
    if ('finished' in resumed) throw new Error('the run should have been resumable');
    again.watch(resumed);
    expect((await resumed.result).status).toBe('done');
    again.close();
    expect(again.waiting).toEqual([]);
    expect(written).toEqual(['one', 'two']);
    // What the resume journaled of approvals: the second call approved by the 'always', then the batch ran; nothing waited again.
    const afterResume = store
      .journal(run.id)
      .slice(rowsBefore)
      .flatMap((row) => (['awaiting', 'approval', 'dispatching'].includes(row.record.type) ? [row.record] : []));
    expect(afterResume).toEqual([{ type: 'approval', callId: two, tool: 'write_note', decision: 'approve' }, { type: 'dispatching' }]);
    // Before the fix the resumed root waited forever with nothing to ask: fail in seconds, not at the suite's timeout.
  }, 10_000);
});

describe('what a durable run journals of approvals answered live', () => {
  it('the waiting calls, each answer as given (a denial with its reason), then that the batch runs', async () => {
    const { tool, written } = noteTool();
    const store = new MemoryRunStore();
    const holder: { run?: Awaited<ReturnType<typeof startRun>> } = {};
    const ids = new Map<unknown, string>();
    // Answered after the request returns, as a person at a terminal would: a denies with a reason, b approves.
    const onApprovalRequest = (request: ApprovalRequest): void => {
      ids.set(request.input['text'], request.callId);
      const answer =
        request.input['text'] === 'a'
          ? { callId: request.callId, decision: 'deny' as const, reason: 'not a' }
          : { callId: request.callId, decision: 'approve' as const };
      setImmediate(() => holder.run && respond(holder.run.actor, answer));
    };
    const agents = { root: [{ calls: [note('a'), note('b')] }, { text: 'done' }] };
    const run = await startRun('Notes', { provider: new ScriptedProvider({ agents }), tools: [tool], approve: ['write_note'], onApprovalRequest }, { store });
    holder.run = run;
    expect((await run.result).status).toBe('done');
    expect(written).toEqual(['b']);
    const [a, b] = [ids.get('a'), ids.get('b')];
    const approvals = store.journal(run.id).flatMap((row) => (['awaiting', 'approval', 'dispatching'].includes(row.record.type) ? [row.record] : []));
    expect(approvals).toEqual([
      { type: 'awaiting', calls: [a, b] },
      { type: 'approval', callId: a, tool: 'write_note', decision: 'deny', reason: 'not a' },
      { type: 'approval', callId: b, tool: 'write_note', decision: 'approve' },
      { type: 'dispatching' },
    ]);
  });
});

/** What request `index` of an agent ended with (the results it was just given). */
function lastMessageOf(traced: ReturnType<typeof startTraced>, agent: string, index: number): Message[] {
  const last = traced.provider.requestsOf(agent)[index]?.lastMessage;
  return last ? [last] : [];
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!check()) throw new Error('condition never held');
}
