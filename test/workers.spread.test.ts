import { describe, expect, it } from 'vitest';
import { ScriptedProvider } from '../src/testing/scriptedProvider.js';
import type { ModelRequest } from '../src/engine/types.js';
import { resumeRun } from '../src/store/durableRun.js';
import { openPostgresStore, type PostgresRunStore } from '../src/store/postgresStore.js';
import { startBoss, submitRun } from '../src/workers/runQueue.js';
import { startWorker, type Worker, type WorkerEvent } from '../src/workers/worker.js';
import { postgresForFile } from './support/postgresServer.js';
import { query } from './support/storedRuns.js';

/**
 * Issue 18: each sub-agent of a spread run is a job of its own. Two workers in this process share
 * one scripted model; the oracles read the database with a connection of their own.
 */

const postgres = postgresForFile('test/workers.spread.test.ts');

/** Every text of a request's last user message. */
function lastUserText(request: ModelRequest): string {
  const last = request.messages.at(-1);
  if (last?.role !== 'user') return '';
  return last.content.map((block) => (block.type === 'text' ? block.text : block.type === 'tool_result' ? JSON.stringify(block.content) : '')).join('\n');
}

async function until(check: () => Promise<boolean>, what: string, ms = 60_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface JournalLine {
  readonly session: string;
  readonly type: string;
  readonly body: string;
}

interface SpreadRun {
  readonly id: string;
  readonly journal: readonly JournalLine[];
  readonly events: readonly { readonly worker: string; readonly event: WorkerEvent }[];
  /** The workers' events and the journal, for a failure's message. */
  story(): string;
  /** Sessions taken by a worker, in order. */
  taken(): string[];
}

/** Runs `task` spread over two workers in this process, sharing `provider`, until the run is `status`. */
async function spreadRun(
  provider: ScriptedProvider,
  task: string,
  /** Run once the root has parked, with the run's id and a store of the test's own. */
  whileParked?: (id: string, store: PostgresRunStore) => Promise<void>,
): Promise<SpreadRun> {
  const db = await postgres.server().createDatabase();
  const events: { worker: string; event: WorkerEvent }[] = [];
  const workers: Worker[] = [];
  const store = openPostgresStore(db);
  const boss = await startBoss(db);
  try {
    for (const name of ['w1', 'w2']) {
      workers.push(
        await startWorker({
          db,
          concurrency: 4,
          pollingIntervalSeconds: 0.5,
          policy: { expireInSeconds: 30, retryDelaySeconds: 1 },
          session: () => ({ input: { provider } }),
          onEvent: (event) => events.push({ worker: name, event }),
        }),
      );
    }
    const id = await submitRun(store, boss, { task, cwd: process.cwd(), record: { tools: [], spread: true } });
    const read = (): Promise<JournalLine[]> => query(db, `SELECT session, type, body FROM exarch.journal WHERE run_id = '${id}' ORDER BY seq`);
    const story = (journal: readonly JournalLine[]): string =>
      [...events.map((e) => `${e.worker} ${JSON.stringify(e.event)}`), ...journal.map((r) => `${r.session} ${r.type} ${r.body.slice(0, 160)}`)].join('\n');
    if (whileParked) {
      await until(async () => events.some(({ event }) => event.type === 'session' && event.session === 'root' && event.what === 'parked'), 'the root to park');
      await whileParked(id, store);
    }
    await until(async () => (await store.getRun(id))?.status === 'done', 'the run to be done').catch(async (error: unknown) => {
      throw new Error(`${String(error)}\n${story(await read())}`);
    });
    const journal = await read();
    return {
      id,
      journal,
      events,
      story: () => story(journal),
      taken: () => events.flatMap(({ event }) => (event.type === 'session' && event.what === 'taken' ? [event.session] : [])),
    };
  } finally {
    await Promise.all(workers.map((worker) => worker.stop({ timeoutMs: 5_000 })));
    await boss.stop({ graceful: false, wait: true });
    await store.close();
  }
}

describe.skipIf(!postgres.available)('a run spread over workers', () => {
  it('runs each sub-agent as its own job; the root parks while they run and takes every report once', { timeout: 120_000 }, async () => {
    const names = ['a', 'b', 'c', 'd'];
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? { calls: [...names.map((name) => ({ name: 'agent', input: { name, task: `Report ${name}.` } })), { name: 'wait_for_agents', input: {} }] }
            : {
                text: `heard: ${[...lastUserText(request).matchAll(/\[agent '(\w)' replied\]/g)]
                  .map((m) => m[1])
                  .sort()
                  .join(',')}`,
              },
        '*': (request) => ({ delayMs: 300, calls: [{ name: 'reply', input: { result: `${request.agent.name} done` } }] }),
      },
    });
    const run = await spreadRun(provider, 'Ask four sub-agents.', async (id, store) => {
      // No process holds a spread run whole: it is listed running, and a resume here is refused.
      expect((await store.listRuns()).map((r) => [r.id, r.status])).toEqual([[id, 'running']]);
      await expect(resumeRun(id, { provider }, { store })).rejects.toMatchObject({ kind: 'spread' });
    });
    const { journal } = run;
    const rootText = journal.filter((r) => r.session === 'root' && r.type === 'message' && r.body.includes('"role":"assistant"')).at(-1)?.body ?? '';
    expect(rootText, run.story()).toContain('heard: a,b,c,d');
    // Each sub-agent started once, ended once, and was delivered to the root once.
    for (const name of names) {
      expect(journal.filter((r) => r.session === `root/${name}` && r.type === 'session')).toHaveLength(1);
      expect(journal.filter((r) => r.session === `root/${name}` && r.type === 'outcome')).toHaveLength(1);
      expect(
        journal.filter((r) => r.session === 'root' && r.type === 'inbox' && r.body.includes(`"name":"${name}"`)),
        run.story(),
      ).toHaveLength(1);
    }
    // Each ran as a job of its own, and the root parked while they ran.
    for (const name of names) expect(run.taken()).toContain(`root/${name}`);
    expect(run.events.some(({ event }) => event.type === 'session' && event.session === 'root' && event.what === 'parked')).toBe(true);
    expect(provider.requestsOf('root')).toHaveLength(2);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('cancel_agent reaches a sub-agent on another job: its stalled request ends, it is delivered cancelled, once', { timeout: 120_000 }, async () => {
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          [
            {
              calls: [
                { name: 'agent', input: { name: 'slow', task: 'Take forever.' } },
                { name: 'agent', input: { name: 'quick', task: 'Say hi.' } },
                { name: 'wait_for_agents', input: { until: 'any' } },
              ],
            },
            {
              calls: [
                { name: 'cancel_agent', input: { name: 'slow' } },
                { name: 'wait_for_agents', input: {} },
              ],
            },
            { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
          ][index] ?? { text: 'more than asked' },
        // The first event, then nothing: only a cancel (or the stall watchdog, minutes away) ends it.
        slow: [{ text: 'thinking', stallAfter: 1 }],
        quick: [{ calls: [{ name: 'reply', input: { result: 'hi' } }] }],
      },
    });
    const run = await spreadRun(provider, 'Delegate, then change your mind.');
    const { journal } = run;
    const slowEnd = journal.filter((r) => r.session === 'root/slow' && r.type === 'outcome');
    expect(slowEnd, run.story()).toHaveLength(1);
    expect(JSON.parse(slowEnd[0]?.body ?? '{}')).toMatchObject({ outcome: 'cancelled' });
    expect(journal.filter((r) => r.session === 'root' && r.type === 'inbox' && r.body.includes('"name":"slow"'))).toHaveLength(1);
    const answer = journal.filter((r) => r.session === 'root' && r.type === 'message' && r.body.includes('"role":"assistant"')).at(-1)?.body ?? '';
    expect(answer).toContain("[agent 'slow' was cancelled]");
    expect(provider.requestsOf('root/slow')).toHaveLength(1);
    expect(provider.requestsOf('root')).toHaveLength(3);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('a sub-agent given a budget runs its whole subtree in its own job, within the budget', { timeout: 120_000 }, async () => {
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'lead', task: 'Lead two.', budget: { tokens: 500 } } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
        lead: (_request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'x', task: 'Spend.' } },
                  { name: 'agent', input: { name: 'y', task: 'Spend.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
                usage: { inputTokens: 10, outputTokens: 10 },
              }
            : { calls: [{ name: 'reply', input: { result: 'led' } }] },
        // Each grandchild's answer costs more than the lead's budget holds.
        '*': () => ({ calls: [{ name: 'reply', input: { result: 'spent' } }], usage: { inputTokens: 300, outputTokens: 300 }, delayMs: 50 }),
      },
    });
    const run = await spreadRun(provider, 'Delegate within a budget.');
    // The lead is a job of its own; its sub-agents are not: they ran in its job, where its budget is kept.
    expect(run.taken()).toContain('root/lead');
    expect(run.taken().filter((session) => session.startsWith('root/lead/'))).toEqual([]);
    expect(
      run.journal.some((r) => r.session === 'root/lead/x' && r.type === 'session'),
      run.story(),
    ).toBe(true);
    const lead = run.journal.filter((r) => r.session === 'root/lead' && r.type === 'outcome');
    expect(lead).toHaveLength(1);
    expect(JSON.parse(lead[0]?.body ?? '{}')).toMatchObject({ outcome: 'capped', reason: 'budget' });
    expect(provider.pairingViolations).toEqual([]);
  });
});
