import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../../src/index.js';
import { sleep } from '../../../src/engine/model/streamModel.js';
import { resumeRun, startRun, type DurableRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider, type Script, type ScriptedStep } from '../../../src/testing/scriptedProvider.js';
import type { Message, ToolResultBlock } from '../../../src/engine/types.js';
import { runTraced, untilSettled, startTraced } from '../../support/helpers.js';
import { interruptingEffect } from '../../support/interruptingEffect.js';

/**
 * Issue 17: a parent gives a sub-agent a budget in its `agent` call (`budget: { tokens?, cost? }`,
 * docs/protocol.md §2). The sub-agent and its whole subtree spend within it: a request starts only
 * while the subtree's spend is under it; once reached, the sub-agent ends `capped` ("budget") at
 * once, its sub-agents are cancelled, its parent receives `[agent 'NAME' hit the step cap]`, and the
 * rest of the tree goes on.
 */

const U = 100; // input tokens every scripted response reports, with its first stream event
const ping = defineTool({ name: 'ping', description: 'ping', input: z.object({}), readOnly: true, run: async () => 'pong' });

function textOf(message: Message | undefined): string {
  return message?.content.map((b) => (b.type === 'text' ? b.text : '')).join('\n') ?? '';
}

function resultsOf(message: Message | undefined): ToolResultBlock[] {
  return message?.role === 'user' ? message.content.filter((b): b is ToolResultBlock => b.type === 'tool_result') : [];
}

/** Each step reports U input tokens and nothing else (output tokens 0), so spend counts requests. */
const step = (s: Omit<ScriptedStep, 'usage'>): ScriptedStep => ({ ...s, usage: { inputTokens: U, outputTokens: 0 } });
const pings = (n: number, delayMs = 0): ScriptedStep[] =>
  Array.from({ length: n }, (_, i) => step({ calls: [{ name: 'ping', input: {} }], delayMs: delayMs + (i % 3) }));

describe('a budget given to a sub-agent', () => {
  it('bounds its fan-out: at most ⌈budget ÷ U⌉ + its running agents requests; it ends capped, its workers cancelled, its sibling unaffected', async () => {
    const WORKERS = 8;
    const BUDGET = 10 * U;
    const agents: Record<string, Script> = {
      root: [
        step({
          calls: [
            { name: 'agent', input: { name: 'lead', task: 'Fan out.', budget: { tokens: BUDGET } } },
            { name: 'agent', input: { name: 'free', task: 'Work alone.' } },
            { name: 'wait_for_agents', input: {} },
          ],
        }),
        step({ text: 'Done.' }),
      ],
      // The lead fans out and ends its turn while they run: it rests in readyForUser when the budget is reached.
      lead: [
        step({ calls: [...Array.from({ length: WORKERS }, (_, i) => ({ name: 'agent', input: { name: `w${i}`, task: `part ${i}` } }))] }),
        step({ text: 'Waiting for my workers.' }),
        step({ calls: [{ name: 'reply', input: { result: 'never reached' } }] }),
      ],
      // Outside the lead's budget: more requests than the lead's whole budget allows.
      free: [...pings(14, 1), step({ calls: [{ name: 'reply', input: { result: 'free done' } }] })],
    };
    for (let i = 0; i < WORKERS; i++) agents[`w${i}`] = [...pings(5, 2 + i), step({ calls: [{ name: 'reply', input: { result: `w${i} done` } }] })];
    const traced = startTraced(agents, { task: 'go', tools: [ping] });
    const meter = traced.actor.getSnapshot().context.options.budget;
    let requestsAtCrossing = -1;
    meter.onCrossing((crossing) => {
      expect(crossing).toMatchObject({ scope: 'agent', agent: { id: 'root/lead' }, limit: { tokens: BUDGET } });
      requestsAtCrossing = traced.provider.requests.length;
    });
    const settled = await untilSettled(traced.actor);
    expect(settled.value).toBe('readyForUser');
    expect(traced.provider.pairingViolations).toEqual([]);

    // The lead ended capped for its budget, at once, in readyForUser, without another request.
    const lead = traced.last.get('root/lead');
    expect(lead?.value).toBe('capped');
    expect(lead?.output?.reason).toBe('budget');
    expect(traced.provider.requestsOf('root/lead')).toHaveLength(2);
    // Its workers were cancelled; the sibling outside its budget finished.
    const workers = Array.from({ length: WORKERS }, (_, i) => traced.last.get(`root/lead/w${i}`)?.value);
    expect(workers.filter((state) => state === 'cancelled').length).toBeGreaterThan(0);
    expect(workers.every((state) => state === 'cancelled' || state === 'replied')).toBe(true);
    expect(traced.last.get('root/free')?.value).toBe('replied');
    // The parent was told with the contract's tag.
    const told = textOf(traced.provider.requestsOf('root')[1]?.lastMessage);
    expect(told).toContain("[agent 'lead' hit the step cap]");
    expect(told).toContain("[agent 'free' replied]\nfree done");

    // The bound: every request of the subtree that reported before the crossing spent U, and the one
    // that reached the budget was the last of those (⌈budget ÷ U⌉ at most); any other was in flight
    // then, at most one per agent of the subtree running (the lead and its workers).
    const subtree = traced.provider.requests.filter((r) => r.agentId === 'root/lead' || r.agentId.startsWith('root/lead/'));
    const bound = Math.ceil(BUDGET / U) + 1 + WORKERS;
    console.info(
      `sub-agent budget: ${subtree.length} requests in the lead's subtree for a budget of ${BUDGET / U} requests (bound ${bound}, unbounded ${2 + WORKERS * 6})`,
    );
    expect(subtree.length).toBeLessThanOrEqual(bound);
    expect(subtree.length).toBeLessThan(2 + WORKERS * 6);
    // No request of the subtree started once the budget was reached.
    expect(requestsAtCrossing).toBeGreaterThan(0);
    const after = traced.provider.requests.slice(requestsAtCrossing).filter((r) => r.agentId.startsWith('root/lead'));
    expect(after).toEqual([]);
    // The sibling went on past the crossing.
    expect(traced.provider.requestsOf('root/free')).toHaveLength(15);
    traced.actor.stop();
  });

  it('a sub-agent whose budget is reached mid-batch ends at once: its calls are answered, its request never made', async () => {
    let started = 0;
    const slow = defineTool({
      name: 'slow',
      description: 'slow',
      input: z.object({}),
      run: async (_input, { signal }) => {
        started += 1;
        await sleep(60_000, signal);
        return 'late';
      },
    });
    const { snapshot, provider, last } = await runTraced(
      {
        root: [
          step({
            calls: [
              { name: 'agent', input: { name: 'lead', task: 'Work.', budget: { tokens: 3 * U } } },
              { name: 'wait_for_agents', input: {} },
            ],
          }),
          step({ text: 'ok' }),
        ],
        // The lead runs a slow call beside its worker; the worker's requests reach the budget meanwhile.
        lead: [
          step({
            calls: [
              { name: 'agent', input: { name: 'worker', task: 'Spend.' } },
              { name: 'slow', input: {} },
            ],
          }),
          step({ text: 'never asked' }),
        ],
        worker: pings(10),
      },
      { task: 'go', tools: [ping, slow] },
    );
    expect(snapshot.value).toBe('readyForUser');
    expect(started).toBe(1);
    const lead = last.get('root/lead');
    expect(lead?.value).toBe('capped');
    expect(lead?.output?.reason).toBe('budget');
    expect(last.get('root/lead/worker')?.value).toBe('cancelled');
    expect(provider.requestsOf('root/lead')).toHaveLength(1);
    // Its batch was answered (the history it ends with is clean): the slow call with why it was not run.
    const messages = lead?.context.messages ?? [];
    const answers = resultsOf(messages.at(-1));
    expect(answers.map((r) => [r.is_error === true, r.content])).toEqual([
      [false, expect.stringContaining("Sub-agent 'worker' started")],
      [true, 'not run: the budget is spent'],
    ]);
    expect(provider.requestsOf('root/lead/worker').length).toBeLessThanOrEqual(3);
  });

  it('nested budgets each bound their subtree; an inner one reached leaves the outer going', async () => {
    const { snapshot, provider, last } = await runTraced(
      {
        root: [
          step({
            calls: [
              { name: 'agent', input: { name: 'lead', task: 'Lead.', budget: { tokens: 20 * U } } },
              { name: 'wait_for_agents', input: {} },
            ],
          }),
          step({ text: 'ok' }),
        ],
        lead: [
          step({
            calls: [
              { name: 'agent', input: { name: 'inner', task: 'Spend.', budget: { tokens: 2 * U } } },
              { name: 'wait_for_agents', input: {} },
            ],
          }),
          step({ calls: [{ name: 'reply', input: { result: 'lead went on' } }] }),
        ],
        inner: pings(10),
      },
      { task: 'go', tools: [ping] },
    );
    expect(snapshot.value).toBe('readyForUser');
    expect(last.get('root/lead/inner')?.output?.reason).toBe('budget');
    expect(provider.requestsOf('root/lead/inner')).toHaveLength(2);
    expect(textOf(provider.requestsOf('root/lead')[1]?.lastMessage)).toContain("[agent 'inner' hit the step cap]");
    expect(last.get('root/lead')?.value).toBe('replied');
  });

  it('a cost budget counts at the run’s prices', async () => {
    const { provider, last } = await runTraced(
      {
        root: [
          step({
            calls: [
              { name: 'agent', input: { name: 'lead', task: 'Spend.', budget: { cost: 0.25 } } },
              { name: 'wait_for_agents', input: {} },
            ],
          }),
          step({ text: 'ok' }),
        ],
        lead: pings(10),
      },
      // $0.001 a token: each response costs $0.10, so the third reaches $0.25.
      { task: 'go', tools: [ping], budget: { price: (usage) => (usage.inputTokens + usage.outputTokens) * 0.001 } },
    );
    expect(last.get('root/lead')?.output?.reason).toBe('budget');
    expect(provider.requestsOf('root/lead')).toHaveLength(3);
  });

  it('bad budget input is one is_error line naming the field; the parent goes on', async () => {
    const spawn = (name: string, budget: unknown) => ({ name: 'agent', input: { name, task: 't', budget } });
    const { snapshot, provider } = await runTraced(
      {
        root: [
          step({
            calls: [
              spawn('a', { tokens: -5 }),
              spawn('b', {}),
              spawn('c', { cost: 1 }),
              spawn('d', { tokens: 10, dollars: 2 }),
              spawn('e', 5000),
              spawn('f', { tokens: 1.5 }),
            ],
          }),
          step({ text: 'I will try again later.' }),
        ],
      },
      { task: 'go' },
    );
    expect(snapshot.value).toBe('readyForUser');
    expect(provider.requests.map((r) => r.agentId)).toEqual(['root', 'root']);
    const answers = resultsOf(provider.requestsOf('root')[1]?.lastMessage);
    expect(answers.every((r) => r.is_error === true && !r.content.includes('\n'))).toBe(true);
    expect(answers.map((r) => r.content)).toEqual([
      expect.stringMatching(/^invalid input for tool 'agent': budget\.tokens: /),
      "invalid input for tool 'agent': budget: give tokens, cost or both",
      "invalid input for tool 'agent': budget.cost: this run has no prices to count US$ with; give budget.tokens instead",
      expect.stringMatching(/^invalid input for tool 'agent': budget: .*dollars/),
      expect.stringMatching(/^invalid input for tool 'agent': budget: /),
      expect.stringMatching(/^invalid input for tool 'agent': budget\.tokens: /),
    ]);
  });

  it('a host-given subtree budget that is not one is refused at creation with one line', () => {
    expect(() => startTraced({ root: [] }, { task: 'go', subtreeBudget: { tokens: 0 } })).toThrow(/^exarch: budget\.tokens must be a positive integer, got 0$/);
    expect(() => startTraced({ root: [] }, { task: 'go', subtreeBudget: {} })).toThrow(/^exarch: a sub-agent budget needs tokens, cost or both$/);
  });

  it('a durable run resumes a sub-agent within its budget, what it spent before counted', async () => {
    const store = new MemoryRunStore();
    let run: DurableRun | undefined;
    // The lead's second call presses Ctrl-C while it runs.
    const { tool: effect } = interruptingEffect({ at: 2, run: () => run });
    const scripts = (): Record<string, Script> => ({
      root: [
        step({
          calls: [
            { name: 'agent', input: { name: 'lead', task: 'Work.', budget: { tokens: 4 * U } } },
            { name: 'wait_for_agents', input: {} },
          ],
        }),
        step({ text: 'ok' }),
      ],
      // Five effect steps, then a reply: six requests, more than the budget of four.
      lead: (request) => {
        const done = request.messages.filter((m) => m.role === 'assistant').length;
        return done < 5 ? step({ calls: [{ name: 'effect', input: {} }] }) : step({ calls: [{ name: 'reply', input: { result: 'all done' } }] });
      },
    });
    run = await startRun('task', { provider: new ScriptedProvider({ agents: scripts() }), tools: [effect] }, { store });
    expect((await run.result).status).toBe('interrupted');
    const before = new ScriptedProvider({ agents: scripts() });
    const resumed = await resumeRun(run.id, { provider: before, tools: [effect] }, { store });
    if ('finished' in resumed) throw new Error('the interrupted run was not resumed');
    const result = await resumed.result;
    expect(result.status).toBe('done');
    // Two requests before the interrupt, so two more after it reach the budget of four.
    expect(before.requestsOf('root/lead')).toHaveLength(2);
    // (The interrupt's cancellation, undone by the resume, is recorded before it.)
    const outcome = store.journal(run.id).findLast((row) => row.session === 'root/lead' && row.record.type === 'outcome')?.record;
    expect(outcome).toMatchObject({ type: 'outcome', outcome: 'capped', reason: 'budget' });
    expect(textOf(before.requestsOf('root')[0]?.lastMessage)).toContain("[agent 'lead' hit the step cap]");
  });
});
