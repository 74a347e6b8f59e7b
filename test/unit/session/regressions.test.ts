import { describe, expect, it } from 'vitest';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { createSessionActor, findPairingProblems, MemoryLogSink, runAgent, ZERO_USAGE, type LogSink, type SessionSnapshot } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';
import { runScenario, type Scenario } from '../../support/fuzzScenario.js';
import { sleep, until } from '../../support/helpers.js';
import { within } from '../../support/until.js';
import { stopOrphansOf } from '../../../machines/crew.js';

/**
 * Bugs found by the model-based and property-based tests (issue 5), each kept as the shrunk case
 * that found it. Scenarios are replayed with the fuzzer's own runner, which checks every invariant.
 */

async function expectClean(scenario: Scenario): Promise<void> {
  const report = await runScenario(scenario);
  expect(report.violations, JSON.stringify(report.finals)).toEqual([]);
}

const limits = { maxDepth: 2, replyCap: 1, truncationBudget: 0, toolTimeoutMs: 5, stallTimeoutMs: 5, userMessagesAt: [] } as const;

/** A log that throws once, on the n-th usage record of one agent: its actor crashes inside a transition. */
function crashingLog(agentId: string, atUsage = 1): { logs: LogSink; inner: MemoryLogSink } {
  const inner = new MemoryLogSink();
  let usages = 0;
  return {
    inner,
    logs: {
      open: (agent) => {
        const log = inner.open(agent);
        return {
          ...log,
          append: (record) => {
            if (agent.id === agentId && record.type === 'usage' && ++usages === atUsage) throw new Error('ENOSPC: no space left on device');
            log.append(record);
          },
        };
      },
    },
  };
}

describe('regressions', () => {
  it('fuzz #1: a sub-agent that crashes leaves nothing of its own running (shrunk case)', async () => {
    await expectClean({
      ...limits,
      maxSteps: 2,
      root: { steps: [{ calls: [{ tool: 'agent', name: 'a' }] }], children: { a: { steps: [], children: {}, crashOnUsage: 1 } } },
    });
  });

  it('fuzz #1: the subtree of a crashed sub-agent is stopped: its own sub-agents make no more requests', async () => {
    const { logs, inner } = crashingLog('root/c', 2);
    const provider = scriptedProvider({
      agents: {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'lead' } }] }, { text: 'waiting' }, { text: 'c is gone, carrying on' }],
        // c starts g, then crashes on the usage record of its second response.
        c: [{ calls: [{ name: 'agent', input: { name: 'g', task: 'work' } }] }, { text: 'waiting for g', delayMs: 5 }],
        // g would keep working (one slow request after another) if nothing stopped it.
        g: (_request, index) => ({ text: `g step ${index}`, stopReason: 'pause_turn', delayMs: 10 }),
      },
    });
    const actors = new Set<AnyActorRef>();
    const actor = createSessionActor(
      { provider, logs, task: 'go', maxSteps: 1_000 },
      { inspect: (e: InspectionEvent) => void (e.type === '@xstate.actor' && actors.add(e.actorRef as AnyActorRef)) },
    );
    actor.start();
    await until(
      actor,
      (s: SessionSnapshot) =>
        s.value === 'readyForUser' && s.context.steps === 1 && s.context.inbox.length === 0 && s.context.children.size === 0 && s.context.messages.length > 4,
    );
    expect(
      actor
        .getSnapshot()
        .context.messages.some((m) => m.content.some((b) => b.type === 'text' && b.text.includes("[agent 'c' failed: sub-agent crashed: ENOSPC"))),
    ).toBe(true);
    const requestsOfG = provider.requestsOf('root/c/g').length;
    await sleep(60);
    expect(provider.requestsOf('root/c/g').length).toBe(requestsOfG);
    // Everything the crashed child had started is stopped; its log ends with the crash.
    const active = [...actors].filter((a) => (a !== actor && a.getSnapshot().status === 'active' ? isUnder(a, 'root/c') : false));
    expect(active.map((a) => a.id)).toEqual([]);
    expect(inner.records('root/c').at(-1)).toMatchObject({ type: 'outcome', outcome: 'failed', reason: 'session crashed: ENOSPC: no space left on device' });
    expect(inner.records('root/c/g').at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled' });
    // The parent's log holds the crash as c's result: failed, no text of its own, the crash as its reason.
    expect(inner.records('root').filter((r) => r.type === 'inbox')).toEqual([
      expect.objectContaining({
        result: { name: 'c', outcome: 'failed', text: '', reason: 'sub-agent crashed: ENOSPC: no space left on device', usage: ZERO_USAGE },
      }),
    ]);
    // The crew that ran c held no one else: it is stopped with it, not kept as an empty actor of the root.
    expect(Object.keys(actor.getSnapshot().children)).toEqual([]);
    actor.stop();
  });

  it('stopping the orphans of an actor that did not crash stops nothing: its request goes on and it finishes', async () => {
    const actor = createSessionActor({ provider: scriptedProvider({ agents: { root: [{ text: 'finished', delayMs: 20 }] } }), task: 'go' });
    actor.start();
    await until(actor, (s: SessionSnapshot) => s.value === 'streaming');
    stopOrphansOf(actor);
    stopOrphansOf(undefined);
    const settled = await within(
      until(actor, (s: SessionSnapshot) => s.value === 'readyForUser'),
      5_000,
      'the session after stopOrphansOf',
    );
    expect(settled.context.messages.at(-1)).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'finished' }] });
    actor.stop();
  });

  it('fuzz #1: runAgent stops the whole tree when the root itself crashes', async () => {
    const { logs } = crashingLog('root', 2);
    const actors = new Set<AnyActorRef>();
    const provider = scriptedProvider({
      agents: { root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'slow' } }] }, { text: 'waiting' }], c: [{ text: 'slow', delayMs: 60_000 }] },
    });
    await expect(
      runAgent('go', { provider, logs }, { inspect: (e) => void (e.type === '@xstate.actor' && actors.add(e.actorRef as AnyActorRef)) }),
    ).rejects.toThrow(/ENOSPC/);
    await sleep(5);
    expect([...actors].filter((a) => a.getSnapshot().status === 'active').map((a) => a.id)).toEqual([]);
  });

  it('fuzz #2: stopping a session whose batch holds only protocol calls still answers them (shrunk case)', async () => {
    await expectClean({
      ...limits,
      maxSteps: 4,
      stopAt: 7,
      root: { steps: [{ calls: [{ tool: 'agent', name: 'a' }] }], children: { a: { steps: [], children: {} } } },
    });
  });

  it('fuzz #2: stopped right after a batch of only agent calls opened, the log answers each call with its result', async () => {
    const logs = new MemoryLogSink();
    const provider = scriptedProvider({
      agents: {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'a', task: 't' } },
              { name: 'cancel_agent', input: { name: 'ghost' } },
            ],
          },
        ],
        a: [{ text: 'slow', delayMs: 60_000 }],
      },
    });
    // Stopped as the batch opens (its child already started), before the batch drains: its results
    // are staged, not committed. Synchronously, from the first snapshot in dispatchingBatch: the
    // drain of a batch with nothing to run is only a microtask away.
    const actor = createSessionActor({ provider, logs, task: 'go' });
    const subscription = actor.subscribe((snapshot) => {
      if (snapshot.value !== 'dispatchingBatch') return;
      subscription.unsubscribe();
      expect(snapshot.context.children.size).toBe(1);
      actor.stop();
    });
    actor.start();
    await sleep(5);
    expect(actor.getSnapshot()).toMatchObject({ status: 'stopped', value: 'dispatchingBatch' });
    const messages = actor.getSnapshot().context.messages;
    expect(findPairingProblems(messages)).toEqual([]);
    const last = logs
      .records('root')
      .filter((r) => r.type === 'message')
      .at(-1);
    expect(
      last?.type === 'message' && last.content.map((b) => b.type === 'tool_result' && [b.content.split(';')[0]?.split('.')[0], b.is_error ?? false]),
    ).toEqual([
      ["Sub-agent 'a' started", false],
      ["no running sub-agent named 'ghost'", true],
    ]);
  });
});

/** Is `actor` (a session or a crew) part of the subtree of the session `agentId`? */
function isUnder(actor: AnyActorRef, agentId: string): boolean {
  let ref: AnyActorRef | undefined = actor;
  while (ref) {
    const context = (ref.getSnapshot() as { context?: { agent?: { id: string } } }).context;
    if (context?.agent?.id === agentId) return true;
    ref = (ref as { _parent?: AnyActorRef })._parent;
  }
  return false;
}
