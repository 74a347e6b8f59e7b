import { createLogUpdate } from 'log-update';
import type { InspectionEvent } from 'xstate';
import type { RunEvent } from '../watch/observe/events.js';
import { RunObserver } from '../watch/observe/runObserver.js';
import type { PlannedCall } from '../tools/toolbox.js';
import type { AgentIdentity, Message, Usage } from '../engine/types.js';
import { addUsage, ZERO_USAGE } from '../engine/usage.js';
import { formatCount } from './formatCount.js';
import { cut, padVisible, palette, type Palette } from './palette.js';

interface AgentRow {
  readonly agent: AgentIdentity;
  state: string;
  /** Model requests begun over all turns. */
  steps: number;
  /** Requests the provider served, when the session counts them (retried and aborted ones included). */
  served: number | undefined;
  usage: Usage;
  readonly startedAt: number;
  endedAt: number | undefined;
  /** What it is doing now, in words ('' when its state says it all). */
  doing: string;
  /** Text characters streamed by the request under way. */
  streamedChars: number;
}

interface SessionLikeSnapshot {
  readonly value: unknown;
  readonly status: string;
  readonly context: {
    readonly agent: AgentIdentity;
    readonly steps: number;
    readonly requests?: number;
    readonly usage: Usage;
    readonly messages?: readonly Message[];
    readonly batch?: { readonly plan: readonly PlannedCall[]; readonly results: ReadonlyMap<string, unknown> } | null;
    readonly children?: { readonly size: number };
  };
}

/** What the board shows of one agent. */
export interface AgentProgress {
  readonly agent: AgentIdentity;
  /** The session machine's state value. */
  readonly state: string;
  /** Model requests begun over the agent's life. */
  readonly requests: number;
  /** Its requests the provider served so far (retried, failed and aborted ones included), when known. */
  readonly served?: number;
  /** Its own tokens so far. */
  readonly usage: Usage;
  /** It reached a final state, or was stopped. */
  readonly ended: boolean;
  /** What it is doing now, in words ('' when its state says it all). */
  readonly doing: string;
}

export interface ProgressOptions {
  readonly out: NodeJS.WritableStream;
  /** Redraw a live tree in place (a terminal) or write one plain line per state change. */
  readonly live: boolean;
  readonly color: boolean;
  readonly now?: () => number;
}

/** Between two redraws at most, however fast the states change. */
const REDRAW_MS = 100;
/** Elapsed times tick at this pace while nothing else changes. */
const TICK_MS = 1_000;

/**
 * The run's progress on stderr: every agent's state, what it is doing (streaming so many
 * characters, running which tool on what, waiting for how many sub-agents), steps, tokens and
 * elapsed time. On a terminal a tree redrawn in place by log-update (on each change, at most every
 * 100 ms, and every second so elapsed times tick); elsewhere one plain line per state change.
 * Fed by the run's events (src/watch/observe/): `board.inspect` as XState's `inspect` option, or
 * `onEvent` from an observer shared with other consumers.
 */
export class ProgressBoard {
  private readonly rows = new Map<string, AgentRow>();
  private readonly style: Palette;
  private readonly now: () => number;
  private readonly t0: number;
  private readonly screen: ReturnType<typeof createLogUpdate> | undefined;
  private redraw: NodeJS.Timeout | undefined;
  private readonly ticker: NodeJS.Timeout | undefined;
  private stopped = false;
  private readonly observer = new RunObserver();
  /** How many askers hold the tree cleared (an approval question, a steering command): drawn again at 0. */
  private paused = 0;

  constructor(private readonly options: ProgressOptions) {
    this.style = palette(options.color);
    this.now = options.now ?? Date.now;
    this.t0 = this.now();
    if (options.live) {
      // The cursor stays visible: a run can be interrupted, and a hidden cursor would outlive a crash.
      this.screen = createLogUpdate(options.out as NodeJS.WriteStream, { showCursor: true });
      this.ticker = setInterval(() => this.draw(), TICK_MS);
      this.ticker.unref();
    }
    this.observer.subscribe(this.onEvent);
  }

  /** Pass as `inspect` when creating the root actor. */
  readonly inspect = (event: InspectionEvent): void => this.observer.inspect(event);

  /** One run event: every snapshot of a session, and the text it streams. */
  readonly onEvent = (event: RunEvent): void => {
    if (event.type === 'agent.snapshot') this.update(event.snapshot, event.requests);
    else if (event.type === 'text.delta') this.streamed(event.agent, event.text);
  };

  /** Text an agent's model streamed (a `text.delta`). */
  onTextDelta(agent: AgentIdentity, delta: string): void {
    this.streamed(agent.id, delta);
  }

  private streamed(agentId: string, delta: string): void {
    const row = this.rows.get(agentId);
    if (!row) return;
    row.streamedChars += delta.length;
    row.doing = `streaming, ${formatCount(row.streamedChars)} chars`;
    this.changed();
  }

  /**
   * A line that must stay (a warning, a retry): written above the live tree, which is redrawn
   * below it; in plain mode, written as it is.
   */
  print(line: string): void {
    if (this.screen && !this.stopped && this.paused === 0) {
      this.screen.clear();
      this.options.out.write(`${line}\n`);
      this.draw();
    } else {
      this.options.out.write(`${line}\n`);
    }
  }

  /** @param requests the agent's model requests so far (the observer counts them). */
  private update(snapshot: SessionLikeSnapshot, requests: number): void {
    const state = String(snapshot.value);
    const active = snapshot.status === 'active';
    const row = this.rows.get(snapshot.context.agent.id);
    // A new request streams afresh.
    const streamed = row === undefined || requests > row.steps ? 0 : row.streamedChars;
    this.show({
      agent: snapshot.context.agent,
      state,
      requests,
      ...(snapshot.context.requests === undefined ? {} : { served: snapshot.context.requests }),
      usage: snapshot.context.usage,
      ended: !active,
      doing: active ? activity(state, snapshot, streamed) : '',
    });
  }

  /**
   * One agent as it is now, however that is known: from a live session's snapshot (`onEvent`), or
   * from a run's journal as a follower reads it from the store (`JournalProgress`).
   */
  show(agentState: AgentProgress): void {
    const { agent, state, requests, usage, ended, doing } = agentState;
    let row = this.rows.get(agent.id);
    if (!row) {
      row = { agent, state: '', steps: 0, served: undefined, usage: ZERO_USAGE, startedAt: this.now(), endedAt: undefined, doing: '', streamedChars: 0 };
      this.rows.set(agent.id, row);
    }
    if (requests > row.steps) row.streamedChars = 0;
    row.steps = requests;
    row.served = agentState.served;
    row.usage = usage;
    if (ended && row.endedAt === undefined) row.endedAt = this.now();
    if (state === row.state && doing === row.doing) return;
    const stateChanged = state !== row.state;
    row.state = state;
    row.doing = doing;
    if (this.options.live) this.changed();
    else if (stateChanged) this.options.out.write(`${this.line(row, false)}\n`);
  }

  private line(row: AgentRow, tree: boolean): string {
    const { style } = this;
    const elapsed = (((row.endedAt ?? this.now()) - row.startedAt) / 1000).toFixed(tree ? 0 : 1);
    const tokens = row.usage.inputTokens + row.usage.cacheReadInputTokens + row.usage.cacheCreationInputTokens + row.usage.outputTokens;
    const stats = style.dim(`step ${row.steps}  ${formatCount(tokens)} tok  ${elapsed}s`);
    if (tree) {
      const indent = '  '.repeat(row.agent.depth);
      const doing = row.doing === '' ? '' : `  ${style.tool(cut(row.doing, 60))}`;
      return `${padVisible(`${indent}${style.agent(cut(row.agent.name, 28))}`, 32)}${padVisible(style.state(row.state), 22)}${stats}${doing}`;
    }
    const at = style.dim(`+${((this.now() - this.t0) / 1000).toFixed(1)}s`);
    return `${at} ${padVisible(style.agent(row.agent.id), 24)}${padVisible(style.state(row.state), 22)}${stats}`;
  }

  /** Something changed: redraw soon (at most every REDRAW_MS). */
  private changed(): void {
    if (!this.screen || this.stopped || this.redraw) return;
    this.redraw = setTimeout(() => {
      this.redraw = undefined;
      this.draw();
    }, REDRAW_MS);
    this.redraw.unref();
  }

  /**
   * Clears the live tree and holds its redraws, so that a question (an approval) or a command line
   * can be typed on the terminal without the tree drawing over it; `resume` draws it again below,
   * once every `pause` has had its `resume`.
   */
  pause(): void {
    if (!this.screen || this.stopped) return;
    this.paused += 1;
    if (this.paused === 1) this.screen.clear();
  }

  resume(): void {
    if (this.paused === 0) return;
    this.paused -= 1;
    this.draw();
  }

  private draw(): void {
    if (!this.screen || this.stopped || this.paused > 0) return;
    const lines = [...this.rows.values()].sort((a, b) => (a.agent.id < b.agent.id ? -1 : 1)).map((row) => this.line(row, true));
    this.screen(lines.join('\n'));
  }

  /**
   * The final drawing, left on the screen for what is printed after it (the summary); no more
   * redraws or timers. Only the first call draws: a second must not redraw over the summary.
   */
  stop(): void {
    if (this.stopped) return;
    clearTimeout(this.redraw);
    clearInterval(this.ticker);
    this.redraw = undefined;
    this.paused = 0;
    this.draw();
    this.stopped = true;
    this.screen?.done();
  }

  /** Totals for the summary. */
  totals(): { agents: number; steps: number; usage: Usage; outcomes: Record<string, number> } {
    let steps = 0;
    let usage = ZERO_USAGE;
    const outcomes: Record<string, number> = {};
    for (const row of this.rows.values()) {
      // What the provider served where the session counts it (a request aborted before it left is none).
      steps += row.served ?? row.steps;
      usage = addUsage(usage, row.usage);
      if (row.agent.depth > 0) outcomes[row.state] = (outcomes[row.state] ?? 0) + 1;
    }
    return { agents: this.rows.size, steps, usage, outcomes };
  }
}

/** What an agent in `state` is doing, read from its snapshot. */
function activity(state: string, snapshot: SessionLikeSnapshot, streamedChars: number): string {
  const { batch, children, messages } = snapshot.context;
  if (state === 'streaming') return streamedChars > 0 ? `streaming, ${formatCount(streamedChars)} chars` : 'waiting for the model';
  if (state === 'queued') return 'waiting for room in the budget';
  if (state === 'dispatchingBatch' && batch) {
    const running = batch.plan.filter((call) => call.kind === 'run' && !batch.results.has(call.id));
    if (running.length === 0) return '';
    const first = running[0];
    const shown = first === undefined ? '' : `running ${describeCall(first, messages)}`;
    return running.length > 1 ? `${shown} (+${running.length - 1} more)` : shown;
  }
  const live = children?.size ?? 0;
  if (live > 0) return `waiting for ${live} sub-agent${live === 1 ? '' : 's'}`;
  return '';
}

/** `read_file src/x.ts`: the tool's name and its first short text argument, from the last assistant message. */
function describeCall(call: PlannedCall, messages: readonly Message[] | undefined): string {
  const name = call.kind === 'run' ? call.name : call.kind;
  const last = messages?.at(-1);
  if (last?.role !== 'assistant' || typeof last.content === 'string') return name;
  for (const block of last.content) {
    if (block.type === 'tool_use' && block.id === call.id) return describeToolUse(name, block.input);
  }
  return name;
}

/** `read_file src/x.ts`: a tool's name and the first short text argument of its input. */
export function describeToolUse(name: string, input: unknown): string {
  if (typeof input !== 'object' || input === null) return name;
  const text = Object.values(input).find((value): value is string => typeof value === 'string');
  return text === undefined ? name : `${name} ${cut(text.replace(/\s+/g, ' '), 40)}`;
}
