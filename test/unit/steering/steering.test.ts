import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { cancelAgent, defineTool, findPairingProblems, messageAgent } from '../../../src/index.js';
import { resumeRun, startRun, type DurableRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider, type Script } from '../../../src/testing/scriptedProvider.js';
import type { Message } from '../../../src/engine/types.js';
import { delegating, startTraced, untilSettled } from '../../support/helpers.js';
import { hangingTool } from '../../support/hangingTool.js';
import { interruptingEffect } from '../../support/interruptingEffect.js';

/** Issue 17, steering: from the host, cancel one sub-agent's subtree by path, or give a running sub-agent a message. */

function textOf(message: Message | undefined): string {
  return message?.content.map((b) => (b.type === 'text' ? b.text : '')).join('') ?? '';
}

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  if (!check()) throw new Error('condition never held');
}

describe('steering a live tree', () => {
  it('cancels one sub-agent and its subtree by path; its parent receives was cancelled and the sibling goes on', async () => {
    const traced = startTraced(
      {
        root: delegating('lead', 'lead'),
        lead: [
          {
            calls: [
              { name: 'agent', input: { name: 'slow', task: 'slow' } },
              { name: 'agent', input: { name: 'quick', task: 'quick' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { calls: [{ name: 'reply', input: { result: 'lead done' } }] },
        ],
        slow: [{ calls: [{ name: 'agent', input: { name: 'deep', task: 'deep' } }] }, { text: 'waiting' }],
        deep: [{ text: 'never ends', delayMs: 60_000 }],
        quick: [{ calls: [{ name: 'reply', input: { result: 'quick done' } }], delayMs: 30 }],
      },
      { task: 'go', maxDepth: 3 },
    );
    await until(() => traced.last.get('root/lead/slow/deep')?.value === 'streaming');
    expect(cancelAgent(traced.actor, 'root/lead/nobody')).toBe(false);
    expect(cancelAgent(traced.actor, 'root/lead/slow')).toBe(true);
    const settled = await untilSettled(traced.actor);
    expect(settled.value).toBe('readyForUser');
    expect(traced.last.get('root/lead/slow/deep')?.value).toBe('cancelled');
    const told = textOf(traced.provider.requestsOf('root/lead')[1]?.lastMessage);
    expect(told).toContain("[agent 'slow' was cancelled]");
    expect(told).toContain("[agent 'quick' replied]\nquick done");
  });

  it('gives a running sub-agent a message by path; it receives it as a user turn at its next boundary', async () => {
    const traced = startTraced(
      {
        root: delegating('lead', 'lead'),
        // The lead ends its turn while its worker runs, so it rests at readyForUser: a boundary.
        lead: [
          { calls: [{ name: 'agent', input: { name: 'worker', task: 'work' } }] },
          { text: 'waiting for the worker' },
          { text: 'noted' },
          { calls: [{ name: 'reply', input: { result: 'lead done' } }] },
        ],
        worker: [{ calls: [{ name: 'reply', input: { result: 'worked' } }], delayMs: 300 }],
      },
      { task: 'go' },
    );
    await until(() => traced.last.get('root/lead')?.value === 'readyForUser' && traced.provider.requestsOf('root/lead').length === 2);
    expect(messageAgent(traced.actor, 'root/lead', 'Also check the README.')).toBe(true);
    await untilSettled(traced.actor);
    expect(textOf(traced.provider.requestsOf('root/lead')[2]?.lastMessage)).toBe('Also check the README.');
    expect(messageAgent(traced.actor, 'root/lead', 'too late')).toBe(false);
  });

  it('a message sent while a sub-agent runs a tool batch reaches its next request, after the results, exactly once', async () => {
    let release: () => void = () => undefined;
    let started: () => void = () => undefined;
    const running = new Promise<void>((resolve) => (started = resolve));
    const slow = defineTool({
      name: 'slow',
      description: 'A slow call.',
      input: z.object({}),
      run: async () => {
        started();
        await new Promise<void>((resolve) => (release = resolve));
        return 'slow result';
      },
    });
    const traced = startTraced(
      {
        root: delegating('worker', 'work'),
        worker: [
          { calls: [{ name: 'slow', input: {} }] },
          { calls: [{ name: 'slow', input: {} }] },
          { calls: [{ name: 'reply', input: { result: 'worked' } }] },
        ],
      },
      { task: 'go', tools: [slow] },
    );
    await running;
    expect(traced.last.get('root/worker')?.value).toBe('dispatchingBatch');
    expect(messageAgent(traced.actor, 'root/worker', 'Focus on the tests.')).toBe(true);
    release();
    await until(() => traced.provider.requestsOf('root/worker').length === 2);
    // Its next request: the batch's result, then the message, in one user message.
    const next = traced.provider.requestsOf('root/worker')[1]?.lastMessage;
    expect(next?.role).toBe('user');
    expect(next?.content.map((b) => (b.type === 'text' ? `text: ${b.text}` : b.type === 'tool_result' ? `result: ${b.content}` : b.type))).toEqual([
      'result: slow result',
      'text: Focus on the tests.',
    ]);
    release();
    await untilSettled(traced.actor);
    // Exactly once in the whole history, which the API accepts.
    const history = traced.last.get('root/worker')?.context.messages ?? [];
    expect(history.flatMap((m) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : []))).filter((t) => t === 'Focus on the tests.')).toHaveLength(1);
    expect(findPairingProblems(history)).toEqual([]);
    expect(traced.provider.pairingViolations).toEqual([]);
    expect(traced.last.get('root/worker')?.value).toBe('replied');
  });

  it('a sub-agent cancelled while it runs a tool, with a message queued, closes its batch with the cancellation alone', async () => {
    const { wait, running, reasons } = hangingTool();
    const traced = startTraced({ root: delegating('worker', 'work'), worker: [{ calls: [{ name: 'wait', input: {} }] }] }, { task: 'go', tools: [wait] });
    await running;
    expect(messageAgent(traced.actor, 'root/worker', 'Focus on the tests.')).toBe(true);
    expect(cancelAgent(traced.actor, 'root/worker', 'not needed')).toBe(true);
    await untilSettled(traced.actor);
    expect(reasons).toEqual(['cancelled']);
    expect(traced.last.get('root/worker')?.value).toBe('cancelled');
    // The message was for a turn that never comes: the closing message holds the call's answer only.
    const history = traced.last.get('root/worker')?.context.messages ?? [];
    expect(history.at(-1)?.content).toEqual([{ type: 'tool_result', tool_use_id: expect.any(String), content: 'cancelled', is_error: true }]);
    expect(history.some((m) => textOf(m).includes('Focus on the tests.'))).toBe(false);
    expect(findPairingProblems(history)).toEqual([]);
  });

  it('a message sent while a sub-agent makes its last request is its next turn, not lost to the reply reminder', async () => {
    const traced = startTraced(
      {
        root: delegating('worker', 'work'),
        // It ends its step without replying while the message waits: it is not quiet, so it takes the message.
        worker: [{ text: 'thinking', delayMs: 50 }, { calls: [{ name: 'reply', input: { result: 'heard you' } }] }],
      },
      { task: 'go' },
    );
    await until(() => traced.provider.requestsOf('root/worker').length === 1);
    expect(messageAgent(traced.actor, 'root/worker', 'Reply now.')).toBe(true);
    await untilSettled(traced.actor);
    expect(textOf(traced.provider.requestsOf('root/worker')[1]?.lastMessage)).toBe('Reply now.');
    expect(traced.last.get('root/worker')?.output?.text).toBe('heard you');
    expect(traced.logs.records('root/worker').filter((r) => r.type === 'nudge')).toEqual([]);
  });

  it('a durable run resumed after the batch that delivered a message does not deliver it again', async () => {
    const store = new MemoryRunStore();
    let run: DurableRun | undefined;
    // The first call: a message reaches the worker while it runs. The second: Ctrl-C.
    const { tool: effect } = interruptingEffect({
      at: 2,
      run: () => run,
      onCall: (call) => void (call === 1 && messageAgent(run?.actor ?? (undefined as never), 'root/worker', 'Also check b.md.')),
    });
    const scripts = (): Record<string, Script> => ({
      root: (request) =>
        request.messages.length === 1
          ? {
              calls: [
                { name: 'agent', input: { name: 'worker', task: 'Work.' } },
                { name: 'wait_for_agents', input: {} },
              ],
            }
          : { text: 'ok' },
      worker: (request) => {
        const done = request.messages.filter((m) => m.role === 'assistant').length;
        return done < 2 ? { calls: [{ name: 'effect', input: {} }] } : { calls: [{ name: 'reply', input: { result: 'all done' } }] };
      },
    });
    run = await startRun('task', { provider: new ScriptedProvider({ agents: scripts() }), tools: [effect] }, { store });
    expect((await run.result).status).toBe('interrupted');
    const provider = new ScriptedProvider({ agents: scripts() });
    const resumed = await resumeRun(run.id, { provider, tools: [effect] }, { store });
    if ('finished' in resumed) throw new Error('the interrupted run was not resumed');
    const result = await resumed.result;
    expect([result.status, result.reason]).toEqual(['done', undefined]);
    const worker = provider.requestsOf('root/worker');
    expect(worker.length).toBeGreaterThan(0);
    // The resumed worker's requests carry the message in their history once, and none delivers it again.
    const [first] = worker;
    expect(first?.lastMessage?.content.some((b) => b.type === 'text' && b.text === 'Also check b.md.')).toBe(false);
    const history = resumed.actor.getSnapshot().context.messages;
    expect(history.length).toBeGreaterThan(0);
    const journal = store.journal(run.id).filter((row) => row.session === 'root/worker' && row.record.type === 'message');
    const deliveries = journal.filter(
      (row) => row.record.type === 'message' && row.record.content.some((b) => b.type === 'text' && b.text === 'Also check b.md.'),
    );
    expect(deliveries).toHaveLength(1);
    expect(provider.pairingViolations).toEqual([]);
  });
});
