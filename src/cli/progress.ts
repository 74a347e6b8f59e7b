import type { InspectionEvent } from 'xstate';
import type { AgentIdentity, Usage } from '../types.js';
import { addUsage, ZERO_USAGE } from '../usage.js';
import { cut, padVisible, palette, type Palette } from './palette.js';

interface AgentRow {
  readonly agent: AgentIdentity;
  state: string;
  /** Model requests over all turns. */
  steps: number;
  lastTurnSteps: number;
  usage: Usage;
  readonly startedAt: number;
  endedAt: number | undefined;
}

interface SessionLikeSnapshot {
  readonly value: unknown;
  readonly status: string;
  readonly context: { readonly agent: AgentIdentity; readonly steps: number; readonly usage: Usage };
}

function sessionSnapshotOf(event: InspectionEvent): SessionLikeSnapshot | undefined {
  if (event.type !== '@xstate.snapshot') return undefined;
  const snapshot = event.snapshot as Partial<SessionLikeSnapshot>;
  return snapshot.context?.agent !== undefined ? (snapshot as SessionLikeSnapshot) : undefined;
}

export interface ProgressOptions {
  readonly out: NodeJS.WritableStream;
  /** Redraw a live tree in place (a terminal) or write one plain line per state change. */
  readonly live: boolean;
  readonly color: boolean;
  readonly now?: () => number;
}

/**
 * The run's progress on stderr: every agent's state, steps, tokens and elapsed time. On a terminal
 * a tree redrawn in place (at most every 100 ms); elsewhere one plain line per state change.
 * Fed by XState's `inspect` option, so it sees every actor of the tree.
 */
export class ProgressBoard {
  private readonly rows = new Map<string, AgentRow>();
  private readonly style: Palette;
  private readonly now: () => number;
  private readonly t0: number;
  private drawnLines = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly options: ProgressOptions) {
    this.style = palette(options.color);
    this.now = options.now ?? Date.now;
    this.t0 = this.now();
  }

  readonly inspect = (event: InspectionEvent): void => {
    const snapshot = sessionSnapshotOf(event);
    if (snapshot) this.update(snapshot);
  };

  private update(snapshot: SessionLikeSnapshot): void {
    const { agent, steps, usage } = snapshot.context;
    let row = this.rows.get(agent.id);
    if (!row) {
      row = { agent, state: '', steps: 0, lastTurnSteps: 0, usage: ZERO_USAGE, startedAt: this.now(), endedAt: undefined };
      this.rows.set(agent.id, row);
    }
    const state = String(snapshot.value);
    // Each entry into `streaming` is one request; `steps` (the current turn's count) rising while
    // the value stays `streaming` is a continuation after pause_turn.
    if (state === 'streaming' && row.state !== 'streaming') row.steps += 1;
    else if (state === 'streaming' && steps > row.lastTurnSteps) row.steps += steps - row.lastTurnSteps;
    row.lastTurnSteps = steps;
    row.usage = usage;
    if (snapshot.status !== 'active' && row.endedAt === undefined) row.endedAt = this.now();
    if (state === row.state) return;
    row.state = state;
    if (this.options.live) this.scheduleDraw();
    else this.options.out.write(`${this.line(row, false)}\n`);
  }

  private line(row: AgentRow, tree: boolean): string {
    const { style } = this;
    const elapsed = (((row.endedAt ?? this.now()) - row.startedAt) / 1000).toFixed(1);
    const tokens = row.usage.inputTokens + row.usage.cacheReadInputTokens + row.usage.cacheCreationInputTokens + row.usage.outputTokens;
    const stats = style.dim(`step ${row.steps}  ${formatCount(tokens)} tok  ${elapsed}s`);
    if (tree) {
      const indent = '  '.repeat(row.agent.depth);
      return `${padVisible(`${indent}${style.agent(cut(row.agent.name, 28))}`, 32)}${padVisible(style.state(row.state), 22)}${stats}`;
    }
    const at = style.dim(`+${((this.now() - this.t0) / 1000).toFixed(1)}s`);
    return `${at} ${padVisible(style.agent(row.agent.id), 24)}${padVisible(style.state(row.state), 22)}${stats}`;
  }

  private scheduleDraw(): void {
    if (this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.draw();
    }, 100);
    this.timer.unref();
  }

  /** Redraws the tree in place: move up over the last drawing, clear to the end, write. */
  private draw(): void {
    const lines = [...this.rows.values()].sort((a, b) => (a.agent.id < b.agent.id ? -1 : 1)).map((row) => this.line(row, true));
    const up = this.drawnLines > 0 ? `\u001b[${this.drawnLines}F` : '';
    this.options.out.write(`${up}\u001b[0J${lines.join('\n')}\n`);
    this.drawnLines = lines.length;
  }

  /** Final drawing (live mode) and no more timers. */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.options.live) this.draw();
  }

  /** Totals for the summary. */
  totals(): { agents: number; steps: number; usage: Usage; outcomes: Record<string, number> } {
    let steps = 0;
    let usage = ZERO_USAGE;
    const outcomes: Record<string, number> = {};
    for (const row of this.rows.values()) {
      steps += row.steps;
      usage = addUsage(usage, row.usage);
      if (row.agent.depth > 0) outcomes[row.state] = (outcomes[row.state] ?? 0) + 1;
    }
    return { agents: this.rows.size, steps, usage, outcomes };
  }
}

export function formatCount(n: number): string {
  if (n < 1000) return String(n);
  if (n < 1_000_000) return `${(n / 1000).toFixed(n < 10_000 ? 1 : 0)}k`;
  return `${(n / 1_000_000).toFixed(1)}M`;
}
