import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionActor, defineTool, waitForSettled } from '../../../src/index.js';
import { AnthropicProvider } from '../../../src/providers/anthropic.js';
import { runTraced, startTraced, toolResults } from '../../support/helpers.js';
import { responseEvents, scriptedHandler, startAnthropicServer } from '../../support/anthropicServer.js';

/**
 * Issue 17, budgets: the tree's spend, counted from each response's usage, bounds the whole tree.
 * The bound kept (src/engine/budgetMeter.ts; issue 37 made it admit before it spends): a request leaves
 * only when the budget has room for it (its estimate beside the spend and the running requests, or
 * no request running and the spend under the budget), and the tree keeps room for the root's next
 * request; when the spend reaches that line, the running sub-agents are cancelled (their in-flight
 * requests, at most one per running agent, are aborted), and the root gets a final request if the
 * budget still has room for it.
 */

const U = 100; // tokens every scripted response reports
const WORKERS = 20;
const STEPS = 4; // each worker: 3 tool steps, then its reply

const ping = defineTool({ name: 'ping', description: 'ping', input: z.object({}), readOnly: true, run: async () => 'pong' });

function fanOut() {
  const agents: Record<string, unknown[]> = {
    root: [
      {
        calls: [
          ...Array.from({ length: WORKERS }, (_, i) => ({ name: 'agent', input: { name: `w${i}`, task: `work ${i}` } })),
          { name: 'wait_for_agents', input: {} },
        ],
        usage: { inputTokens: U },
      },
      { text: 'Final answer from what I have.', usage: { inputTokens: U } },
    ],
  };
  for (let i = 0; i < WORKERS; i++) {
    agents[`w${i}`] = [
      ...Array.from({ length: STEPS - 1 }, (_, s) => ({
        calls: [{ name: 'ping', input: {} }],
        usage: { inputTokens: U },
        delayMs: 2 + ((i * 7 + s * 3) % 11),
      })),
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
    console.info(
      `budget fan-out: ${requests} requests for a budget of ${Math.ceil(maxTokens / U)} responses (bound ${Math.ceil(maxTokens / U) + WORKERS + 1}, unbounded ${2 + WORKERS * STEPS})`,
    );
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

  it('a root whose response took the tree past its budget makes no other request: it ends capped with the reason budget', async () => {
    const { snapshot, provider } = await runTraced(
      {
        root: [
          { calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 500 } },
          { calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 10 } },
          { text: 'never asked' },
        ],
      },
      { task: 'go', tools: [ping], budget: { maxTokens: 300 } },
    );
    // The first request overshot (it was the one running when the budget was reached); nothing more leaves.
    expect(provider.requestsOf('root')).toHaveLength(1);
    expect(snapshot.value).toBe('capped');
    expect(snapshot.output?.reason).toBe('budget');
    // Its call was answered, so the history it ends with is one the API would take.
    expect(toolResults(snapshot.context.messages)).toHaveLength(1);
  });

  it('a root that would go on after its final turn ends capped with the reason budget', async () => {
    // The first response leaves less room than another request of the root's size: its next is its final turn.
    const { snapshot, provider } = await runTraced(
      {
        root: [
          { calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 250 } },
          { calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 10 } },
          { text: 'never asked' },
        ],
      },
      { task: 'go', tools: [ping], budget: { maxTokens: 300 } },
    );
    expect(provider.requestsOf('root')).toHaveLength(2);
    expect(snapshot.value).toBe('capped');
    expect(snapshot.output?.reason).toBe('budget');
  });

  it('a sub-agent started by the response that spent the budget never asks the model: it ends capped', async () => {
    const { snapshot, provider, last } = await runTraced(
      {
        root: [
          { calls: [{ name: 'agent', input: { name: 'late', task: 'work' } }], usage: { inputTokens: 500 } },
          { text: 'Final answer.', usage: { inputTokens: 10 } },
        ],
        late: [{ text: 'never asked' }],
      },
      { task: 'go', budget: { maxTokens: 300 } },
    );
    expect(provider.requestsOf('root/late')).toEqual([]);
    // The root, past its budget, ends capped without another request.
    // It ends with no request made: capped by the budget, or cancelled by its root ending capped first.
    expect(last.get('root/late')?.context.requests).toBe(0);
    expect(['capped', 'cancelled']).toContain(last.get('root/late')?.output?.outcome);
    expect(snapshot.value).toBe('capped');
    expect(provider.requestsOf('root')).toHaveLength(1);
  });

  it('maxCost counts with the host price; bad budgets are one line', async () => {
    const { snapshot, provider } = await runTraced(
      { root: [{ calls: [{ name: 'ping', input: {} }], usage: { outputTokens: 1000 } }, { text: 'final' }] },
      { task: 'go', tools: [ping], budget: { maxCost: 0.01, price: (u) => u.outputTokens * 0.00002 } },
    );
    // Its one response cost twice the budget: no other request leaves.
    expect(provider.requestsOf('root')).toHaveLength(1);
    expect(snapshot.value).toBe('capped');
    expect(snapshot.context.options.budget.totals.cost).toBeCloseTo(0.02);
    await expect(runTraced({ root: [] }, { task: 'go', budget: { maxCost: 1 } })).rejects.toThrow(/^exarch: budget.maxCost needs budget.price/);
    await expect(runTraced({ root: [] }, { task: 'go', budget: { maxTokens: -1 } })).rejects.toThrow(
      /^exarch: budget.maxTokens must be a positive number, got -1$/,
    );
  });
});

/**
 * Usage is counted as the stream reports it (`message_start` carries the input tokens), not when a
 * response completes: a response whose first event takes the tree past its budget stops the tree
 * while that response, and a sibling's, are still streaming. Both streams here would run until
 * aborted, so counted only at completion the budget would never be reached and the run never end.
 */
describe('priced by the model that spent it', () => {
  it('a declared agent on a dearer model spends the tree’s US$ budget at its own prices', async () => {
    // 100 input tokens on the dear model cost 10× what they cost on the run's: the budget is reached by it alone.
    const price = (usage: { inputTokens: number }, model: string | undefined): number => usage.inputTokens * (model === 'dear-model' ? 0.001 : 0.0001);
    const { snapshot, provider, last } = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'scout', task: 'look', type: 'scout' } },
              { name: 'wait_for_agents', input: {} },
            ],
            usage: { inputTokens: 10 },
          },
          { text: 'answered', usage: { inputTokens: 10 } },
        ],
        scout: [
          { calls: [{ name: 'ping', input: {} }], usage: { inputTokens: 100 } },
          { calls: [{ name: 'reply', input: { result: 'never' } }], usage: { inputTokens: 100 } },
        ],
      },
      { task: 'go', tools: [ping], agents: { scout: { description: 'scouts', model: 'dear-model' } }, budget: { maxCost: 0.05, price } },
    );
    // The scout's first response cost 0.1 (not 0.01): it is stopped before a second request.
    expect(provider.requestsOf('root/scout')).toHaveLength(1);
    expect(provider.requestsOf('root/scout')[0]?.model).toBe('dear-model');
    expect(snapshot.context.options.budget.totals.cost).toBeCloseTo(0.001 + 0.1, 5);
    expect(['capped', 'cancelled']).toContain(last.get('root/scout')?.output?.outcome);
  });
});

describe('usage counted as it streams', () => {
  /** Races `promise` against a deadline, so a missing count fails with a reason instead of hanging the test. */
  async function within<T>(ms: number, promise: Promise<T>, what: string): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
    });
    try {
      return await Promise.race([promise, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  const rootScript = [
    {
      calls: [
        { name: 'agent', input: { name: 'big', task: 'read everything' } },
        { name: 'agent', input: { name: 'small', task: 'read a little' } },
        { name: 'wait_for_agents', input: {} },
      ],
      usage: { inputTokens: 10 },
    },
    { text: 'Answered from what I have.', usage: { inputTokens: 10 } },
  ];

  it('scripted model: the input tokens of a response still streaming reach the budget; both streams are aborted', async () => {
    const traced = startTraced(
      {
        root: rootScript,
        // One event (it carries the usage), then silence until aborted; `small` is streaming by the
        // time `big` reports.
        big: [{ text: 'reading…', usage: { inputTokens: 1_000 }, stallAfter: 1, delayMs: 30 }],
        small: [{ text: 'reading…', usage: { inputTokens: 10 }, stallAfter: 1 }],
      },
      { task: 'go', budget: { maxTokens: 500 }, stallTimeoutMs: 600_000 },
    );
    const settled = await within(20_000, waitForSettled(traced.actor), 'the budget stopping the tree');
    // `big`'s input alone was twice the budget (the estimate it was admitted with could not know):
    // both streams are aborted, and no request leaves after (the root has no room for a final turn).
    expect(settled.value).toBe('capped');
    expect(settled.output?.reason).toBe('budget');
    expect(traced.provider.requests.map((r) => r.agentId).sort()).toEqual(['root', 'root/big', 'root/small']);
    expect(traced.last.get('root/big')?.value).toBe('cancelled');
    expect(traced.last.get('root/small')?.value).toBe('cancelled');
    // The spend counted includes what the aborted streams reported, and both requests are counted.
    expect(settled.context.options.budget.totals.tokens).toBeGreaterThanOrEqual(1_000);
    expect([traced.last.get('root/big')?.context.requests, traced.last.get('root/small')?.context.requests]).toEqual([1, 1]);
    traced.actor.stop();
  });

  it('Anthropic SSE over the loopback server: message_start alone reaches the budget', async () => {
    const spawn = responseEvents({
      toolCalls: [
        { name: 'agent', input: { name: 'big', task: 'read everything' } },
        { name: 'wait_for_agents', input: {} },
      ],
      usage: { input_tokens: 10 },
    });
    const answer = responseEvents({ text: 'Answered from what I have.', usage: { input_tokens: 10 } });
    const big = responseEvents({ text: 'reading everything', usage: { input_tokens: 1_000 } });
    const server = await startAnthropicServer(
      scriptedHandler({
        root: [
          { kind: 'stream', events: spawn },
          { kind: 'stream', events: answer },
        ],
        // message_start (1,000 input tokens), then nothing until the client aborts.
        big: [{ kind: 'stream', events: big, stallAfter: 1 }],
      }),
    );
    // What the server said was spent: the root's whole response (its message_delta totals) and the
    // message_start of the stream that never finished. The root, past its budget, asks nothing more.
    const total = (events: typeof big, kind: 'message_start' | 'message_delta'): number => {
      const event = events.find((e) => e.event === kind)?.data as { usage?: Record<string, number>; message?: { usage: Record<string, number> } };
      return Object.values(event.usage ?? event.message?.usage ?? {}).reduce((a, b) => a + b, 0);
    };
    const spent = total(spawn, 'message_delta') + total(big, 'message_start');
    try {
      const provider = new AnthropicProvider({ apiKey: 'test-key', baseURL: server.url, model: 'claude-test', sdkMaxRetries: 0 });
      const actor = createSessionActor({ provider, task: 'go', budget: { maxTokens: 500 }, stallTimeoutMs: 600_000 });
      actor.start();
      const settled = await within(20_000, waitForSettled(actor), 'the budget stopping the tree');
      actor.stop();
      expect(settled.value).toBe('capped');
      expect(server.requests.map((r) => r.agent)).toEqual(['root', 'big']);
      expect(settled.context.options.budget.totals.tokens).toBe(spent);
      expect(server.pairingViolations).toEqual([]);
    } finally {
      await server.close();
    }
  });
});
