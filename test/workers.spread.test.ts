import { describe, expect, it } from 'vitest';
import { ScriptedProvider } from '../src/testing/scriptedProvider.js';
import type { ModelRequest } from '../src/engine/types.js';
import { openPostgresStore } from '../src/store/postgresStore.js';
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
        '*': (request) => ({ delayMs: 100, calls: [{ name: 'reply', input: { result: `${request.agent.name} done` } }] }),
      },
    });
    const db = await postgres.server().createDatabase();
    const events: { worker: string; event: WorkerEvent }[] = [];
    const workers: Worker[] = [];
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
    const store = openPostgresStore(db);
    const boss = await startBoss(db);
    try {
      const id = await submitRun(store, boss, { task: 'Ask four sub-agents.', cwd: process.cwd(), record: { tools: [], spread: true } });
      const read = (): Promise<{ session: string; type: string; body: string }[]> =>
        query(db, `SELECT session, type, body FROM exarch.journal WHERE run_id = '${id}' ORDER BY seq`);
      // What the workers did and the journal holds, for a failure's message.
      const story = (journal: readonly { session: string; type: string; body: string }[]): string =>
        [...events.map((e) => `${e.worker} ${JSON.stringify(e.event)}`), ...journal.map((r) => `${r.session} ${r.type} ${r.body.slice(0, 160)}`)].join('\n');
      await until(async () => (await store.getRun(id))?.status === 'done', 'the run to end').catch(async (error: unknown) => {
        throw new Error(`${String(error)}\n${story(await read())}`);
      });
      const journal = await read();
      const rootText = journal.filter((r) => r.session === 'root' && r.type === 'message' && r.body.includes('"role":"assistant"')).at(-1)?.body ?? '';
      expect(rootText, story(journal)).toContain('heard: a,b,c,d');
      // Each sub-agent started once, ended once, and was delivered to the root once.
      for (const name of names) {
        expect(journal.filter((r) => r.session === `root/${name}` && r.type === 'session')).toHaveLength(1);
        expect(journal.filter((r) => r.session === `root/${name}` && r.type === 'outcome')).toHaveLength(1);
        expect(
          journal.filter((r) => r.session === 'root' && r.type === 'inbox' && r.body.includes(`"name":"${name}"`)),
          story(journal),
        ).toHaveLength(1);
      }
      // Each ran as a job of its own, and the root parked while they ran.
      const taken = events
        .filter(({ event }) => event.type === 'session' && event.what === 'taken')
        .map(({ event }) => (event.type === 'session' ? event.session : ''));
      for (const name of names) expect(taken).toContain(`root/${name}`);
      expect(events.some(({ event }) => event.type === 'session' && event.session === 'root' && event.what === 'parked')).toBe(true);
      expect(provider.requestsOf('root')).toHaveLength(2);
      expect(provider.pairingViolations).toEqual([]);
    } finally {
      await Promise.all(workers.map((worker) => worker.stop({ timeoutMs: 5_000 })));
      await boss.stop({ graceful: false, wait: true });
      await store.close();
    }
  });
});
