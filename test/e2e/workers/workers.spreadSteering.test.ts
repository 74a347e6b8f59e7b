import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type PgBoss from 'pg-boss';
import { defineTool } from '../../../src/tools/defineTool.js';
import { ScriptedProvider } from '../../../src/testing/scriptedProvider.js';
import type { Message } from '../../../src/engine/types.js';
import { openPostgresStore, type PostgresRunStore } from '../../../src/store/postgresStore.js';
import { startBoss, submitRun } from '../../../src/workers/runQueue.js';
import { steerSpreadRun } from '../../../src/workers/spreadSteering.js';
import { startWorker } from '../../../src/workers/worker.js';
import type { Worker, WorkerEvent } from '../../../src/workers/workerOptions.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { journalOf, query, type JournalLine } from '../../support/storedRuns.js';
import { until } from '../../support/until.js';

/**
 * Steering a run spread over workers: each line acted on through the store, wherever the agent it
 * names runs or waits. Two workers in this process share one scripted model; the oracles are the
 * model's requests and the journal, read with a connection of the test's own.
 */

const postgres = postgresForFile('test/e2e/workers/workers.spreadSteering.test.ts');

/** Every text of a message (text blocks, and tool results as JSON). */
function textOf(message: Message | undefined): string {
  if (!message || typeof message.content === 'string') return String(message?.content ?? '');
  return message.content.map((block) => (block.type === 'text' ? block.text : block.type === 'tool_result' ? JSON.stringify(block.content) : '')).join('\n');
}

/** Calls of `hold` wait, by the agent's name, until the test lets them go (or they are cancelled). */
class Holds {
  readonly started = new Set<string>();
  private readonly release = new Map<string, () => void>();
  readonly tool = defineTool({
    name: 'hold',
    description: 'Waits for a while.',
    input: z.object({ who: z.string() }),
    run: ({ who }, { signal }) =>
      new Promise<string>((resolve) => {
        this.started.add(who);
        this.release.set(who, () => resolve(`${who} held`));
        signal.addEventListener('abort', () => resolve(`${who} aborted`), { once: true });
      }),
  });

  let(who: string): void {
    this.release.get(who)?.();
  }
}

interface Steered {
  readonly id: string;
  readonly db: string;
  readonly store: PostgresRunStore;
  readonly boss: PgBoss;
  readonly events: readonly WorkerEvent[];
  journal(): Promise<JournalLine[]>;
  /** One steering line, as a follower sends it. */
  steer(line: string): Promise<string[]>;
}

/** Runs `task` spread over two workers, `during` steering it, until the run is done. */
async function steeredRun(provider: ScriptedProvider, holds: Holds, task: string, during: (run: Steered) => Promise<void>): Promise<JournalLine[]> {
  const db = await postgres.server().createDatabase();
  const events: WorkerEvent[] = [];
  const workers: Worker[] = [];
  const store = openPostgresStore(db);
  const boss = await startBoss(db);
  try {
    for (let i = 0; i < 2; i++)
      workers.push(
        await startWorker({
          db,
          concurrency: 4,
          pollingIntervalSeconds: 0.5,
          policy: { expireInSeconds: 30, retryDelaySeconds: 1 },
          session: () => ({ input: { provider, tools: [holds.tool] } }),
          onEvent: (event) => events.push(event),
        }),
      );
    const id = await submitRun(store, boss, { task, cwd: process.cwd(), record: { tools: ['hold'], spread: true } });
    const journal = (): Promise<JournalLine[]> => journalOf(db, id);
    const story = async (): Promise<string> =>
      [...events.map((e) => JSON.stringify(e)), ...(await journal()).map((r) => `${r.session} ${r.type} ${r.body.slice(0, 200)}`)].join('\n');
    try {
      await during({ id, db, store, boss, events, journal, steer: (line) => steerSpreadRun(store, boss, id, line) });
      await until(async () => (await store.getRun(id))?.status === 'done', 'the run to be done');
    } catch (error) {
      throw new Error(`${String(error)}\n${await story()}`);
    }
    return await journal();
  } finally {
    await Promise.all(workers.map((worker) => worker.stop({ timeoutMs: 5_000 })));
    await boss.stop({ graceful: false, wait: true });
    await store.close();
  }
}

/** Whether `session` is parked: no worker holds it. */
async function parked(db: string, id: string, session: string): Promise<boolean> {
  const rows = await query<{ held: boolean }>(
    db,
    `SELECT owner_token IS NOT NULL AS held FROM exarch.sessions WHERE run_id = '${id}' AND session = '${session}'`,
  );
  return rows[0]?.held === false;
}

/** root → lead (with a budget: its subtree runs in its job) → x, which holds. */
function budgetedProvider(): ScriptedProvider {
  return new ScriptedProvider({
    agents: {
      root: [
        {
          calls: [
            { name: 'agent', input: { name: 'lead', task: 'Lead.', budget: { tokens: 100_000 } } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { text: 'done' },
      ],
      lead: [
        {
          calls: [
            { name: 'agent', input: { name: 'x', task: 'Hold.' } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { calls: [{ name: 'reply', input: { result: 'led' } }] },
      ],
      x: (request, index) =>
        index === 0
          ? { calls: [{ name: 'hold', input: { who: 'x' } }] }
          : { calls: [{ name: 'reply', input: { result: `x read: ${textOf(request.messages.at(-1)).replace(/\s+/g, ' ')}` } }] },
    },
  });
}

describe.skipIf(!postgres.available)('steering a run spread over workers', () => {
  it('/msg reaches a sub-agent running in another job: its next request carries the message, once', { timeout: 120_000 }, async () => {
    const holds = new Holds();
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'lead', task: 'Hold, then report.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${textOf(request.messages.at(-1)).replace(/\s+/g, ' ')}` },
        lead: (request, index) =>
          index === 0
            ? { calls: [{ name: 'hold', input: { who: 'lead' } }] }
            : { calls: [{ name: 'reply', input: { result: `lead read: ${textOf(request.messages.at(-1)).replace(/\s+/g, ' ')}` } }] },
      },
    });
    let answer: string[] = [];
    const journal = await steeredRun(provider, holds, 'Delegate.', async ({ db, id, steer }) => {
      await until(() => holds.started.has('lead'), 'the lead to hold');
      answer = await steer('/msg lead also check the README');
      // Several of the watch's looks (a fifth of a second each) before the call ends: the lead takes it while it runs.
      await new Promise((resolve) => setTimeout(resolve, 1500));
      expect(await parked(db, id, 'root/lead')).toBe(false);
      holds.let('lead');
    });
    expect(answer).toEqual(['exarch: root/lead gets the message at its next boundary']);
    const requests = provider.requestsOf('root/lead');
    expect(requests).toHaveLength(2);
    expect(textOf(requests[1]?.lastMessage)).toContain('also check the README');
    expect(textOf(requests[0]?.lastMessage)).not.toContain('also check the README');
    expect(journal.filter((r) => r.type === 'queued').map((r) => [r.session, JSON.parse(r.body).text])).toEqual([['root/lead', 'also check the README']]);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('/msg wakes a parked parent: it takes a turn with the message, and goes on waiting for its sub-agent', { timeout: 120_000 }, async () => {
    const holds = new Holds();
    const provider = new ScriptedProvider({
      agents: {
        // Starts x and ends its turn: it waits for x's report at rest, parked.
        root: [
          { calls: [{ name: 'agent', input: { name: 'x', task: 'Hold.' } }] },
          { text: 'x is on it' },
          { text: 'noted the message' },
          { text: 'all done' },
        ],
        x: [{ calls: [{ name: 'hold', input: { who: 'x' } }] }, { calls: [{ name: 'reply', input: { result: 'x done' } }] }],
      },
    });
    let answer: string[] = [];
    await steeredRun(provider, holds, 'Delegate.', async ({ db, id, steer }) => {
      await until(() => holds.started.has('x'), 'x to hold');
      await until(() => provider.requestsOf('root').length === 2, "the root's second request");
      await until(() => parked(db, id, 'root'), 'the root to park');
      answer = await steer('/msg root please also say hello');
      await until(() => provider.requestsOf('root').length === 3, 'the root to take a turn with the message');
      holds.let('x');
    });
    expect(answer).toEqual(['exarch: root gets the message at its next boundary']);
    const root = provider.requestsOf('root');
    expect(textOf(root[2]?.lastMessage)).toContain('please also say hello');
    // The message once: the turn after it (x's report) does not carry it again.
    expect(root).toHaveLength(4);
    expect(textOf(root[3]?.lastMessage)).toContain('x done');
    expect(textOf(root[3]?.lastMessage)).not.toContain('please also say hello');
    expect(provider.pairingViolations).toEqual([]);
  });

  it('/msg to a parent parked in wait_for_agents is journaled at once and read as the turn after the results it waits for', { timeout: 120_000 }, async () => {
    const holds = new Holds();
    const provider = new ScriptedProvider({
      agents: {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'x', task: 'Hold.' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'x is done' },
          { text: 'short it is' },
        ],
        x: [{ calls: [{ name: 'hold', input: { who: 'x' } }] }, { calls: [{ name: 'reply', input: { result: 'x done' } }] }],
      },
    });
    await steeredRun(provider, holds, 'Delegate.', async ({ db, id, steer, journal }) => {
      await until(() => holds.started.has('x'), 'x to hold');
      await until(() => parked(db, id, 'root'), 'the root to park');
      expect(await steer('/msg root keep it short')).toEqual(['exarch: root gets the message at its next boundary']);
      // Woken for the message alone, it records it and parks again: no request while x runs.
      await until(async () => (await journal()).some((r) => r.session === 'root' && r.type === 'queued'), "the root's queued record");
      await until(() => parked(db, id, 'root'), 'the root to park again');
      expect(provider.requestsOf('root')).toHaveLength(1);
      holds.let('x');
    });
    // As in a run steered here: the wait is answered first, the message is the next turn, once.
    const root = provider.requestsOf('root');
    expect(root).toHaveLength(3);
    expect(textOf(root[1]?.lastMessage)).toContain('x done');
    expect(textOf(root[2]?.lastMessage)).toContain('keep it short');
    expect(textOf(root[1]?.lastMessage)).not.toContain('keep it short');
  });

  it('/cancel stops a running sub-agent and a parked one (with its own sub-agent); the root reads each cancelled once', { timeout: 120_000 }, async () => {
    const holds = new Holds();
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'runner', task: 'Hold.' } },
                  { name: 'agent', input: { name: 'waiter', task: 'Delegate and wait.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${textOf(request.messages.at(-1)).replace(/\s+/g, ' ')}` },
        runner: [{ calls: [{ name: 'hold', input: { who: 'runner' } }] }, { calls: [{ name: 'reply', input: { result: 'ran' } }] }],
        waiter: [
          {
            calls: [
              { name: 'agent', input: { name: 'deep', task: 'Hold.' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { calls: [{ name: 'reply', input: { result: 'waited' } }] },
        ],
        deep: [{ calls: [{ name: 'hold', input: { who: 'deep' } }] }, { calls: [{ name: 'reply', input: { result: 'deep' } }] }],
      },
    });
    const answers: string[][] = [];
    const journal = await steeredRun(provider, holds, 'Delegate.', async ({ db, id, steer, journal }) => {
      await until(() => holds.started.has('runner') && holds.started.has('deep'), 'both holds');
      await until(() => parked(db, id, 'root/waiter'), 'the waiter to park');
      answers.push(await steer('/help'));
      answers.push(await steer('/cancel root/waiter'));
      answers.push(await steer('/cancel runner'));
      answers.push(await steer('/cancel root/nobody'));
      // The waiter's own sub-agent is cancelled with it, in a job of its own (the root need not wait for it).
      await until(async () => (await journal()).some((r) => r.session === 'root/waiter/deep' && r.type === 'outcome'), "deep's end");
    });
    expect(answers[0]?.at(-1)).toBe('exarch: running: root, root/runner, root/waiter, root/waiter/deep');
    expect(answers.slice(1)).toEqual([
      ['exarch: cancelling root/waiter and everything it started'],
      ['exarch: cancelling root/runner and everything it started'],
      ['exarch: no sub-agent root/nobody is running (running: root, root/runner, root/waiter, root/waiter/deep)'],
    ]);
    for (const name of ['runner', 'waiter', 'deep']) {
      const ends = journal.filter((r) => r.session.endsWith(`/${name}`) && r.type === 'outcome');
      expect(ends, name).toHaveLength(1);
      expect(JSON.parse(ends[0]?.body ?? '{}')).toMatchObject({ outcome: 'cancelled' });
    }
    // The root read each cancelled sub-agent once, and made no request for any of them twice.
    const root = provider.requestsOf('root');
    expect(root).toHaveLength(2);
    const last = textOf(root[1]?.lastMessage);
    expect(last.match(/\[agent 'runner' was cancelled\]/g)).toHaveLength(1);
    expect(last.match(/\[agent 'waiter' was cancelled\]/g)).toHaveLength(1);
    expect(journal.filter((r) => r.session === 'root' && r.type === 'inbox')).toHaveLength(2);
    // Neither held sub-agent asked the model again.
    expect(provider.requestsOf('root/runner')).toHaveLength(1);
    expect(provider.requestsOf('root/waiter')).toHaveLength(1);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('/msg reaches an agent inside a running budgeted subtree through the job that keeps it', { timeout: 120_000 }, async () => {
    const holds = new Holds();
    const provider = budgetedProvider();
    const answers: string[][] = [];
    await steeredRun(provider, holds, 'Delegate within a budget.', async ({ steer }) => {
      await until(() => holds.started.has('x'), 'x to hold');
      answers.push(await steer('/msg root/lead/x mind the budget'));
      await new Promise((resolve) => setTimeout(resolve, 1500));
      holds.let('x');
    });
    expect(answers).toEqual([['exarch: root/lead/x gets the message at its next boundary']]);
    const x = provider.requestsOf('root/lead/x');
    expect(x).toHaveLength(2);
    expect(textOf(x[1]?.lastMessage)).toContain('mind the budget');
  });

  it('/cancel of an agent inside a running budgeted subtree cancels it: its call is aborted, its parent reads it cancelled', { timeout: 120_000 }, async () => {
    const holds = new Holds();
    const provider = budgetedProvider();
    const answers: string[][] = [];
    let cancelledInTime = false;
    const journal = await steeredRun(provider, holds, 'Delegate within a budget.', async ({ steer, journal }) => {
      await until(() => holds.started.has('x'), 'x to hold');
      answers.push(await steer('/cancel root/lead/x'));
      cancelledInTime = await until(async () => (await journal()).some((r) => r.session === 'root/lead/x' && r.type === 'outcome'), "x's end", 5_000).then(
        () => true,
        () => false,
      );
      holds.let('x');
    });
    expect(answers).toEqual([['exarch: cancelling root/lead/x and everything it started']]);
    expect(JSON.parse(journal.find((r) => r.session === 'root/lead/x' && r.type === 'outcome')?.body ?? '{}')).toMatchObject({ outcome: 'cancelled' });
    expect(provider.requestsOf('root/lead/x')).toHaveLength(1);
    expect(cancelledInTime, 'x ended within 5 s of the cancel').toBe(true);
  });

  it('a line naming no live agent, or no command, answers in one line and changes nothing', { timeout: 120_000 }, async () => {
    const holds = new Holds();
    const provider = new ScriptedProvider({
      agents: {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'x', task: 'Hold.' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'done' },
        ],
        x: [{ calls: [{ name: 'hold', input: { who: 'x' } }] }, { calls: [{ name: 'reply', input: { result: 'x done' } }] }],
      },
    });
    const answers: string[][] = [];
    const journal = await steeredRun(provider, holds, 'Delegate.', async ({ steer }) => {
      await until(() => holds.started.has('x'), 'x to hold');
      answers.push(await steer('/msg root/ghost hello'));
      answers.push(await steer('/cancel root'));
      answers.push(await steer('hello'));
      holds.let('x');
    });
    expect(answers).toEqual([
      ['exarch: no agent root/ghost is running (running: root, root/x)'],
      ['exarch: /cancel takes a sub-agent; the whole run goes on on the workers (Ctrl-C stops following it)'],
      ['exarch: commands start with /; type /help'],
    ]);
    expect(journal.filter((r) => r.type === 'queued')).toEqual([]);
    expect(JSON.parse(journal.find((r) => r.session === 'root/x' && r.type === 'outcome')?.body ?? '{}')).toMatchObject({ outcome: 'replied' });
  });
});
