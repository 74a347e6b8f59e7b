import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, respond, type ApprovalRequest } from '../../../src/index.js';
import type { RemoteChild, RemoteChildren, RemoteChildSpec } from '../../../src/engine/remoteChildren.js';
import type { Message, ModelRequest } from '../../../src/engine/types.js';
import { resumeRun, startRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider, type Script } from '../../../src/testing/index.js';
import { RecordingStore, SkewedClock } from '../../support/durableStore.js';
import { untilSettled, startTraced, until } from '../../support/helpers.js';

/**
 * What a session does as a batch opens (`openBatch` in machines/openBatch.ts) that only a host
 * running sub-agents elsewhere, or a journal, can see: what a sub-agent started elsewhere is
 * handed, what the `spawn` record says, and that the answers given at once survive a crash.
 * Expected values are written out here.
 */

const ZERO = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
const profiles = { researcher: { description: 'Looks things up.' } };
const assistants = (request: ModelRequest): number => request.messages.filter((m) => m.role === 'assistant').length;

/** Each block of a message as one line: `text: …`, `call: name`, `result: content (error)`. */
function blocksOf(message: Message | undefined): string[] {
  return (message?.content ?? []).map((b) => {
    if (b.type === 'text') return `text: ${b.text}`;
    if (b.type === 'tool_use') return `call: ${b.name}`;
    return `result: ${String(b.content)}${b.is_error ? ' (error)' : ''}`;
  });
}

/** Runs every sub-agent "elsewhere": keeps what each was started with, and answers with a reply naming it. */
class FarAway implements RemoteChildren {
  readonly specs: RemoteChildSpec[] = [];
  start(child: RemoteChildSpec): RemoteChild {
    this.specs.push(child);
    const result = Promise.resolve({ name: child.agent.name, outcome: 'replied' as const, text: `${child.agent.name} did it far away`, usage: ZERO });
    return { result, cancel: () => undefined };
  }
}

describe('a sub-agent started elsewhere', () => {
  it("is handed its actor id, its parent, its identity, its task, and its declared type and budget only when the call gives them; its result is the parent's next turn", async () => {
    const remote = new FarAway();
    const traced = startTraced(
      {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'r', task: 'Look it up.', type: 'researcher', budget: { tokens: 500 } } },
              { name: 'agent', input: { name: 'plain', task: 'Just do it.' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'Both done.' },
        ],
      },
      { task: 'Go.', agents: profiles, remoteChildren: remote },
    );
    await untilSettled(traced.actor);
    const root = { name: 'root', path: ['root'], depth: 0, id: 'root' };
    // Strict: an absent type or budget is no key at all, not one holding undefined.
    expect(remote.specs).toStrictEqual([
      {
        actorId: '1',
        parent: root,
        agent: { name: 'r', path: ['root', 'r'], depth: 1, id: 'root/r' },
        task: 'Look it up.',
        profile: 'researcher',
        budget: { tokens: 500 },
      },
      { actorId: '2', parent: root, agent: { name: 'plain', path: ['root', 'plain'], depth: 1, id: 'root/plain' }, task: 'Just do it.' },
    ]);
    // Nothing ran here: only the root asked the model.
    expect(traced.provider.requests.map((r) => r.agentId)).toEqual(['root', 'root']);
    expect(blocksOf(traced.provider.requestsOf('root')[1]?.lastMessage).at(-1)).toBe(
      "text: [agent 'r' replied]\nr did it far away\n\n[agent 'plain' replied]\nplain did it far away",
    );
  });
});

/** Sub-agents elsewhere that run until cancelled; counts the cancels each gets. */
class Running implements RemoteChildren {
  readonly cancels: string[] = [];
  start(child: RemoteChildSpec): RemoteChild {
    let end: () => void = () => undefined;
    const result = new Promise<{ name: string; outcome: 'cancelled'; text: string; usage: typeof ZERO }>((resolve) => {
      // A remote child's result comes a while after its cancel (another process answers).
      end = () => setTimeout(() => resolve({ name: child.agent.name, outcome: 'cancelled', text: '', usage: ZERO }), 20);
    });
    return {
      result,
      cancel: (reason) => {
        this.cancels.push(`${child.agent.name}: ${reason}`);
        end();
      },
    };
  }
}

describe('a cancel_agent in a batch that waits for approval', () => {
  it('reaches the sub-agent at once and only once, though the batch is entered twice (approval, then dispatch)', async () => {
    const remote = new Running();
    const note = defineTool({ name: 'note', description: 'Takes a note.', input: z.object({}), run: () => 'noted' });
    const asked: ApprovalRequest[] = [];
    const traced = startTraced(
      {
        root: [
          { calls: [{ name: 'agent', input: { name: 'w', task: 'Work.' } }] },
          {
            calls: [
              { name: 'cancel_agent', input: { name: 'w' } },
              { name: 'note', input: {} },
            ],
          },
          { text: 'Stopped it.' },
          { text: 'Seen.' },
        ],
      },
      { task: 'Go.', tools: [note], approve: ['note'], onApprovalRequest: (r) => asked.push(r), remoteChildren: remote },
    );
    await until(traced.actor, (s) => s.value === 'awaitingApproval');
    // At once, as the batch opens: the sub-agent is not kept running while a person decides.
    expect(remote.cancels).toEqual(['w: cancelled by root']);
    expect(respond(traced.actor, { callId: asked[0]?.callId ?? '', decision: 'approve' })).toBe(true);
    await until(traced.actor, (s) => s.value === 'readyForUser' && s.context.children.size === 0 && s.context.inbox.length === 0);
    expect(remote.cancels).toEqual(['w: cancelled by root']);
  });
});

describe("the journal's spawn record", () => {
  it('names the declared type a sub-agent was started as, and holds no type for one started without', async () => {
    const store = new MemoryRunStore();
    const run = await startRun(
      'Task.',
      {
        provider: new ScriptedProvider({
          agents: {
            root: [
              {
                calls: [
                  { name: 'agent', input: { name: 'r', task: 'Look.', type: 'researcher' } },
                  { name: 'agent', input: { name: 'p', task: 'Do.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              },
              { text: 'done' },
            ],
            r: [{ calls: [{ name: 'reply', input: { result: 'r' } }] }],
            p: [{ calls: [{ name: 'reply', input: { result: 'p' } }] }],
          },
        }),
        agents: profiles,
      },
      { store },
    );
    await run.result;
    const spawns = store.journal(run.id).flatMap((row) => (row.record.type === 'spawn' ? [row.record] : []));
    expect(spawns).toStrictEqual([
      { type: 'spawn', name: 'r', id: 'root/r', actorId: '1', task: 'Look.', profile: 'researcher' },
      { type: 'spawn', name: 'p', id: 'root/p', actorId: '2', task: 'Do.' },
    ]);
  });
});

describe('a crash while a batch that started a sub-agent runs', () => {
  it('the resumed session answers the agent call as it was answered before the crash, not as a call never handled', async () => {
    let runs = 0;
    const effect = defineTool({ name: 'effect', description: 'x', input: z.object({}), run: () => `run ${++runs}` });
    const scripts: Record<string, Script> = {
      root: (r) =>
        assistants(r) === 0
          ? {
              calls: [
                { name: 'agent', input: { name: 'kid', task: 'Help.' } },
                { name: 'effect', id: 'toolu_effect', input: {} },
              ],
            }
          : { text: 'done' },
      kid: [{ calls: [{ name: 'reply', input: { result: 'helped' } }] }],
    };
    const clock = new SkewedClock();
    const store = new RecordingStore(new MemoryRunStore({ now: clock.now }));
    const run = await startRun('task', { provider: new ScriptedProvider({ agents: scripts }), tools: [effect] }, { store });
    expect((await run.result).status).toBe('done');
    // The crash: just after the append that journaled the batch's assistant message, before any result.
    const at = store.frozen.find((f) => f.rows.some((row) => row.record.type === 'message' && JSON.stringify(row.record).includes('toolu_effect')));
    if (!at) throw new Error('the call was never journaled');
    const crashed = at.store.clone();
    clock.expireLeases();
    const provider = new ScriptedProvider({ agents: scripts });
    const resumed = await resumeRun(run.id, { provider, tools: [effect] }, { store: crashed });
    if ('finished' in resumed) throw new Error('the crashed run was not resumed');
    expect((await resumed.result).status).toBe('done');
    const answered = provider.requestsOf('root').map((r) => blocksOf(r.lastMessage));
    expect(answered[0]).toEqual([
      "result: Sub-agent 'kid' started. Its result will arrive later as a message beginning with [agent 'kid' …].",
      "result: tool 'effect' was running when the process stopped, so its effect is unknown: it may or may not have taken effect, and it was not run again. Check before you repeat it. (error)",
    ]);
  });
});
