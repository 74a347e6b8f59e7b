import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, type Tool } from '../../../src/index.js';
import { resumeRun, startRun, type DurableRunOptions, type DurableSessionInput } from '../../../src/run/durableRun.js';
import { JournalTraceStream, traceFromJournal, writeViewerForRun } from '../../../src/watch/trace/fromJournal.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import { ScriptedProvider, type ScriptedProviderOptions } from '../../../src/testing/index.js';
import { TRACE_VERSION, type TraceRecord } from '../../../src/watch/trace/format.js';
import { parseTrace } from '../../../src/watch/trace/readTrace.js';
import { TraceRecorder } from '../../../src/watch/trace/recorder.js';
import type { Message } from '../../../src/engine/types.js';
import { buildViewerModel, renderViewerHtml, type ViewerModel } from '../../../src/watch/viewer/index.js';

/**
 * The trace a durable run's journal converts to (src/watch/trace/fromJournal.ts), checked against the
 * oracle: the trace `TraceRecorder` wrote live, from XState's inspection events, of the same run.
 */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-journal-trace-'));
  dirs.push(dir);
  return dir;
}

const echo = defineTool({ name: 'echo', description: 'Echoes.', input: z.object({ text: z.string() }), run: ({ text }) => text });

type Kind = TraceRecord['kind'];
type Rec<K extends Kind> = Extract<TraceRecord, { kind: K }>;
const of = <K extends Kind>(records: readonly TraceRecord[], kind: K): Rec<K>[] => records.filter((r): r is Rec<K> => r.kind === kind);

/** A live recorder for one process of a run. */
function liveRecorder(): { recorder: TraceRecorder; read: () => TraceRecord[] } {
  const file = join(tempDir(), 'trace.jsonl');
  const recorder = new TraceRecorder({ file, title: 'live' });
  return {
    recorder,
    read: () => {
      recorder.close();
      return parseTrace(readFileSync(file, 'utf8'));
    },
  };
}

interface Both {
  readonly live: TraceRecord[];
  readonly derived: TraceRecord[];
  readonly rows: JournalRow[];
  readonly store: MemoryRunStore;
  readonly runId: string;
}

/** Runs `agents` durably with a live trace, and converts its journal. */
async function runBoth(agents: ScriptedProviderOptions['agents'], session: Partial<DurableSessionInput> = {}, task = 'Coordinate the work.'): Promise<Both> {
  const { recorder, read } = liveRecorder();
  const store = new MemoryRunStore();
  const provider = new ScriptedProvider({ agents });
  const run = await startRun(task, { tools: [echo], ...session, provider }, { store, actor: { inspect: (event) => recorder.inspect(event) } });
  await run.result;
  expect(provider.pairingViolations).toEqual([]);
  const live = read();
  const rows = await store.journal(run.id);
  return { live, derived: traceFromJournal(rows, 'journal'), rows, store, runId: run.id };
}

// ---- What a journal-derived trace and a live one must agree on -------------------------------------

function agentsOf(records: readonly TraceRecord[]) {
  return new Map(of(records, 'agent.start').map((r) => [r.agent, { parent: r.parent, name: r.name, depth: r.depth, task: r.task, taskChars: r.taskChars }]));
}

/** Each agent's history as its last `message` record per index has it. */
function historiesOf(records: readonly TraceRecord[]): Map<string, Message[]> {
  const byAgent = new Map<string, Map<number, Message>>();
  for (const r of of(records, 'message')) {
    let messages = byAgent.get(r.agent);
    if (!messages) byAgent.set(r.agent, (messages = new Map()));
    messages.set(r.index, r.message);
  }
  return new Map(
    [...byAgent].map(([agent, messages]) => {
      const indices = [...messages.keys()].sort((a, b) => a - b);
      // Indices are dense: 0..n-1.
      expect(indices).toEqual(indices.map((_, i) => i));
      return [agent, indices.map((i) => messages.get(i) as Message)];
    }),
  );
}

function deliveriesOf(records: readonly TraceRecord[]) {
  return of(records, 'delivery')
    .map(({ parent, child, name, outcome, text, reason }) => ({ parent, child, name, outcome, text, reason }))
    .sort((a, b) => `${a.parent} ${a.child}`.localeCompare(`${b.parent} ${b.child}`));
}

/**
 * The live trace less the deliveries its parent never took: the recorder writes a delivery from
 * the done event the parent is sent, also when the parent is ending in a final state itself (a
 * child cancelled by its capped, replied, failed or cancelled parent: reason `parent …`), whose
 * result never enters the parent's inbox. The journal has no `inbox` record for those.
 */
function accepted(records: readonly TraceRecord[]): TraceRecord[] {
  return records.filter((r) => r.kind !== 'delivery' || !(r.outcome === 'cancelled' && r.reason?.startsWith('parent ')));
}

function endsOf(records: readonly TraceRecord[]) {
  return new Map(of(records, 'agent.end').map((r) => [r.agent, { status: r.status, outcome: r.outcome, reason: r.reason }]));
}

/** Each agent's state records (state, steps, usage), in order. */
function stateRecordsOf(records: readonly TraceRecord[]) {
  const byAgent = new Map<string, { state: string; steps: number; usage: unknown }[]>();
  for (const r of of(records, 'state')) {
    const list = byAgent.get(r.agent) ?? [];
    list.push({ state: r.state, steps: r.steps, usage: r.usage });
    byAgent.set(r.agent, list);
  }
  return byAgent;
}

/** Each agent's sequence of distinct states (consecutive repeats collapsed). */
function statesOf(records: readonly TraceRecord[]): Map<string, string[]> {
  return new Map([...stateRecordsOf(records)].map(([agent, list]) => [agent, collapse(list.map((s) => s.state))]));
}

function collapse(states: readonly string[]): string[] {
  return states.filter((state, i) => state !== states[i - 1]);
}

function responsesOf(records: readonly TraceRecord[]) {
  const byAgent = new Map<string, unknown[]>();
  for (const { agent, stopReason, textChars, toolCalls, usage } of of(records, 'response'))
    byAgent.set(agent, [...(byAgent.get(agent) ?? []), { stopReason, textChars, toolCalls, usage }]);
  return byAgent;
}

function toolResultsOf(records: readonly TraceRecord[]) {
  const byAgent = new Map<string, unknown[]>();
  for (const { agent, toolUseId, isError, chars } of of(records, 'tool.result'))
    byAgent.set(agent, [...(byAgent.get(agent) ?? []), { toolUseId, isError, chars }]);
  return byAgent;
}

/** A valid trace: trace.start first (version, statechart), trace.end last, times from 0 and never going back. */
function expectWellFormed(records: readonly TraceRecord[], rows: readonly JournalRow[]): void {
  const first = records[0];
  expect(first).toMatchObject({ kind: 'trace.start', version: TRACE_VERSION, t: 0, title: 'journal', statechart: { initial: 'starting' } });
  expect(first?.kind === 'trace.start' && first.startedAt).toBe(new Date(rows[0]?.ts ?? 0).toISOString());
  expect(records.at(-1)?.kind).toBe('trace.end');
  expect(of(records, 'trace.start')).toHaveLength(1);
  expect(of(records, 'trace.end')).toHaveLength(1);
  const times = records.map((r) => r.t);
  expect([...times].sort((a, b) => a - b)).toEqual(times);
  expect(records.at(-1)?.t).toBe((rows.at(-1)?.ts ?? 0) - (rows[0]?.ts ?? 0));
  // The viewer's reader takes it back as it is.
  expect(parseTrace(`${records.map((r) => JSON.stringify(r)).join('\n')}\n`)).toEqual(records);
}

/** What the viewer draws, by agent id rather than lane index, so two models compare. */
function drawn(model: ViewerModel) {
  const id = (lane: number): string | undefined => model.agents[lane]?.id;
  return {
    agents: model.agents.map((a) => ({
      id: a.id,
      name: a.name,
      depth: a.depth,
      parent: a.parent < 0 ? null : id(a.parent),
      children: a.children.map(id),
      status: a.status,
      outcome: a.outcome,
      lastState: a.lastState,
      requests: a.requests,
      usage: a.usage,
      bars: collapse(a.bars.map((b) => b.state)),
      delivered: a.delivery >= 0,
    })),
    arrows: model.arrows
      .map((a) => ({ kind: a.kind, from: id(a.from), to: id(a.to), outcome: a.outcome, tag: a.tag }))
      .sort((a, b) => `${a.kind} ${a.from} ${a.to}`.localeCompare(`${b.kind} ${b.from} ${b.to}`)),
    outcomes: model.outcomes,
  };
}

/** Whose record it is: the agent's, a delivery's parent's; the trace's own records are ''. */
function ownerOf(record: TraceRecord): string {
  return 'agent' in record ? record.agent : 'parent' in record ? record.parent : '';
}

/** Each agent's records in order, times left out. */
function perAgent(records: readonly TraceRecord[]): Map<string, unknown[]> {
  const byAgent = new Map<string, unknown[]>();
  for (const { t: _t, ...rest } of records) {
    const owner = ownerOf(rest as TraceRecord);
    byAgent.set(owner, [...(byAgent.get(owner) ?? []), rest]);
  }
  return byAgent;
}

/**
 * The journal pushed in pieces (row by row, and in chunks of 1–7 rows): after every piece, what
 * came out is, agent by agent, a beginning of what `traceFromJournal` makes of the whole journal
 * (nothing a later row would have changed), times never going back; at the end, all of it.
 */
function expectStreamsAsBatch(rows: readonly JournalRow[]): void {
  const batch = perAgent(traceFromJournal(rows, 'journal'));
  for (const chunking of ['row by row', 'in chunks'] as const) {
    const out: TraceRecord[] = [];
    const stream = new JournalTraceStream('journal', (record) => out.push(record));
    let i = 0;
    let chunk = 0;
    while (i < rows.length) {
      const size = chunking === 'row by row' ? 1 : 1 + ((chunk++ * 5) % 7);
      stream.push(rows.slice(i, i + size));
      i += size;
      for (const [agent, records] of perAgent(out))
        expect(records, `${chunking}, after ${i} rows, ${agent}`).toEqual(batch.get(agent)?.slice(0, records.length));
    }
    stream.end();
    expect(perAgent(out)).toEqual(batch);
    const times = out.map((r) => r.t);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
  }
}

// ---- Scenarios -------------------------------------------------------------------------------------

/**
 * root spawns alpha and beta and echoes; alpha spawns gamma and echoes, waits for it, is reminded
 * to reply and replies; gamma echoes and replies; beta ends without replying, is reminded, and
 * finishes without reply. The root acknowledges each delivery and stops at rest.
 */
const TREE: ScriptedProviderOptions['agents'] = {
  root: (_request, i) =>
    i === 0
      ? {
          text: 'Delegating.',
          calls: [
            { name: 'agent', input: { name: 'alpha', task: 'Survey A. '.repeat(60) } },
            { name: 'agent', input: { name: 'beta', task: 'Do B.' } },
            { name: 'echo', input: { text: 'root echo' } },
          ],
        }
      : { text: `ack ${i}` },
  alpha: [
    {
      calls: [
        { name: 'agent', input: { name: 'gamma', task: 'Do G.' } },
        { name: 'echo', input: { text: 'alpha echo' } },
      ],
    },
    { text: 'waiting for gamma' },
    { text: 'thinking it over' },
    { calls: [{ name: 'reply', input: { result: { found: ['a', 'g'] } } }] },
  ],
  gamma: [{ calls: [{ name: 'echo', input: { text: 'g' } }], delayMs: 5 }, { calls: [{ name: 'reply', input: { result: 'gamma says hi' } }] }],
  beta: [{ text: '' }, { text: 'still nothing' }],
};

describe('traceFromJournal', () => {
  it('derives from the journal of a durable tree the trace the live recorder wrote of it', async () => {
    const { live, derived, rows } = await runBoth(TREE);
    expectWellFormed(derived, rows);
    expectStreamsAsBatch(rows);

    // The same agents, with the same parents, names, depths and (clipped) tasks.
    const agents = agentsOf(derived);
    expect([...agents.keys()].sort()).toEqual(['root', 'root/alpha', 'root/alpha/gamma', 'root/beta']);
    expect(agents).toEqual(agentsOf(live));
    expect(agents.get('root/alpha')).toEqual({ parent: 'root', name: 'alpha', depth: 1, task: 'Survey A. '.repeat(50), taskChars: 600 });
    expect(agents.get('root/alpha/gamma')).toMatchObject({ parent: 'root/alpha', depth: 2 });

    // Each agent's final history, message by message (merges re-emit their index: beta's reminder joins its task).
    const histories = historiesOf(derived);
    expect(histories).toEqual(historiesOf(live));
    expect(of(derived, 'message').filter((r) => r.agent === 'root/beta' && r.index === 0)).toHaveLength(2);

    // The same deliveries, outcomes, responses and tool results.
    expect(deliveriesOf(derived)).toEqual(deliveriesOf(live));
    expect(deliveriesOf(derived)).toEqual([
      { parent: 'root', child: 'root/alpha', name: 'alpha', outcome: 'replied', text: '{\n  "found": [\n    "a",\n    "g"\n  ]\n}', reason: undefined },
      { parent: 'root', child: 'root/beta', name: 'beta', outcome: 'empty', text: '', reason: undefined },
      { parent: 'root/alpha', child: 'root/alpha/gamma', name: 'gamma', outcome: 'replied', text: 'gamma says hi', reason: undefined },
    ]);
    expect(endsOf(derived)).toEqual(endsOf(live));
    expect(endsOf(derived).get('root')).toEqual({ status: 'stopped', outcome: undefined, reason: undefined });
    expect(responsesOf(derived)).toEqual(responsesOf(live));
    // Only calls that ran report results: agent and reply are answered by the machine.
    expect(toolResultsOf(derived)).toEqual(toolResultsOf(live));
    expect([...toolResultsOf(derived).values()].flat()).toHaveLength(3);

    // The same state timeline: distinct states, and here every state record (steps, usage) too.
    expect(statesOf(derived)).toEqual(statesOf(live));
    expect(stateRecordsOf(derived)).toEqual(stateRecordsOf(live));
    expect(statesOf(derived).get('root/beta')).toEqual(['starting', 'streaming', 'nudged', 'streaming', 'finishedWithoutReply']);
    expect(statesOf(derived).get('root/alpha')).toEqual([
      'starting',
      'streaming',
      'dispatchingBatch',
      'streaming',
      'readyForUser',
      'streaming',
      'nudged',
      'streaming',
      'dispatchingBatch',
      'replied',
    ]);
  });

  it('feeds the viewer: every agent, spawn and delivery drawn as from the live trace', async () => {
    const { live, derived, store, runId } = await runBoth(TREE);
    const model = buildViewerModel(derived);
    expect(model.title).toBe('journal');
    expect(model.agents.map((a) => a.id)).toEqual(['root', 'root/alpha', 'root/alpha/gamma', 'root/beta']);
    for (const agent of model.agents) {
      expect(agent.bars.length).toBeGreaterThan(0);
      expect(agent.startRec).toBeGreaterThan(0);
      expect(agent.endRec).toBeGreaterThan(agent.startRec);
      expect(agent.end).toBeGreaterThanOrEqual(agent.start);
    }
    const lane = (id: string): number => model.agents.findIndex((a) => a.id === id);
    const arrows = model.arrows.map((a) => ({ kind: a.kind, from: a.from, to: a.to }));
    for (const [parent, child] of [
      ['root', 'root/alpha'],
      ['root', 'root/beta'],
      ['root/alpha', 'root/alpha/gamma'],
    ] as const) {
      expect(arrows).toContainEqual({ kind: 'spawn', from: lane(parent), to: lane(child) });
      expect(arrows).toContainEqual({ kind: 'delivery', from: lane(child), to: lane(parent) });
      expect(model.agents[lane(child)]?.parent).toBe(lane(parent));
    }
    expect(model.arrows).toHaveLength(6);
    expect(model.outcomes).toEqual({ replied: 2, empty: 1 });
    // Everything the viewer draws matches what it draws from the live trace (times aside).
    expect(drawn(model)).toEqual(drawn(buildViewerModel(live)));

    // Each bar lists the same messages (by index) as the live trace's bar does.
    const barMessages = (m: ViewerModel, records: readonly TraceRecord[]) =>
      m.agents.map((a) =>
        a.bars.map((b) =>
          b.items
            .flatMap((i) => {
              const r = records[i];
              return r?.kind === 'message' ? [r.index] : [];
            })
            .sort((x, y) => x - y),
        ),
      );
    expect(barMessages(model, derived)).toEqual(barMessages(buildViewerModel(live), live));

    // The page renders, and a run in a store is written straight to one.
    expect(renderViewerHtml(derived)).toContain('<html');
    const outFile = join(tempDir(), 'view', 'run.html');
    const written = await writeViewerForRun(store, runId, outFile);
    expect(written).toMatchObject({ outFile, agents: 4 });
    expect(existsSync(outFile)).toBe(true);
    await expect(writeViewerForRun(store, 'nope', outFile)).rejects.toThrow('no run with id nope');
  });

  it('tells the final state of each outcome and the transitions the journal does not write', async () => {
    // A cap of 3 requests per turn. hush replies with an empty payload (outcome empty, state
    // replied); pauser pauses once (its continuation merges into the same message); cut is cut off
    // mid-call (never run, truncation reminder merged into the results); bad calls echo with
    // invalid input (answered as the batch opens); slow is still streaming when the root hits the
    // cap, and is cancelled.
    const deliveries = (messages: readonly Message[]): number =>
      messages
        .flatMap((m) => (m.role === 'user' ? m.content : []))
        .reduce((n, b) => n + (b.type === 'text' ? (b.text.match(/\[agent '/g) ?? []).length : 0), 0);
    const { live, derived, rows } = await runBoth(
      {
        root: (request, i) => {
          if (i === 0) {
            return {
              calls: ['hush', 'pauser', 'cut', 'bad', 'slow'].map((name) => ({ name: 'agent', input: { name, task: `Be ${name}.` } })),
            };
          }
          return deliveries(request.messages) < 4 ? { text: `ack ${i}` } : { calls: [{ name: 'echo', input: { text: `loop ${i}` } }] };
        },
        hush: [{ calls: [{ name: 'reply', input: { result: '' } }] }],
        pauser: [
          { text: 'part one', stopReason: 'pause_turn' },
          { text: ' part two', calls: [{ name: 'reply', input: { result: 'paused once' } }] },
        ],
        cut: [{ calls: [{ name: 'echo', input: { text: 'long' }, cutOff: true }] }, { calls: [{ name: 'reply', input: { result: 'recovered' } }] }],
        bad: [{ calls: [{ name: 'echo', input: { text: 5 } }] }, { calls: [{ name: 'reply', input: { result: 'fixed' } }] }],
        slow: [{ text: 'never', delayMs: 20_000 }],
      },
      { maxSteps: 3 },
    );
    expectWellFormed(derived, rows);
    expectStreamsAsBatch(rows);
    expect(agentsOf(derived)).toEqual(agentsOf(live));
    expect(historiesOf(derived)).toEqual(historiesOf(live));
    expect(deliveriesOf(derived)).toEqual(deliveriesOf(accepted(live)));
    expect(deliveriesOf(live).filter((d) => d.child === 'root/slow')).toEqual([expect.objectContaining({ outcome: 'cancelled' })]);
    expect(endsOf(derived)).toEqual(endsOf(live));
    expect(responsesOf(derived)).toEqual(responsesOf(live));
    expect(toolResultsOf(derived)).toEqual(toolResultsOf(live));
    expect(statesOf(derived)).toEqual(statesOf(live));
    expect(stateRecordsOf(derived)).toEqual(stateRecordsOf(live));

    const states = statesOf(derived);
    expect(states.get('root/hush')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'replied']);
    expect(endsOf(derived).get('root/hush')).toMatchObject({ status: 'done', outcome: 'empty' });
    expect(
      stateRecordsOf(derived)
        .get('root/pauser')
        ?.map((s) => `${s.state}:${s.steps}`),
    ).toEqual(['starting:0', 'streaming:1', 'streaming:2', 'dispatchingBatch:2', 'replied:2']);
    expect(
      of(derived, 'message')
        .filter((r) => r.agent === 'root/pauser' && r.index === 1)
        .map((r) => r.message.content.length),
    ).toEqual([1, 3]);
    expect(states.get('root/cut')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'nudged', 'streaming', 'dispatchingBatch', 'replied']);
    expect(of(derived, 'response').find((r) => r.agent === 'root/cut')?.toolCalls).toEqual([{ id: expect.any(String), name: 'echo', complete: false }]);
    expect(states.get('root/bad')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'dispatchingBatch', 'replied']);
    expect(toolResultsOf(derived).get('root/bad')).toBeUndefined();
    expect(states.get('root/slow')).toEqual(['starting', 'streaming', 'cancelled']);
    expect(endsOf(derived).get('root/slow')).toEqual({ status: 'done', outcome: 'cancelled', reason: 'parent hit the step cap' });
    expect(states.get('root')?.slice(-2)).toEqual(['dispatchingBatch', 'capped']);
    expect(endsOf(derived).get('root')).toEqual({ status: 'done', outcome: 'capped', reason: 'step cap of 3 reached' });

    const model = buildViewerModel(derived);
    expect(drawn(model)).toEqual(drawn(buildViewerModel(accepted(live))));
    expect(model.arrows.filter((a) => a.kind === 'spawn')).toHaveLength(5);
    expect(model.arrows.filter((a) => a.kind === 'delivery')).toHaveLength(4);
  });

  it('follows a run across an interrupt and a resume: the undone cancellations are events, not ends', async () => {
    const store = new MemoryRunStore();
    const tools: readonly Tool[] = [echo];
    const first = liveRecorder();
    const provider = new ScriptedProvider({
      agents: {
        root: [{ calls: [{ name: 'agent', input: { name: 'worker', task: 'Work.' } }] }, { text: 'waiting' }],
        worker: [{ text: 'never', delayMs: 20_000 }],
      },
    });
    const options = (recorder: TraceRecorder): DurableRunOptions => ({ store, actor: { inspect: (event) => recorder.inspect(event) } });
    const run = await startRun('Coordinate the work.', { provider, tools }, options(first.recorder));
    await until(() => run.actor.getSnapshot().value === 'readyForUser' && provider.requestsOf('root/worker').length === 1);
    run.interrupt();
    expect((await run.result).status).toBe('interrupted');
    const live1 = first.read();

    const second = liveRecorder();
    const resumed = await resumeRun(
      run.id,
      {
        provider: new ScriptedProvider({ agents: { root: [{ text: 'thanks' }], worker: [{ calls: [{ name: 'reply', input: { result: 'worked' } }] }] } }),
        tools,
      },
      options(second.recorder),
    );
    if ('finished' in resumed) throw new Error('the run should have been resumable');
    expect((await resumed.result).status).toBe('done');
    const live2 = second.read();

    const rows = await store.journal(run.id);
    const derived = traceFromJournal(rows, 'journal');
    expectWellFormed(derived, rows);
    expectStreamsAsBatch(rows);
    expect(
      of(derived, 'event')
        .filter((e) => e.agent === 'root' && (e.type === 'interrupt' || e.type === 'resume'))
        .map((e) => e.type),
    ).toEqual(['interrupt', 'resume']);
    // Each agent starts once and ends once, as the resume left it; the interrupt's cancellations are markers.
    expect(of(derived, 'agent.start').map((r) => r.agent)).toEqual(['root', 'root/worker']);
    expect(endsOf(derived)).toEqual(
      new Map([
        ['root/worker', { status: 'done', outcome: 'replied', reason: undefined }],
        ['root', { status: 'stopped', outcome: undefined, reason: undefined }],
      ]),
    );
    expect(
      of(derived, 'event')
        .filter((e) => e.type === 'cancel')
        .map((e) => e.agent)
        .sort(),
    ).toEqual(['root', 'root/worker']);
    expect(endsOf(live1).get('root/worker')).toMatchObject({ outcome: 'cancelled' });
    // The one delivery is the resumed worker's.
    expect(deliveriesOf(derived)).toEqual(deliveriesOf(live2));
    expect(deliveriesOf(derived)).toHaveLength(1);
    // The histories are those the second process ended with (it started from the restored ones).
    expect(historiesOf(derived)).toEqual(historiesOf(live2));
    // States: the first process's (less the undone cancellation), then the second's (no `resuming`: it is left at once).
    const expected = (agent: string): string[] =>
      collapse([...(statesOf(live1).get(agent) ?? []).filter((s) => s !== 'cancelled'), ...(statesOf(live2).get(agent) ?? [])]);
    expect(statesOf(derived)).toEqual(
      new Map([
        ['root', expected('root')],
        ['root/worker', expected('root/worker')],
      ]),
    );
    // Every state record too: the resumed state is written again as the second process starts
    // (its first snapshot), with the steps and usage the session was restored with.
    const records = (agent: string) => [
      ...(stateRecordsOf(live1).get(agent) ?? []).filter((s) => s.state !== 'cancelled'),
      ...(stateRecordsOf(live2).get(agent) ?? []),
    ];
    expect(stateRecordsOf(derived)).toEqual(
      new Map([
        ['root', records('root')],
        ['root/worker', records('root/worker')],
      ]),
    );
    expect(
      stateRecordsOf(derived)
        .get('root/worker')
        ?.map((s) => `${s.state}:${s.steps}`),
    ).toEqual(['starting:0', 'streaming:1', 'streaming:1', 'dispatchingBatch:1', 'replied:1']);

    const model = buildViewerModel(derived);
    expect(model.agents.map((a) => [a.id, a.status, a.outcome ?? null])).toEqual([
      ['root', 'stopped', null],
      ['root/worker', 'done', 'replied'],
    ]);
    expect(model.arrows.map((a) => a.kind).sort()).toEqual(['delivery', 'spawn']);
  });

  it('an interrupt no resume followed: cancellations mid-batch are real ends, the batch closed by the cancel', async () => {
    const slow = defineTool({
      name: 'slow',
      description: 'Waits until cancelled.',
      input: z.object({}),
      run: (_input, { signal }) => new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(new Error('aborted')), { once: true })),
    });
    const { recorder, read } = liveRecorder();
    const store = new MemoryRunStore();
    const provider = new ScriptedProvider({
      agents: {
        root: [{ calls: [{ name: 'agent', input: { name: 'worker', task: 'Work.' } }] }, { text: 'waiting' }],
        worker: [
          {
            calls: [
              { name: 'echo', input: { text: 'first' } },
              { name: 'slow', input: {} },
            ],
          },
        ],
      },
    });
    const run = await startRun('Coordinate the work.', { provider, tools: [echo, slow] }, { store, actor: { inspect: (event) => recorder.inspect(event) } });
    await until(
      () =>
        run.actor.getSnapshot().value === 'readyForUser' && store.journal(run.id).some((row) => row.session === 'root/worker' && row.record.type === 'tool'),
    );
    run.interrupt();
    expect((await run.result).status).toBe('interrupted');
    const live = read();
    const rows = await store.journal(run.id);
    const derived = traceFromJournal(rows, 'journal');
    expectWellFormed(derived, rows);
    expectStreamsAsBatch(rows);

    expect(agentsOf(derived)).toEqual(agentsOf(live));
    expect(historiesOf(derived)).toEqual(historiesOf(live));
    expect(deliveriesOf(derived)).toEqual(deliveriesOf(accepted(live)));
    expect(deliveriesOf(derived)).toEqual([]);
    expect(endsOf(derived)).toEqual(endsOf(live));
    expect(endsOf(derived).get('root')).toEqual({ status: 'done', outcome: 'cancelled', reason: 'interrupted' });
    expect(endsOf(derived).get('root/worker')).toEqual({ status: 'done', outcome: 'cancelled', reason: 'parent cancelled' });
    expect(responsesOf(derived)).toEqual(responsesOf(live));
    expect(toolResultsOf(derived)).toEqual(toolResultsOf(live));
    expect(stateRecordsOf(derived)).toEqual(stateRecordsOf(live));
    expect(statesOf(derived).get('root/worker')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'cancelled']);
    // The cancel answered the call still running in the history.
    const last = historiesOf(derived).get('root/worker')?.at(-1);
    expect(last?.content.map((b) => (b.type === 'tool_result' ? b.content : b.type))).toEqual(['first', 'cancelled']);
    expect(of(derived, 'event').map((e) => `${e.agent} ${e.type}`)).toEqual(expect.arrayContaining(['root interrupt', 'root cancel', 'root/worker cancel']));
    expect(drawn(buildViewerModel(derived))).toEqual(drawn(buildViewerModel(accepted(live))));
  });

  it('prices a stored run in its page with the model it was started with', async () => {
    const store = new MemoryRunStore();
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'done', usage: { inputTokens: 2_000, outputTokens: 1_000 } }] } });
    const run = await startRun('Price it.', { provider }, { store, record: { model: 'claude-haiku-4-5' } });
    await run.result;
    const outFile = join(tempDir(), 'view', 'priced.html');
    await writeViewerForRun(store, run.id, outFile);
    const match = /<script type="application\/json" id="exarch-trace">([\s\S]*?)<\/script>/.exec(readFileSync(outFile, 'utf8'));
    const records = (JSON.parse(match?.[1] ?? '{}') as { records: TraceRecord[] }).records;
    expect(records[0]).toMatchObject({ kind: 'trace.start', model: 'claude-haiku-4-5' });
    // Haiku 4.5: $1 per million input tokens, $5 per million output tokens.
    expect(buildViewerModel(records).cost).toBeCloseTo(2_000 / 1e6 + (1_000 * 5) / 1e6, 12);
  });

  it('a batch that waits for its sub-agents (wait_for_agents) drains into the next request; one cancelled while waiting does not', async () => {
    const waiting: ScriptedProviderOptions['agents'] = {
      root: [
        {
          calls: [
            { name: 'agent', input: { name: 'a', task: 'A' } },
            { name: 'agent', input: { name: 'b', task: 'B' } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { text: 'done' },
      ],
      a: [{ calls: [{ name: 'reply', input: { result: 'a' } }], delayMs: 20 }],
      b: [{ calls: [{ name: 'reply', input: { result: 'b' } }] }],
    };
    const { live, derived, rows } = await runBoth(waiting);
    expectWellFormed(derived, rows);
    expectStreamsAsBatch(rows);
    expect(stateRecordsOf(derived)).toEqual(stateRecordsOf(live));
    expect(statesOf(derived).get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'waitingForAgents', 'streaming', 'readyForUser']);

    const { recorder, read } = liveRecorder();
    const store = new MemoryRunStore();
    const provider = new ScriptedProvider({ agents: { ...waiting, a: [{ text: 'never', delayMs: 20_000 }] } });
    const run = await startRun('Coordinate the work.', { provider, tools: [echo] }, { store, actor: { inspect: (event) => recorder.inspect(event) } });
    // Once b has reported (a cancel between its reply's batch opening and its drain reads otherwise: see traceFromJournal).
    await until(
      () => run.actor.getSnapshot().value === 'waitingForAgents' && store.journal(run.id).some((row) => row.session === 'root' && row.record.type === 'inbox'),
    );
    run.interrupt();
    await run.result;
    const cancelled = traceFromJournal(await store.journal(run.id), 'journal');
    expectStreamsAsBatch(await store.journal(run.id));
    expect(stateRecordsOf(cancelled)).toEqual(stateRecordsOf(read()));
    expect(statesOf(cancelled).get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'waitingForAgents', 'cancelled']);
  });

  it('is a valid, empty trace for an empty journal', () => {
    const records = traceFromJournal([], 'journal');
    expect(records.map((r) => r.kind)).toEqual(['trace.start', 'trace.end']);
    expect(buildViewerModel(records).agents).toEqual([]);
  });
});

async function until(condition: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out waiting for the run');
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}
