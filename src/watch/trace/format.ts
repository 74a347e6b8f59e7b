import type { AgentOutcome, Message, StopReason, Usage } from '../../engine/types.js';

/**
 * The trace format: one JSON object per line (JSONL), written by `TraceRecorder`, read by the
 * turn-flow viewer (`exarch view`). Agents are keyed by their agent id (`root`, `root/explorer`,
 * `root/explorer#2`), unique within a run. `t` is milliseconds since the trace started.
 *
 * A trace summarises: it never copies a whole transcript per event. Each message of a history is
 * written once, when it is committed (`message`), or again when a later append merged into it
 * (`message` with the same `index`: the newer record replaces the older). API keys and session
 * options are never written.
 */
export const TRACE_VERSION = 1;

/**
 * The largest trace `exarch view` reads (256 MiB): it is read whole and its records go into one
 * page. A larger file is refused by its size, unread.
 */
export const MAX_TRACE_BYTES = 256 * 1024 * 1024;

/** The statechart of the session machine, so a trace can be viewed without the code that wrote it. */
export interface TraceStatechart {
  readonly initial: string;
  readonly states: readonly { readonly id: string; readonly final: boolean }[];
  readonly transitions: readonly {
    readonly source: string;
    readonly target: string;
    readonly event: string;
    readonly guard?: string;
    readonly actions: readonly string[];
  }[];
}

export type TraceRecord =
  | {
      readonly t: number;
      readonly kind: 'trace.start';
      readonly version: typeof TRACE_VERSION;
      readonly startedAt: string;
      readonly title: string;
      readonly statechart: TraceStatechart;
      /** The model the run's requests ask for unless an agent's profile names another (prices the viewer's costs); absent when unknown. */
      readonly model?: string;
    }
  /** A session actor started. `parent` is the agent id of the session that spawned it (null for the root). */
  | {
      readonly t: number;
      readonly kind: 'agent.start';
      readonly agent: string;
      readonly name: string;
      readonly depth: number;
      readonly parent: string | null;
      /** The start of the task (at most 500 characters) and its full length. */
      readonly task: string;
      readonly taskChars: number;
      /** The model its declared profile asks for; absent: the run's (`trace.start`). */
      readonly model?: string;
    }
  /** The session's state value changed (or, while `streaming`, a new request began: `steps` rose). */
  | {
      readonly t: number;
      readonly kind: 'state';
      readonly agent: string;
      readonly state: string;
      /** Model requests in the current turn. */
      readonly steps: number;
      /** Model requests over the agent's whole life, as the CLI numbers its steps (absent in older traces: count the `streaming` records). */
      readonly requests?: number;
      /** The agent's own tokens so far. */
      readonly usage: Usage;
    }
  /** A message of the agent's history, at its position `index`. */
  | { readonly t: number; readonly kind: 'message'; readonly agent: string; readonly index: number; readonly message: Message }
  /** A model response arrived (before it is committed). */
  | {
      readonly t: number;
      readonly kind: 'response';
      readonly agent: string;
      readonly stopReason: StopReason;
      readonly textChars: number;
      readonly toolCalls: readonly { readonly id: string; readonly name: string; readonly complete: boolean }[];
      readonly usage: Usage;
    }
  /** One tool call of a batch settled. */
  | { readonly t: number; readonly kind: 'tool.result'; readonly agent: string; readonly toolUseId: string; readonly isError: boolean; readonly chars: number }
  /** A finished child's result reached its parent's inbox. `text` is the rendered reply (already clipped to the reply cap). */
  | {
      readonly t: number;
      readonly kind: 'delivery';
      readonly parent: string;
      readonly child: string;
      readonly name: string;
      readonly outcome: AgentOutcome;
      readonly text: string;
      readonly reason?: string;
    }
  /** Other events a session received, summarised: `user.message`, `cancel`, `batch.drained`, … */
  | { readonly t: number; readonly kind: 'event'; readonly agent: string; readonly type: string; readonly detail?: string }
  /** A session actor ended: a final state (`outcome`), or stopped or crashed from outside. */
  | {
      readonly t: number;
      readonly kind: 'agent.end';
      readonly agent: string;
      readonly status: 'done' | 'stopped' | 'error';
      readonly outcome?: AgentOutcome;
      readonly reason?: string;
    }
  | { readonly t: number; readonly kind: 'trace.end' };
