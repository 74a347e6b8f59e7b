import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../../src/tools/defineTool.js';
import { recordSpreadApproval } from '../../../src/workers/spreadApprovals.js';
import { steerSpreadRun } from '../../../src/workers/spreadSteering.js';
import { ScriptedProvider } from '../../../src/testing/scriptedProvider.js';
import type { ModelRequest } from '../../../src/engine/types.js';
import { resumeRun } from '../../../src/run/durableRun.js';
import { openPostgresStore, type PostgresRunStore } from '../../../src/store/postgresStore.js';
import type PgBoss from 'pg-boss';
import { startBoss, submitRun } from '../../../src/workers/runQueue.js';
import type { RunSessions } from '../../../src/workers/jobContext.js';
import type { RunOptionsRecord } from '../../../src/store/runStore.js';
import { startWorker } from '../../../src/workers/worker.js';
import type { Worker, WorkerEvent, WorkerRunPlace } from '../../../src/workers/workerOptions.js';
import type { RunEventListener } from '../../../src/watch/observe/events.js';
import { OtelRunExporter } from '../../../src/watch/otel/otelExporter.js';
import { PlannedIds } from '../../../src/watch/otel/plannedIds.js';
import { SpanStatusCode } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { postgresForFile } from '../../support/postgresServer.js';
import { journalOf, query, type JournalLine } from '../../support/storedRuns.js';
import { until } from '../../support/until.js';

/**
 * Issue 18: each sub-agent of a spread run is a job of its own. Two workers in this process share
 * one scripted model; the oracles read the database with a connection of their own.
 */

const postgres = postgresForFile('test/e2e/workers/workers.spread.test.ts');

/** Every text of a request's last user message. */
function lastUserText(request: ModelRequest): string {
  const last = request.messages.at(-1);
  if (last?.role !== 'user') return '';
  return last.content.map((block) => (block.type === 'text' ? block.text : block.type === 'tool_result' ? JSON.stringify(block.content) : '')).join('\n');
}

/** A side-effecting tool, and what it did (one entry per call that ran). */
function noteTool(): { effects: string[]; note: ReturnType<typeof defineTool> } {
  const effects: string[] = [];
  const note = defineTool({
    name: 'note',
    description: 'Writes a note somewhere that matters.',
    input: z.object({ text: z.string() }),
    run: async ({ text }) => {
      effects.push(text);
      return 'noted';
    },
  });
  return { effects, note };
}

/** The root's last assistant message, as its journal record's body. */
function rootAnswerOf(journal: readonly JournalLine[]): string {
  return journal.filter((r) => r.session === 'root' && r.type === 'message' && r.body.includes('"role":"assistant"')).at(-1)?.body ?? '';
}

interface SpreadRun {
  readonly id: string;
  readonly db: string;
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
  /** More of the sessions' input (tools, an approval policy), and a step run as soon as the run is queued. */
  more: {
    readonly input?: Omit<RunSessions['input'], 'provider'>;
    readonly record?: Omit<RunOptionsRecord, 'spread'>;
    readonly during?: (run: { readonly id: string; readonly db: string; readonly store: PostgresRunStore; readonly boss: PgBoss }) => Promise<void>;
    /** The host's listener of a run's events on each worker (an OpenTelemetry exporter), and what closes it. */
    readonly events?: (place: WorkerRunPlace) => { readonly listener: RunEventListener; close(): void };
    /** Sessions each worker runs at once (default 4). */
    readonly concurrency?: number;
  } = {},
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
          concurrency: more.concurrency ?? 4,
          pollingIntervalSeconds: 0.5,
          policy: { expireInSeconds: 30, retryDelaySeconds: 1 },
          session: (_row, place) => {
            const host = more.events?.(place);
            return { input: { provider, ...more.input }, ...(host ? { events: host.listener, close: async () => host.close() } : {}) };
          },
          onEvent: (event) => events.push({ worker: name, event }),
        }),
      );
    }
    const id = await submitRun(store, boss, { task, cwd: process.cwd(), record: { tools: [], ...more.record, spread: true } });
    const read = (): Promise<JournalLine[]> => journalOf(db, id);
    const story = (journal: readonly JournalLine[]): string =>
      [...events.map((e) => `${e.worker} ${JSON.stringify(e.event)}`), ...journal.map((r) => `${r.session} ${r.type} ${r.body.slice(0, 160)}`)].join('\n');
    await more.during?.({ id, db, store, boss });
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
      db,
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
    const rootText = rootAnswerOf(journal);
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
    const answer = rootAnswerOf(journal);
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

  it('a call waiting for a person parks its session: the run is waiting, and each answer wakes only the session that asked', { timeout: 120_000 }, async () => {
    const { effects, note } = noteTool();
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'a', task: 'Note a.' } },
                  { name: 'agent', input: { name: 'b', task: 'Note b.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
        '*': (request, index) =>
          index === 0
            ? { calls: [{ name: 'note', input: { text: `from ${request.agent.name}` } }] }
            : { calls: [{ name: 'reply', input: { result: `${request.agent.name} saw: ${lastUserText(request)}` } }] },
      },
    });
    let waitingSeen: { status: string | undefined; parked: string[]; awaiting: JournalLine[] } | undefined;
    const run = await spreadRun(provider, 'Have two sub-agents take notes.', undefined, {
      input: { tools: [note], approve: ['note'] },
      record: { tools: ['note'], approve: ['note'] },
      during: async ({ id, db, store, boss }) => {
        const awaiting = (): Promise<JournalLine[]> =>
          query(db, `SELECT session, type, body FROM exarch.journal WHERE run_id = '${id}' AND type = 'awaiting' ORDER BY seq`);
        await until(async () => (await store.listRuns()).find((r) => r.id === id)?.status === 'waiting', 'the run to wait for a person');
        const parked = await query<{ session: string }>(
          db,
          `SELECT session FROM exarch.sessions WHERE run_id = '${id}' AND owner_token IS NULL ORDER BY session`,
        );
        waitingSeen = { status: (await store.getRun(id))?.status, parked: parked.map((r) => r.session), awaiting: await awaiting() };
        // Nothing ran before a person said so.
        expect(effects).toEqual([]);
        const callOf = (session: string): string => {
          const line = waitingSeen?.awaiting.find((r) => r.session === session);
          return (JSON.parse(line?.body ?? '{}') as { calls?: string[] }).calls?.[0] ?? '';
        };
        await recordSpreadApproval(store, boss, id, { callId: callOf('root/a'), decision: 'approve' });
        await until(async () => effects.length === 1, 'the approved call to run');
        // b still waits: the run is waiting again once a has done all it could.
        await until(async () => (await store.listRuns()).find((r) => r.id === id)?.status === 'waiting', 'the run to wait for b');
        expect(effects).toEqual(['from a']);
        await recordSpreadApproval(store, boss, id, { callId: callOf('root/b'), decision: 'deny', reason: 'not b' });
      },
    });
    expect(waitingSeen?.awaiting.map((r) => r.session).sort(), run.story()).toEqual(['root/a', 'root/b']);
    // Every session let go of while the run waited: none holds a worker.
    expect(waitingSeen?.parked).toEqual(['root', 'root/a', 'root/b']);
    expect(effects).toEqual(['from a']);
    const answer = rootAnswerOf(run.journal);
    expect(answer, run.story()).toContain('a saw: \\"noted\\"');
    expect(answer).toContain('a person denied this call: not b');
    // Each sub-agent was taken again once for its answer: parked while it waited, not polled.
    expect(run.taken().filter((session) => session === 'root/a')).toHaveLength(2);
    expect(run.taken().filter((session) => session === 'root/b')).toHaveLength(2);
    expect(provider.pairingViolations).toEqual([]);
  });

  it("'always' answers the same tool's calls waiting in other sessions, and later ones anywhere in the run", { timeout: 120_000 }, async () => {
    const { effects, note } = noteTool();
    const names = ['a', 'b', 'c'];
    const provider = new ScriptedProvider({
      agents: {
        root: (_request, index) =>
          [
            {
              calls: [
                { name: 'agent', input: { name: 'a', task: 'Note.' } },
                { name: 'agent', input: { name: 'b', task: 'Note.' } },
                { name: 'wait_for_agents', input: {} },
              ],
            },
            // Started after the answer: its call is approved without asking.
            {
              calls: [
                { name: 'agent', input: { name: 'c', task: 'Note.' } },
                { name: 'wait_for_agents', input: {} },
              ],
            },
            { text: 'all noted' },
          ][index] ?? { text: 'more than asked' },
        '*': (request, index) =>
          index === 0 ? { calls: [{ name: 'note', input: { text: request.agent.name } }] } : { calls: [{ name: 'reply', input: { result: 'done' } }] },
      },
    });
    const run = await spreadRun(provider, 'Take notes.', undefined, {
      input: { tools: [note], approve: ['note'] },
      record: { tools: ['note'], approve: ['note'] },
      during: async ({ id, db, store, boss }) => {
        await until(async () => (await store.listRuns()).find((r) => r.id === id)?.status === 'waiting', 'the run to wait for a person');
        const awaiting = await query(db, `SELECT session, type, body FROM exarch.journal WHERE run_id = '${id}' AND type = 'awaiting' ORDER BY seq`);
        expect(awaiting.map((r) => r.session).sort()).toEqual(['root/a', 'root/b']);
        const first = (JSON.parse(awaiting[0]?.body ?? '{}') as { calls?: string[] }).calls?.[0] ?? '';
        await recordSpreadApproval(store, boss, id, { callId: first, decision: 'always' });
      },
    });
    expect([...effects].sort(), run.story()).toEqual(names);
    // c never asked.
    expect(
      run.journal
        .filter((r) => r.type === 'awaiting')
        .map((r) => r.session)
        .sort(),
    ).toEqual(['root/a', 'root/b']);
    expect(run.journal.filter((r) => r.type === 'approval' && r.body.includes('"always"'))).toHaveLength(1);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('a call waiting inside a budgeted subtree parks the job that keeps it; the answer wakes that job, which goes on within the budget', {
    timeout: 120_000,
  }, async () => {
    const { effects, note } = noteTool();
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'lead', task: 'Lead one.', budget: { tokens: 10_000 } } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
        lead: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'x', task: 'Note.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { calls: [{ name: 'reply', input: { result: `lead heard: ${lastUserText(request).replace(/\s+/g, ' ')}` } }] },
        x: (_request, index) =>
          index === 0 ? { calls: [{ name: 'note', input: { text: 'x' } }] } : { calls: [{ name: 'reply', input: { result: 'x noted' } }] },
      },
    });
    const run = await spreadRun(provider, 'Delegate a note within a budget.', undefined, {
      input: { tools: [note], approve: ['note'] },
      record: { tools: ['note'], approve: ['note'] },
      during: async ({ id, db, store, boss }) => {
        await until(async () => (await store.listRuns()).find((r) => r.id === id)?.status === 'waiting', 'the run to wait for a person');
        const awaiting = await query(db, `SELECT session, type, body FROM exarch.journal WHERE run_id = '${id}' AND type = 'awaiting' ORDER BY seq`);
        expect(awaiting.map((r) => r.session)).toEqual(['root/lead/x']);
        expect(effects).toEqual([]);
        const callId = (JSON.parse(awaiting[0]?.body ?? '{}') as { calls?: string[] }).calls?.[0] ?? '';
        await recordSpreadApproval(store, boss, id, { callId, decision: 'approve' });
      },
    });
    expect(effects, run.story()).toEqual(['x']);
    // x has no job of its own: the lead's job parked with it and was woken for the answer.
    expect(run.taken().filter((session) => session.startsWith('root/lead/'))).toEqual([]);
    expect(run.events.some(({ event }) => event.type === 'session' && event.session === 'root/lead' && event.what === 'parked')).toBe(true);
    expect(run.taken().filter((session) => session === 'root/lead')).toHaveLength(2);
    const answer = rootAnswerOf(run.journal);
    expect(answer).toMatch(/\[agent 'lead' replied\] lead heard: .*\[agent 'x' replied\] x noted/);
    expect(run.journal.filter((r) => r.session === 'root/lead/x' && r.type === 'session')).toHaveLength(1);
    expect(provider.requestsOf('root/lead/x')).toHaveLength(2);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('a typed sub-agent woken in a job of its own keeps its type: its tools, and its sub-agents bound by them', { timeout: 120_000 }, async () => {
    const ping = defineTool({ name: 'ping', description: 'Pings.', input: z.object({}), readOnly: true, run: async () => 'pong' });
    const note = defineTool({ name: 'note', description: 'Notes.', input: z.object({}), run: async () => 'noted' });
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'lead', type: 'scout', task: 'Scout.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
        lead: (_request, index) =>
          [
            {
              calls: [
                { name: 'agent', input: { name: 'x', task: 'Look.' } },
                { name: 'wait_for_agents', input: {} },
              ],
            },
            // Taken up in a new job: started again, its second sub-agent is still a scout's.
            {
              calls: [
                { name: 'agent', input: { name: 'y', task: 'Look.' } },
                { name: 'wait_for_agents', input: {} },
              ],
            },
            { calls: [{ name: 'reply', input: { result: 'scouted' } }] },
          ][index] ?? { text: 'more than asked' },
        '*': () => ({ delayMs: 200, calls: [{ name: 'reply', input: { result: 'looked' } }] }),
      },
    });
    const run = await spreadRun(provider, 'Send a scout.', undefined, {
      input: { tools: [ping, note], agents: { scout: { description: 'Looks only.', tools: ['ping'] } } },
      record: { tools: ['note', 'ping'], agentTypes: ['scout'] },
    });
    // The lead parked while x ran, and was taken again for its result.
    expect(run.taken().filter((session) => session === 'root/lead').length, run.story()).toBeGreaterThanOrEqual(2);
    const toolsOf = (agent: string): string[][] =>
      provider.requestsOf(agent).map((request) => request.tools.filter((name) => name === 'ping' || name === 'note'));
    for (const agent of ['root/lead', 'root/lead/x', 'root/lead/y'])
      for (const tools of toolsOf(agent)) expect(tools, `${agent}\n${run.story()}`).toEqual(['ping']);
    expect(toolsOf('root/lead')).toHaveLength(3);
    expect(provider.pairingViolations).toEqual([]);
  });

  // With the provider's ids planned (as `exarch worker --otel` makes it), and with any provider (a library host's).
  it.each([
    { ids: 'planned', extent: 'whole: from its start to its end, with its outcome' },
    { ids: "the SDK's", extent: 'opened by its first job' },
  ])(
    "with OpenTelemetry ($ids ids), the run is one trace over both workers: one agent span per session ($extent), each under its parent's, its requests under it, no call of a parked session failed",
    {
      timeout: 120_000,
    },
    async ({ ids: which }) => {
      const collected = new InMemorySpanExporter();
      const ids = which === 'planned' ? new PlannedIds() : undefined;
      const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(collected)], ...(ids ? { idGenerator: ids } : {}) }).getTracer('test');
      const provider = new ScriptedProvider({
        agents: {
          root: (_request, index) =>
            index === 0
              ? {
                  calls: [
                    { name: 'agent', input: { name: 'a', task: 'Delegate.' } },
                    { name: 'agent', input: { name: 'b', task: 'Say b.' } },
                    { name: 'wait_for_agents', input: {} },
                  ],
                }
              : { text: 'heard both' },
          a: (_request, index) =>
            index === 0
              ? {
                  calls: [
                    { name: 'agent', input: { name: 'deep', task: 'Say deep.' } },
                    { name: 'wait_for_agents', input: {} },
                  ],
                }
              : { calls: [{ name: 'reply', input: { result: 'a done' } }] },
          '*': (request) => ({ delayMs: 400, calls: [{ name: 'reply', input: { result: `${request.agent.name} said` } }] }),
        },
      });
      const run = await spreadRun(provider, 'Delegate twice.', undefined, {
        events: (place) => {
          const exporter = new OtelRunExporter({ tracer, directory: place.spans, ...(ids ? { ids } : {}) });
          return { listener: exporter.onEvent, close: () => exporter.close() };
        },
        // One slot each: the sessions spread over both workers.
        concurrency: 1,
      });
      expect(new Set(run.events.filter(({ event }) => event.type === 'session' && event.what === 'taken').map(({ worker }) => worker))).toEqual(
        new Set(['w1', 'w2']),
      );
      const spans = collected.getFinishedSpans();
      const agentSpans = spans.filter((span) => span.name.startsWith('invoke_agent'));
      const agents = ['root', 'root/a', 'root/b', 'root/a/deep'];
      // One span per session, though the root and a each ran in several jobs.
      expect(agentSpans.map((span) => String(span.attributes['gen_ai.agent.id'])).sort(), run.story()).toEqual([...agents].sort());
      expect(run.taken().filter((session) => session === 'root').length).toBeGreaterThanOrEqual(2);
      expect(run.taken().filter((session) => session === 'root/a').length).toBeGreaterThanOrEqual(2);
      expect(new Set(spans.map((span) => span.spanContext().traceId)).size).toBe(1);
      const spanOf = (agent: string): string => agentSpans.find((span) => span.attributes['gen_ai.agent.id'] === agent)?.spanContext().spanId ?? 'none';
      for (const agent of agents.filter((a) => a !== 'root'))
        expect(agentSpans.find((span) => span.attributes['gen_ai.agent.id'] === agent)?.parentSpanContext?.spanId, agent).toBe(
          spanOf(agent.slice(0, agent.lastIndexOf('/'))),
        );
      expect(agentSpans.find((span) => span.attributes['gen_ai.agent.id'] === 'root')?.parentSpanContext).toBeUndefined();
      // Each session's model requests, whichever job made them, under its span.
      for (const agent of agents) {
        const chats = spans.filter((span) => span.name.startsWith('chat') && span.parentSpanContext?.spanId === spanOf(agent));
        expect(chats, agent).toHaveLength(provider.requestsOf(agent).length);
      }
      // Nothing failed: the calls a parked session left open went on in its next job.
      expect(spans.filter((span) => span.status.code === SpanStatusCode.ERROR).map((span) => span.name)).toEqual([]);
      expect(spans.some((span) => span.attributes['exarch.tool.continued'] === true)).toBe(true);
      if (!ids) return;
      // Each agent span whole: emitted by the job in which its session ended, covering every span of
      // the session (those of earlier jobs too) and those of its sub-agents, with its outcome.
      const ms = (time: readonly [number, number]): number => time[0] * 1_000 + time[1] / 1e6;
      const byId = new Map(spans.map((span) => [span.spanContext().spanId, span]));
      const agentOf = (span: (typeof spans)[number]): string | undefined => {
        for (let at = span.parentSpanContext?.spanId; at !== undefined; at = byId.get(at)?.parentSpanContext?.spanId) {
          const agent = byId.get(at)?.attributes['gen_ai.agent.id'];
          if (agent !== undefined) return String(agent);
        }
        return undefined;
      };
      for (const agent of agents) {
        const own = agentSpans.find((span) => span.attributes['gen_ai.agent.id'] === agent);
        // Its session's spans and its descendants' (by path, not by span ids).
        const inside = spans.filter(
          (span) => span !== own && (agentOf(span) === agent || String(span.attributes['gen_ai.agent.id'] ?? '').startsWith(`${agent}/`)),
        );
        expect(inside.length, agent).toBeGreaterThan(0);
        for (const span of inside) {
          expect(ms(span.startTime), `${span.name} starts within ${agent}`).toBeGreaterThanOrEqual(ms(own?.startTime ?? [0, 0]));
          expect(ms(span.endTime), `${span.name} ends within ${agent}`).toBeLessThanOrEqual(ms(own?.endTime ?? [0, 0]));
        }
        expect(own?.attributes['exarch.agent.continued'], agent).toBeUndefined();
      }
      for (const agent of ['root/a', 'root/b', 'root/a/deep'])
        expect(agentSpans.find((span) => span.attributes['gen_ai.agent.id'] === agent)?.attributes['exarch.agent.outcome'], agent).toBe('replied');
    },
  );

  it('steering lines reach agents wherever they are: a message to a parked root and to a running sub-agent, each taken once; /help and a wrong path', {
    timeout: 120_000,
  }, async () => {
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          [
            { calls: [{ name: 'agent', input: { name: 'busy', task: 'Work a while.' } }] },
            // Ends its turn with a sub-agent running: it parks, at rest.
            { text: 'started busy' },
            { text: `root read: ${lastUserText(request)}` },
            { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
          ][index] ?? { text: 'more than asked' },
        busy: (request, index) =>
          index === 0
            ? { delayMs: 2_500, text: 'still working' }
            : { calls: [{ name: 'reply', input: { result: `busy read: ${lastUserText(request).replace(/\s+/g, ' ')}` } }] },
      },
    });
    const answers: string[][] = [];
    const run = await spreadRun(provider, 'Start one and rest.', undefined, {
      during: async ({ id, db, store, boss }) => {
        // The root rests with busy running: parked. busy is in its first request on a worker.
        await until(async () => provider.requestsOf('root/busy').length === 1 && provider.requestsOf('root').length === 2, 'busy to be asked');
        await until(
          async () =>
            (
              await query<{ n: number }>(
                db,
                `SELECT count(*)::int AS n FROM exarch.sessions WHERE run_id = '${id}' AND session = 'root' AND owner_token IS NULL`,
              )
            )[0]?.n === 1,
          'the root to park',
        );
        answers.push(await steerSpreadRun(store, boss, id, '/help'));
        answers.push(await steerSpreadRun(store, boss, id, '/msg nobody hello'));
        answers.push(await steerSpreadRun(store, boss, id, '/cancel root'));
        answers.push(await steerSpreadRun(store, boss, id, '/msg root look up'));
        answers.push(await steerSpreadRun(store, boss, id, '/msg busy hurry please'));
      },
    });
    expect(answers).toEqual([
      [
        'exarch: commands, while the run goes on:',
        '  /cancel PATH      cancel a sub-agent and everything it started (its parent is told it was cancelled)',
        '  /msg PATH TEXT    give a running agent a message: it reads it at its next boundary',
        '  /help             this help, and the agents running now',
        "exarch: PATH is an agent's path in the tree (root/lead/scribe; the root/ may be left out). The whole run goes on on the workers; Ctrl-C stops following it.",
        'exarch: running: root, root/busy',
      ],
      ['exarch: no agent root/nobody is running (running: root, root/busy)'],
      ['exarch: /cancel takes a sub-agent; the whole run goes on on the workers (Ctrl-C stops following it)'],
      ['exarch: root gets the message at its next boundary'],
      ['exarch: root/busy gets the message at its next boundary'],
    ]);
    // The parked root was woken for its message; busy took its message while running, at its next turn.
    const said = (agent: string, index: number): string => JSON.stringify(provider.requestsOf(agent)[index]?.lastMessage ?? null);
    expect(said('root', 2), run.story()).toContain('look up');
    expect(said('root/busy', 1)).toContain('hurry please');
    // Each message is in the journal once: written by the line, not again by the session that took it.
    expect(run.journal.filter((r) => r.type === 'queued').map((r) => [r.session, JSON.parse(r.body).text])).toEqual([
      ['root', 'look up'],
      ['root/busy', 'hurry please'],
    ]);
    const answer = rootAnswerOf(run.journal);
    expect(answer).toContain("[agent 'busy' replied] busy read:");
    expect(provider.requestsOf('root/busy')).toHaveLength(2);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('/cancel of a parked sub-agent wakes it to cancel its own sub-agents: its parent is told it was cancelled, once', { timeout: 120_000 }, async () => {
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'lead', task: 'Lead.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
        lead: () => ({
          calls: [
            { name: 'agent', input: { name: 'deep', task: 'Take forever.' } },
            { name: 'wait_for_agents', input: {} },
          ],
        }),
        deep: [{ text: 'thinking', stallAfter: 1 }],
      },
    });
    let answer: string[] = [];
    const run = await spreadRun(provider, 'Delegate deep.', undefined, {
      during: async ({ id, db, store, boss }) => {
        await until(async () => provider.requestsOf('root/lead/deep').length === 1, 'deep to be asked');
        await until(
          async () =>
            (
              await query<{ n: number }>(
                db,
                `SELECT count(*)::int AS n FROM exarch.sessions WHERE run_id = '${id}' AND session = 'root/lead' AND owner_token IS NULL`,
              )
            )[0]?.n === 1,
          'lead to park',
        );
        answer = await steerSpreadRun(store, boss, id, '/cancel lead');
      },
    });
    expect(answer).toEqual(['exarch: cancelling root/lead and everything it started']);
    const outcomes = run.journal.filter((r) => r.type === 'outcome').map((r) => [r.session, JSON.parse(r.body).outcome]);
    // deep is told to stop too (its cancel stored, its job woken); the run may end before it has.
    expect(outcomes, run.story()).toEqual(expect.arrayContaining([['root/lead', 'cancelled']]));
    expect(outcomes.filter(([session]) => session === 'root/lead/deep').every(([, outcome]) => outcome === 'cancelled')).toBe(true);
    expect(await query(run.db, `SELECT cancel FROM exarch.sessions WHERE run_id = '${run.id}' AND session = 'root/lead/deep'`)).toEqual([
      { cancel: expect.any(String) },
    ]);
    expect(provider.requestsOf('root/lead/deep')).toHaveLength(1);
    expect(run.journal.filter((r) => r.session === 'root' && r.type === 'inbox')).toHaveLength(1);
    const final = rootAnswerOf(run.journal);
    expect(final).toContain("[agent 'lead' was cancelled]");
    expect(provider.requestsOf('root/lead')).toHaveLength(1);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('/cancel of a sub-agent inside a budgeted subtree reaches it through the job that keeps it; the rest of the subtree goes on', {
    timeout: 120_000,
  }, async () => {
    const provider = new ScriptedProvider({
      agents: {
        root: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'lead', task: 'Lead.', budget: { tokens: 100_000 } } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: `root heard: ${lastUserText(request).replace(/\s+/g, ' ')}` },
        lead: (request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'deep', task: 'Take forever.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { calls: [{ name: 'reply', input: { result: `lead heard: ${lastUserText(request).replace(/\s+/g, ' ')}` } }] },
        deep: [{ text: 'thinking', stallAfter: 1 }],
      },
    });
    let answer: string[] = [];
    const run = await spreadRun(provider, 'Lead within a budget.', undefined, {
      during: async ({ id, store, boss }) => {
        await until(async () => provider.requestsOf('root/lead/deep').length === 1, 'deep to be asked');
        answer = await steerSpreadRun(store, boss, id, '/cancel root/lead/deep');
      },
    });
    expect(answer).toEqual(['exarch: cancelling root/lead/deep and everything it started']);
    // deep had no job of its own: the lead's job cancelled it, and the lead went on.
    expect(run.taken().filter((session) => session.startsWith('root/lead/'))).toEqual([]);
    const outcomes = run.journal.filter((r) => r.type === 'outcome').map((r) => [r.session, JSON.parse(r.body).outcome]);
    expect(outcomes, run.story()).toEqual(
      expect.arrayContaining([
        ['root/lead/deep', 'cancelled'],
        ['root/lead', 'replied'],
      ]),
    );
    const final = rootAnswerOf(run.journal);
    expect(final).toMatch(/lead heard: .*\[agent 'deep' was cancelled\]/);
    expect(provider.pairingViolations).toEqual([]);
  });
});
