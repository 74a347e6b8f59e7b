import { renderAgentResult } from '../../src/engine/inbox.js';
import type { TraceRecord, TraceStatechart } from '../../src/watch/trace/format.js';
import type { AgentOutcome, Message, Usage } from '../../src/engine/types.js';

/**
 * The viewer's model as it was computed before the page built it record by record: all records at
 * once, in one pass per concern. Kept as an oracle for `ViewerModelBuilder`, which must give the
 * same model for every prefix of a trace (test/e2e/watch/viewer.test.ts); it is not used by exarch itself.
 */
interface ViewerBar {
  readonly state: string;
  readonly t0: number;
  /** Until the agent's next `state` record, its `agent.end`, or the end of the trace. */
  readonly t1: number;
  readonly final: boolean;
  /** Model requests in the turn when the state was entered. */
  readonly steps: number;
  /** The index of its `state` record. */
  readonly rec: number;
  /**
   * The records of this interval, in trace order: messages committed in it (the latest record per
   * message index), responses, tool results, events, spawns it made, deliveries it received.
   */
  readonly items: readonly number[];
}

interface ViewerAgent {
  readonly id: string;
  readonly name: string;
  /** Depth in the displayed tree (0 for a root). */
  readonly depth: number;
  /** Index of the parent in `agents`, -1 for a root. */
  readonly parent: number;
  readonly children: readonly number[];
  readonly start: number;
  /** When the lane closes: `agent.end`, else the end of the trace. */
  readonly end: number;
  /** `running` when the trace has no `agent.end` for it. */
  readonly status: 'done' | 'stopped' | 'error' | 'running';
  readonly outcome?: AgentOutcome;
  readonly reason?: string;
  /** Its last state. */
  readonly lastState: string;
  /** Model requests it made (each `streaming` entry is one). */
  readonly requests: number;
  readonly usage: Usage;
  /** Index of its `agent.start` record (-1 if the trace has none). */
  readonly startRec: number;
  readonly endRec: number;
  readonly bars: readonly ViewerBar[];
  /** Indices of its `event` records (drawn as markers on its lane). */
  readonly events: readonly number[];
  /** Index of the `delivery` record that carried its result to its parent, or -1. */
  readonly delivery: number;
}

interface ViewerArrow {
  readonly kind: 'spawn' | 'delivery';
  /** Lane indices: spawn goes parent → child, delivery child → parent. */
  readonly from: number;
  readonly to: number;
  readonly t: number;
  readonly rec: number;
  readonly outcome?: AgentOutcome;
  /** A delivery's inbox tag, as the parent reads it: `[agent 'explorer' replied]`. */
  readonly tag?: string;
}

export interface ViewerModel {
  readonly title: string;
  readonly startedAt: string;
  readonly t0: number;
  readonly t1: number;
  readonly statechart: TraceStatechart | null;
  /** Agents in display order: each root, then its subtree depth-first, siblings by start. */
  readonly agents: readonly ViewerAgent[];
  readonly arrows: readonly ViewerArrow[];
  readonly outcomes: Readonly<Partial<Record<AgentOutcome, number>>>;
}

const ZERO_USAGE: Usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };

interface Draft {
  id: string;
  name: string;
  parentId: string | null;
  firstSeen: number;
  start: number;
  startRec: number;
  end: number | null;
  endRec: number;
  status: ViewerAgent['status'];
  outcome?: AgentOutcome;
  reason?: string;
  /** Indices of its `state` records. */
  states: number[];
  /** Records that go into its bars' details, in trace order. */
  items: number[];
  events: number[];
  delivery: number;
  usage: Usage;
  requests: number;
}

/** The first line of what the parent's inbox shows for a delivery. */
function inboxTag(record: Extract<TraceRecord, { kind: 'delivery' }>): string {
  const rendered = renderAgentResult({
    name: record.name,
    outcome: record.outcome,
    text: '',
    usage: ZERO_USAGE,
    ...(record.reason === undefined ? {} : { reason: record.reason }),
  });
  return rendered.split('\n')[0] ?? rendered;
}

/** A user message of plain text (a task, an inbox turn, a reminder) rather than tool results. */
function isUserText(message: Message): boolean {
  return message.role === 'user' && message.content.every((block) => block.type === 'text');
}

function agentOf(record: TraceRecord): string | undefined {
  switch (record.kind) {
    case 'agent.start':
    case 'state':
    case 'message':
    case 'response':
    case 'tool.result':
    case 'event':
    case 'agent.end':
      return record.agent;
    default:
      return undefined;
  }
}

export function batchViewerModel(records: readonly TraceRecord[], title?: string): ViewerModel {
  const drafts = new Map<string, Draft>();
  let startRecord: Extract<TraceRecord, { kind: 'trace.start' }> | undefined;
  let t1 = 0;
  const arrows: { kind: 'spawn' | 'delivery'; from: string; to: string; t: number; rec: number; outcome?: AgentOutcome; tag?: string }[] = [];

  const draft = (id: string, at: number, t: number): Draft => {
    let found = drafts.get(id);
    if (!found) {
      const cut = id.lastIndexOf('/');
      found = {
        id,
        name: id.slice(cut + 1),
        parentId: cut > 0 ? id.slice(0, cut) : null,
        firstSeen: at,
        start: t,
        startRec: -1,
        end: null,
        endRec: -1,
        status: 'running',
        states: [],
        items: [],
        events: [],
        delivery: -1,
        usage: ZERO_USAGE,
        requests: 0,
      };
      drafts.set(id, found);
    }
    return found;
  };

  records.forEach((record, index) => {
    if (Number.isFinite(record.t)) t1 = Math.max(t1, record.t);
    if (record.kind === 'trace.start') {
      startRecord ??= record;
      return;
    }
    if (record.kind === 'delivery') {
      draft(record.parent, index, record.t).items.push(index);
      const child = drafts.get(record.child);
      if (child) child.delivery = index;
      arrows.push({ kind: 'delivery', from: record.child, to: record.parent, t: record.t, rec: index, outcome: record.outcome, tag: inboxTag(record) });
      return;
    }
    const id = agentOf(record);
    if (id === undefined) return;
    const agent = draft(id, index, record.t);
    switch (record.kind) {
      case 'agent.start':
        agent.name = record.name;
        agent.parentId = record.parent;
        agent.start = record.t;
        agent.startRec = index;
        if (record.parent !== null) {
          draft(record.parent, index, record.t).items.push(index);
          arrows.push({ kind: 'spawn', from: record.parent, to: id, t: record.t, rec: index });
        }
        break;
      case 'state':
        agent.states.push(index);
        agent.usage = record.usage;
        if (record.state === 'streaming') agent.requests++;
        break;
      case 'agent.end':
        agent.end = record.t;
        agent.endRec = index;
        agent.status = record.status;
        if (record.outcome !== undefined) agent.outcome = record.outcome;
        if (record.reason !== undefined) agent.reason = record.reason;
        break;
      case 'event':
        agent.events.push(index);
        agent.items.push(index);
        break;
      default:
        agent.items.push(index);
    }
  });

  const finals = new Set((startRecord?.statechart.states ?? []).filter((s) => s.final).map((s) => s.id));
  if (finals.size === 0) for (const id of ['replied', 'finishedWithoutReply', 'capped', 'failed', 'cancelled']) finals.add(id);

  // Display order: roots, then each subtree depth-first, siblings in the order they started.
  const all = [...drafts.values()].sort((a, b) => (a.startRec < 0 ? a.firstSeen : a.startRec) - (b.startRec < 0 ? b.firstSeen : b.startRec));
  const childrenOf = new Map<string, Draft[]>();
  const roots: Draft[] = [];
  for (const agent of all) {
    const parent = agent.parentId === null ? undefined : drafts.get(agent.parentId);
    if (parent && parent !== agent) {
      const list = childrenOf.get(parent.id) ?? [];
      list.push(agent);
      childrenOf.set(parent.id, list);
    } else roots.push(agent);
  }
  const order: { draft: Draft; depth: number }[] = [];
  const visit = (agent: Draft, depth: number): void => {
    order.push({ draft: agent, depth });
    for (const child of childrenOf.get(agent.id) ?? []) visit(child, depth + 1);
  };
  for (const root of roots) visit(root, 0);
  const laneOf = new Map(order.map(({ draft: agent }, index) => [agent.id, index]));

  const agents: ViewerAgent[] = order.map(({ draft: agent, depth }) => {
    const end = agent.end ?? t1;
    const bars = barsOf(records, agent, end, finals);
    const last = bars[bars.length - 1];
    return {
      id: agent.id,
      name: agent.name,
      depth,
      parent: agent.parentId === null ? -1 : (laneOf.get(agent.parentId) ?? -1),
      children: (childrenOf.get(agent.id) ?? []).map((child) => laneOf.get(child.id) ?? -1),
      start: agent.start,
      end,
      status: agent.status,
      ...(agent.outcome === undefined ? {} : { outcome: agent.outcome }),
      ...(agent.reason === undefined ? {} : { reason: agent.reason }),
      lastState: last?.state ?? '',
      requests: agent.requests,
      usage: agent.usage,
      startRec: agent.startRec,
      endRec: agent.endRec,
      bars,
      events: agent.events,
      delivery: agent.delivery,
    };
  });

  const outcomes: Partial<Record<AgentOutcome, number>> = {};
  for (const agent of agents) if (agent.outcome !== undefined) outcomes[agent.outcome] = (outcomes[agent.outcome] ?? 0) + 1;

  return {
    title: title ?? startRecord?.title ?? 'exarch trace',
    startedAt: startRecord?.startedAt ?? '',
    t0: 0,
    t1,
    statechart: startRecord?.statechart ?? null,
    agents,
    arrows: arrows.flatMap((arrow) => {
      const from = laneOf.get(arrow.from);
      const to = laneOf.get(arrow.to);
      if (from === undefined || to === undefined) return [];
      return [{ ...arrow, from, to }];
    }),
    outcomes,
  };
}

/**
 * An agent's state intervals, each with the records that happened in it. A record belongs to the
 * interval of the last `state` record before it, with one exception: a plain-text user message
 * (the task, an inbox turn, a reminder) written just before a `state` record was committed by the
 * transition into that state, and is what that state acts on, so it goes to the next interval.
 */
function barsOf(records: readonly TraceRecord[], agent: Draft, end: number, finals: ReadonlySet<string>): ViewerBar[] {
  const { states } = agent;
  if (states.length === 0) return [];
  const buckets: number[][] = states.map(() => []);
  let bar = 0;
  const { items } = agent;
  for (let i = 0; i < items.length; i++) {
    const index = items[i] ?? 0;
    while (bar + 1 < states.length && (states[bar + 1] ?? Infinity) < index) bar++;
    let target = bar;
    const record = records[index];
    if (record?.kind === 'message' && isUserText(record.message)) {
      // Is the agent's next record (of any kind) a state record? Then this message opened it.
      const nextState = (states[bar] ?? 0) > index ? bar : bar + 1;
      const nextStateRec = states[nextState];
      if (nextStateRec !== undefined && nextStateRec < (items[i + 1] ?? Infinity)) target = nextState;
    }
    buckets[target]?.push(index);
  }

  return states.map((rec, i) => {
    const record = records[rec] as Extract<TraceRecord, { kind: 'state' }>;
    const next = states[i + 1];
    const nextRecord = next === undefined ? undefined : records[next];
    const t1 = nextRecord ? nextRecord.t : Math.max(end, record.t);
    return {
      state: record.state,
      t0: record.t,
      t1,
      final: finals.has(record.state),
      steps: record.steps,
      rec,
      items: latestMessages(records, buckets[i] ?? []),
    };
  });
}

/** Keeps only the latest `message` record per message index; other records pass. */
function latestMessages(records: readonly TraceRecord[], indices: readonly number[]): number[] {
  const latest = new Map<number, number>();
  for (const index of indices) {
    const record = records[index];
    if (record?.kind === 'message') latest.set(record.index, index);
  }
  return indices.filter((index) => {
    const record = records[index];
    return record?.kind !== 'message' || latest.get(record.index) === index;
  });
}
