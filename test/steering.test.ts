import { describe, expect, it } from 'vitest';
import { cancelAgent, messageAgent, waitForSettled } from '../src/index.js';
import type { Message } from '../src/types.js';
import { startTraced } from './helpers.js';

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
        root: [{ calls: [{ name: 'agent', input: { name: 'lead', task: 'lead' } }, { name: 'wait_for_agents', input: {} }] }, { text: 'done' }],
        lead: [{ calls: [{ name: 'agent', input: { name: 'slow', task: 'slow' } }, { name: 'agent', input: { name: 'quick', task: 'quick' } }, { name: 'wait_for_agents', input: {} }] }, { calls: [{ name: 'reply', input: { result: 'lead done' } }] }],
        slow: [{ calls: [{ name: 'agent', input: { name: 'deep', task: 'deep' } }] }, { text: 'waiting' }],
        deep: [{ text: 'never ends', delayMs: 60_000 }],
        quick: [{ calls: [{ name: 'reply', input: { result: 'quick done' } }], delayMs: 30 }],
      },
      { task: 'go', maxDepth: 3 },
    );
    await until(() => traced.last.get('root/lead/slow/deep')?.value === 'streaming');
    expect(cancelAgent(traced.actor, 'root/lead/nobody')).toBe(false);
    expect(cancelAgent(traced.actor, 'root/lead/slow')).toBe(true);
    const settled = await waitForSettled(traced.actor);
    expect(settled.value).toBe('readyForUser');
    expect(traced.last.get('root/lead/slow/deep')?.value).toBe('cancelled');
    const told = textOf(traced.provider.requestsOf('root/lead')[1]?.lastMessage);
    expect(told).toContain("[agent 'slow' was cancelled]");
    expect(told).toContain("[agent 'quick' replied]\nquick done");
  });

  it('gives a running sub-agent a message by path; it receives it as a user turn at its next boundary', async () => {
    const traced = startTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'lead', task: 'lead' } }, { name: 'wait_for_agents', input: {} }] }, { text: 'done' }],
        // The lead ends its turn while its worker runs, so it rests at readyForUser: a boundary.
        lead: [{ calls: [{ name: 'agent', input: { name: 'worker', task: 'work' } }] }, { text: 'waiting for the worker' }, { text: 'noted' }, { calls: [{ name: 'reply', input: { result: 'lead done' } }] }],
        worker: [{ calls: [{ name: 'reply', input: { result: 'worked' } }], delayMs: 300 }],
      },
      { task: 'go' },
    );
    await until(() => traced.last.get('root/lead')?.value === 'readyForUser' && traced.provider.requestsOf('root/lead').length === 2);
    expect(messageAgent(traced.actor, 'root/lead', 'Also check the README.')).toBe(true);
    await waitForSettled(traced.actor);
    expect(textOf(traced.provider.requestsOf('root/lead')[2]?.lastMessage)).toBe('Also check the README.');
    expect(messageAgent(traced.actor, 'root/lead', 'too late')).toBe(false);
  });
});
