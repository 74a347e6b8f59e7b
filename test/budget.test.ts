import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../src/index.js';
import { runTraced, toolResults } from './helpers.js';

/**
 * Issue 17, budgets: the tree's spend, counted from each response's usage, bounds the whole tree.
 * The bound kept (src/budget.ts): a request starts only while the spend is under the budget; when a
 * response takes it there, the running sub-agents are cancelled (their in-flight requests, at most
 * one per running agent, are aborted), and the root gets one final request.
 */

const U = 100; // tokens every scripted response reports
const WORKERS = 20;
const STEPS = 4; // each worker: 3 tool steps, then its reply

const ping = defineTool({ name: 'ping', description: 'ping', input: z.object({}), readOnly: true, run: async () => 'pong' });

function fanOut() {
  const agents: Record<string, unknown[]> = {
    root: [
      { calls: [...Array.from({ length: WORKERS }, (_, i) => ({ name: 'agent', input: { name: `w${i}`, task: `work ${i}` } })), { name: 'wait_for_agents', input: {} }], usage: { inputTokens: U } },
      { text: 'Final answer from what I have.', usage: { inputTokens: U } },
    ],
  };
  for (let i = 0; i < WORKERS; i++) {
    agents[`w${i}`] = [
      ...Array.from({ length: STEPS - 1 }, (_, s) => ({ calls: [{ name: 'ping', input: {} }], usage: { inputTokens: U }, delayMs: 2 + ((i * 7 + s * 3) % 11) })),
      { calls: [{ name: 'reply', input: { result: `done ${i}` } }], usage: { inputTokens: U } },
    ];
  }
  return agents as Parameters<typeof runTraced>[0];
}

describe('a tree budget', () => {
  it('a fan-out of 20 stops within one request per running agent of the budget; the root answers in its final turn', async () => {
    const maxTokens = 25 * U;
    const { provider, snapshot } = await runTraced(fanOut(), { task: 'fan out', tools: [ping], budget: { maxTokens } });
    // The exact bound: responses completed before the crossing (the spend reaches the budget at the
    // 25th), plus at most one request in flight per running sub-agent, plus the root's final turn.
    const requests = provider.requests.length;
    console.info(`budget fan-out: ${requests} requests for a budget of ${Math.ceil(maxTokens / U)} responses (bound ${Math.ceil(maxTokens / U) + WORKERS + 1}, unbounded ${2 + WORKERS * STEPS})`);
    expect(requests).toBeLessThanOrEqual(Math.ceil(maxTokens / U) + WORKERS + 1);
    // It did stop early: the whole tree unbounded makes 2 + 20 × 4 requests.
    expect(requests).toBeLessThan(2 + WORKERS * STEPS);
    expect(snapshot.value).toBe('readyForUser');
    expect(snapshot.context.options.budget.spent).toBe(true);
    const root = provider.requestsOf('root');
    expect(root).toHaveLength(2);
    // The final turn carries every sub-agent's one result: the cancelled ones with the contract's tag.
    const last = root[1]?.lastMessage;
    const inbox = last?.role === 'user' ? last.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n') : '';
    const tags = inbox.match(/^\[agent 'w\d+' [^\]]+\]$/gm) ?? [];
    expect(tags).toHaveLength(WORKERS);
    expect(tags.filter((t) => t.endsWith('was cancelled]')).length).toBeGreaterThan(0);
    // Every call of the root was answered (the history is clean).
    expect(toolResults(snapshot.context.messages)).toHaveLength(WORKERS + 1);
  });

  it('a root that would go on after its final turn ends capped with the reason budget', async () => {
    const { snapshot, provider } = await runTraced(
      { root: [{ calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 500 } }, { calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 10 } }, { text: 'never asked' }] },
      { task: 'go', tools: [ping], budget: { maxTokens: 300 } },
    );
    expect(provider.requestsOf('root')).toHaveLength(2);
    expect(snapshot.value).toBe('capped');
    expect(snapshot.output?.reason).toBe('budget');
  });

  it('maxCost counts with the host price; bad budgets are one line', async () => {
    const { snapshot, provider } = await runTraced(
      { root: [{ calls: [{ name: 'ping', input: {} }], usage: { outputTokens: 1000 } }, { text: 'final' }] },
      { task: 'go', tools: [ping], budget: { maxCost: 0.01, price: (u) => u.outputTokens * 0.00002 } },
    );
    expect(provider.requestsOf('root')).toHaveLength(2);
    expect(snapshot.value).toBe('readyForUser');
    expect(snapshot.context.options.budget.totals.cost).toBeCloseTo(0.02);
    await expect(runTraced({ root: [] }, { task: 'go', budget: { maxCost: 1 } })).rejects.toThrow(/^exarch: budget.maxCost needs budget.price/);
    await expect(runTraced({ root: [] }, { task: 'go', budget: { maxTokens: -1 } })).rejects.toThrow(/^exarch: budget.maxTokens must be a positive number, got -1$/);
  });
});
