import type { TraceRecord, TraceStatechart } from '../trace/format.js';
import type { AgentOutcome, AgentResult, Message, Usage } from '../../engine/types.js';

/**
 * What the viewer draws, computed from a trace's records: the agent tree in display order, each
 * agent's state bars on the shared time axis, the spawn and delivery arrows between lanes, and
 * which records belong to which bar. Records are referred to by their index in the trace, so the
 * page keeps one copy of them and builds a bar's details only when it is clicked.
 *
 * This file runs in two places: in Node (`buildViewerModel`, tests) and, compiled as it is, in the
 * viewer page, which builds the model from the records it is sent, live. So it imports nothing
 * but types, and what it needs of the rest of exarch (the inbox tag, prices) is passed in.
 */
export interface ViewerBar {
  readonly state: string;
  readonly t0: number;
  /** Until the agent's next `state` record, its `agent.end`, or the end of the trace. */
  readonly t1: number;
  readonly final: boolean;
  /** Model requests in the turn when the state was entered. */
  readonly steps: number;
  /** The agent's model requests so far, over its whole life: its step number as the CLI counts them. */
  readonly requests: number;
  /** The index of its `state` record. */
  readonly rec: number;
  /**
   * The records of this interval, in trace order: messages committed in it (the latest record per
   * message index), responses, tool results, events, spawns it made, deliveries it received.
   */
  readonly items: readonly number[];
  /** US$ of the model responses that arrived in it, at list prices; undefined when the model has no known price. */
  readonly cost: number | undefined;
}

export interface ViewerAgent {
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
  /** Model requests it made. */
  readonly requests: number;
  readonly usage: Usage;
  /** The model its requests asked for, when the trace says (its profile's, else the run's). */
  readonly model: string | undefined;
  /** US$ of its own tokens at list prices; undefined when the model has no known price. */
  readonly cost: number | undefined;
  /** Index of its `agent.start` record (-1 if the trace has none). */
  readonly startRec: number;
  readonly endRec: number;
  readonly bars: readonly ViewerBar[];
  /** Indices of its `event` records (drawn as markers on its lane). */
  readonly events: readonly number[];
  /** Index of the `delivery` record that carried its result to its parent, or -1. */
  readonly delivery: number;
}

export interface ViewerArrow {
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
  /** US$ of every agent's tokens; undefined when no agent's model has a known price. */
  readonly cost: number | undefined;
}

/** What the builder needs of the rest of exarch. */
export interface ViewerModelBuilderOptions {
  /** CONTRACT §4's rendering of a finished child (`renderAgentResult`): its first line is a delivery's tag. */
  readonly renderResult: (result: AgentResult) => string;
  /** US$ for a model's usage (`estimateCost`), undefined for a model whose price is not known. */
  readonly price: (model: string, usage: Usage) => number | undefined;
  /** Overrides the trace's own title. */
  readonly title?: string;
}

const ZERO_USAGE: Usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
const DEFAULT_FINALS = ['replied', 'finishedWithoutReply', 'capped', 'failed', 'cancelled'];

type Mutable<T> = { -readonly [K in keyof T]: T[K] };
type Bar = Mutable<ViewerBar> & { items: number[] };

/** Records of one interval, and where each message index sits among them (the latest record per index is kept). */
interface Bucket {
  readonly items: number[];
  readonly messages: Map<number, number>;
}

interface Track {
  readonly id: string;
  name: string;
  parentId: string | null;
  readonly firstSeen: number;
  start: number;
  startRec: number;
  end: number | null;
  endRec: number;
  status: ViewerAgent['status'];
  outcome?: AgentOutcome;
  reason?: string;
  model: string | undefined;
  readonly bars: Bar[];
  /** One bucket per bar; the first also takes what came before the first `state` record. */
  readonly buckets: Bucket[];
  /** A plain-text user message just placed in the last bar that opens the next one if the agent's next record is a `state`. */
  pending: { readonly rec: number; readonly index: number; readonly replaced: { readonly pos: number; readonly rec: number } | undefined } | undefined;
  readonly events: number[];
  delivery: number;
  usage: Usage;
  requests: number;
  /** US$ of responses that came before its first `state` record (they belong to its first bar). */
  earlyCost: number | undefined;
}

interface Arrow {
  readonly kind: 'spawn' | 'delivery';
  readonly from: string;
  readonly to: string;
  readonly t: number;
  readonly rec: number;
  readonly outcome?: AgentOutcome;
  readonly tag?: string;
}

/** A user message of plain text (a task, an inbox turn, a reminder) rather than tool results. */
function isUserText(message: Message): boolean {
  return message.role === 'user' && message.content.every((block) => block.type === 'text');
}

/**
 * Builds the viewer's model record by record, in trace order, in time linear in the records: each
 * `add` is amortised O(1), and `model()` costs O(agents + arrows), so a page following a live run
 * can ask for it on every frame.
 *
 * A record belongs to the interval (bar) of its agent's last `state` record before it, with one
 * exception: a plain-text user message (the task, an inbox turn, a reminder) written just before
 * a `state` record was committed by the transition into that state, and is what that state acts
 * on, so it goes to the next interval. Within an interval a message index is shown once, at its
 * latest record (a later append merged into it).
 */
export class ViewerModelBuilder {
  private readonly tracks = new Map<string, Track>();
  private readonly arrows: Arrow[] = [];
  private startRecord: Extract<TraceRecord, { kind: 'trace.start' }> | undefined;
  private finals: ReadonlySet<string> = new Set(DEFAULT_FINALS);
  private t1 = 0;
  private count = 0;
  /** Display order, rebuilt when an agent appears or its place in the tree changes. */
  private order: { readonly track: Track; readonly depth: number }[] = [];
  private children = new Map<string, Track[]>();
  private laneOf = new Map<string, number>();
  private orderStale = false;

  constructor(private readonly options: ViewerModelBuilderOptions) {}

  /** Records added so far: the index the next one gets. */
  get size(): number {
    return this.count;
  }

  /** The next record of the trace. */
  add(record: TraceRecord): void {
    const index = this.count++;
    if (Number.isFinite(record.t)) this.t1 = Math.max(this.t1, record.t);
    switch (record.kind) {
      case 'trace.start':
        if (!this.startRecord) {
          this.startRecord = record;
          const finals = record.statechart.states.filter((s) => s.final).map((s) => s.id);
          if (finals.length > 0) this.finals = new Set(finals);
        }
        return;
      case 'trace.end':
        return;
      case 'delivery': {
        this.place(this.track(record.parent, index, record.t), index, record);
        const child = this.tracks.get(record.child);
        if (child) child.delivery = index;
        this.arrows.push({ kind: 'delivery', from: record.child, to: record.parent, t: record.t, rec: index, outcome: record.outcome, tag: this.tag(record) });
        return;
      }
      case 'agent.start': {
        const agent = this.track(record.agent, index, record.t);
        agent.name = record.name;
        agent.parentId = record.parent;
        agent.start = record.t;
        agent.startRec = index;
        agent.model = record.model;
        this.orderStale = true;
        if (record.parent !== null) {
          this.place(this.track(record.parent, index, record.t), index, record);
          this.arrows.push({ kind: 'spawn', from: record.parent, to: record.agent, t: record.t, rec: index });
        }
        return;
      }
      case 'state':
        this.enter(this.track(record.agent, index, record.t), index, record);
        return;
      case 'agent.end': {
        const agent = this.track(record.agent, index, record.t);
        agent.end = record.t;
        agent.endRec = index;
        agent.status = record.status;
        if (record.outcome !== undefined) agent.outcome = record.outcome;
        if (record.reason !== undefined) agent.reason = record.reason;
        return;
      }
      case 'event': {
        const agent = this.track(record.agent, index, record.t);
        agent.events.push(index);
        this.place(agent, index, record);
        return;
      }
      case 'message':
      case 'response':
      case 'tool.result':
        this.place(this.track(record.agent, index, record.t), index, record);
        return;
      default:
        return;
    }
  }

  /**
   * The model of the records added so far. It shares the builder's arrays (bars, items, events):
   * what is added later shows in them, so take a new model after adding.
   *
   * @param now for a run still going: the time (ms since the trace started) that its open
   *   intervals last until, when it is later than its last record.
   */
  model(now?: number): ViewerModel {
    if (this.orderStale) this.layOut();
    const { laneOf } = this;
    const t1 = now === undefined ? this.t1 : Math.max(this.t1, now);
    let total: number | undefined;
    const outcomes: Partial<Record<AgentOutcome, number>> = {};
    const agents = this.order.map(({ track, depth }): ViewerAgent => {
      const end = track.end ?? t1;
      const last = track.bars[track.bars.length - 1];
      if (last) last.t1 = Math.max(end, last.t0);
      const model = this.modelOf(track);
      const cost = model === undefined ? undefined : this.options.price(model, track.usage);
      if (cost !== undefined) total = (total ?? 0) + cost;
      if (track.outcome !== undefined) outcomes[track.outcome] = (outcomes[track.outcome] ?? 0) + 1;
      return {
        id: track.id,
        name: track.name,
        depth,
        parent: track.parentId === null ? -1 : (laneOf.get(track.parentId) ?? -1),
        children: (this.children.get(track.id) ?? []).map((child) => laneOf.get(child.id) ?? -1),
        start: track.start,
        end,
        status: track.status,
        ...(track.outcome === undefined ? {} : { outcome: track.outcome }),
        ...(track.reason === undefined ? {} : { reason: track.reason }),
        lastState: last?.state ?? '',
        requests: track.requests,
        usage: track.usage,
        model,
        cost,
        startRec: track.startRec,
        endRec: track.endRec,
        bars: track.bars,
        events: track.events,
        delivery: track.delivery,
      };
    });
    const arrows: ViewerArrow[] = [];
    for (const arrow of this.arrows) {
      const from = laneOf.get(arrow.from);
      const to = laneOf.get(arrow.to);
      if (from !== undefined && to !== undefined) arrows.push({ ...arrow, from, to });
    }
    const start = this.startRecord;
    return {
      title: this.options.title ?? start?.title ?? 'exarch trace',
      startedAt: start?.startedAt ?? '',
      t0: 0,
      t1,
      statechart: start?.statechart ?? null,
      agents,
      arrows,
      outcomes,
      cost: total,
    };
  }

  private modelOf(track: Track): string | undefined {
    return track.model ?? this.startRecord?.model;
  }

  private tag(record: Extract<TraceRecord, { kind: 'delivery' }>): string {
    const rendered = this.options.renderResult({
      name: record.name,
      outcome: record.outcome,
      text: '',
      usage: ZERO_USAGE,
      ...(record.reason === undefined ? {} : { reason: record.reason }),
    });
    return rendered.split('\n')[0] ?? rendered;
  }

  private track(id: string, index: number, t: number): Track {
    let found = this.tracks.get(id);
    if (!found) {
      const cut = id.lastIndexOf('/');
      found = {
        id,
        name: id.slice(cut + 1),
        parentId: cut > 0 ? id.slice(0, cut) : null,
        firstSeen: index,
        start: t,
        startRec: -1,
        end: null,
        endRec: -1,
        status: 'running',
        model: undefined,
        bars: [],
        buckets: [{ items: [], messages: new Map() }],
        pending: undefined,
        events: [],
        delivery: -1,
        usage: ZERO_USAGE,
        requests: 0,
        earlyCost: undefined,
      };
      this.tracks.set(id, found);
      this.orderStale = true;
    }
    return found;
  }

  /** A record of `agent`'s current interval (or, before its first state, of its first). */
  private place(agent: Track, index: number, record: TraceRecord): void {
    // The agent's next record is not a state: a pending message stays where it was placed.
    agent.pending = undefined;
    const bucket = agent.buckets[agent.buckets.length - 1] as Bucket;
    let replaced: { pos: number; rec: number } | undefined;
    if (record.kind === 'message') {
      const previous = bucket.messages.get(record.index);
      if (previous !== undefined) {
        const pos = bucket.items.lastIndexOf(previous);
        bucket.items.splice(pos, 1);
        replaced = { pos, rec: previous };
      }
      bucket.messages.set(record.index, index);
      if (agent.bars.length > 0 && isUserText(record.message)) agent.pending = { rec: index, index: record.index, replaced };
    }
    bucket.items.push(index);
    if (record.kind === 'response') {
      const model = this.modelOf(agent);
      const cost = model === undefined ? undefined : this.options.price(model, record.usage);
      const bar = agent.bars[agent.bars.length - 1];
      if (cost === undefined) return;
      if (bar) bar.cost = (bar.cost ?? 0) + cost;
      else agent.earlyCost = (agent.earlyCost ?? 0) + cost;
    }
  }

  /** A `state` record: closes the agent's last interval and opens the next. */
  private enter(agent: Track, index: number, record: Extract<TraceRecord, { kind: 'state' }>): void {
    agent.usage = record.usage;
    if (typeof record.requests === 'number') agent.requests = record.requests;
    else if (record.state === 'streaming') agent.requests++;
    const previous = agent.bars[agent.bars.length - 1];
    // The first bar takes the bucket of what came before it; later ones a new one.
    const bucket: Bucket = previous ? { items: [], messages: new Map() } : (agent.buckets[0] as Bucket);
    const pending = agent.pending;
    agent.pending = undefined;
    if (previous && pending) {
      // The message opened this state: it moves here, and what it had displaced comes back.
      const from = agent.buckets[agent.buckets.length - 1] as Bucket;
      from.items.pop();
      from.messages.delete(pending.index);
      if (pending.replaced) {
        from.items.splice(pending.replaced.pos, 0, pending.replaced.rec);
        from.messages.set(pending.index, pending.replaced.rec);
      }
      bucket.items.push(pending.rec);
      bucket.messages.set(pending.index, pending.rec);
    }
    if (previous) {
      previous.t1 = record.t;
      agent.buckets.push(bucket);
    }
    agent.bars.push({
      state: record.state,
      t0: record.t,
      t1: record.t,
      final: this.finals.has(record.state),
      steps: record.steps,
      requests: agent.requests,
      rec: index,
      items: bucket.items,
      cost: previous ? undefined : agent.earlyCost,
    });
  }

  /** Display order: roots, then each subtree depth-first, siblings in the order they started. */
  private layOut(): void {
    this.orderStale = false;
    const key = (track: Track): number => (track.startRec < 0 ? track.firstSeen : track.startRec);
    const all = [...this.tracks.values()].sort((a, b) => key(a) - key(b));
    const children = new Map<string, Track[]>();
    const roots: Track[] = [];
    for (const track of all) {
      const parent = track.parentId === null ? undefined : this.tracks.get(track.parentId);
      if (parent && parent !== track) {
        const list = children.get(parent.id) ?? [];
        list.push(track);
        children.set(parent.id, list);
      } else roots.push(track);
    }
    const order: { track: Track; depth: number }[] = [];
    const visit = (track: Track, depth: number): void => {
      order.push({ track, depth });
      for (const child of children.get(track.id) ?? []) visit(child, depth + 1);
    };
    for (const root of roots) visit(root, 0);
    this.order = order;
    this.children = children;
    this.laneOf = new Map(order.map(({ track }, lane) => [track.id, lane]));
  }
}
