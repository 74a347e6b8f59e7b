import type { AgentIdentity, StopReason } from './types.js';

/** What a latch sees when the session consults the registry. */
export interface NudgeView {
  readonly agent: AgentIdentity;
  /** The session owes a reply: every sub-agent, and a root given an `output` schema (it replies like one). */
  readonly isSubAgent: boolean;
  /** No live children, an empty inbox and no message waiting for it. */
  readonly quiet: boolean;
  readonly stopReason: StopReason;
  /** The assistant text of the step that just ended. */
  readonly stepText: string;
  /** Model requests made in this turn so far. */
  readonly steps: number;
  /** How often this latch fired in this turn, and in the session. */
  readonly firedThisTurn: number;
  readonly firedTotal: number;
}

/**
 * A latch in the nudge registry. `end_turn` latches are consulted when a step ends without tool
 * calls (`end_turn`/`stop_sequence`); `max_tokens` latches when output was truncated. A latch fires
 * while `fires` says so and its budgets (`perTurn`, `total`) are not spent.
 */
export interface NudgeLatch {
  readonly id: string;
  readonly on: 'end_turn' | 'max_tokens';
  readonly fires: (view: NudgeView) => boolean;
  readonly message: string | ((view: NudgeView) => string);
  readonly perTurn?: number;
  readonly total?: number;
}

export interface LatchCount {
  readonly turn: number;
  readonly total: number;
}

export const REPLY_REMINDER_ID = 'reply-reminder';
export const TRUNCATION_REMINDER_ID = 'truncation-reminder';

/**
 * One-shot and budget-free (it spends no turn budget): a quiet sub-agent that ended a step
 * without calling `reply` is reminded once. A replied sub-agent is final and never consults it.
 */
export const replyReminder: NudgeLatch = {
  id: REPLY_REMINDER_ID,
  on: 'end_turn',
  total: 1,
  fires: (view) => view.isSubAgent && view.quiet,
  message:
    'You ended your turn without calling the `reply` tool. Only the `result` argument of `reply` reaches ' +
    'the agent that started you; your messages do not. Call `reply` now with your complete result. ' +
    'If you end another turn without calling it, you finish with no output.',
};

/** The truncation reminder: `budget` continuations per turn, then the session fails. */
export function truncationReminder(budget: number): NudgeLatch {
  return {
    id: TRUNCATION_REMINDER_ID,
    on: 'max_tokens',
    perTurn: budget,
    fires: () => true,
    message:
      'Your previous response was cut off because it reached the maximum output length. Continue where ' +
      'you stopped. Any tool call that was cut off was not executed: send it again, complete, and keep ' +
      'long content short or split it across several calls.',
  };
}

/** The first latch of `on` that fires with budget left, or undefined. */
export function pickNudge(
  latches: readonly NudgeLatch[],
  on: NudgeLatch['on'],
  counts: Readonly<Record<string, LatchCount>>,
  view: Omit<NudgeView, 'firedThisTurn' | 'firedTotal'>,
): NudgeLatch | undefined {
  for (const latch of latches) {
    if (latch.on !== on) continue;
    const count = counts[latch.id] ?? { turn: 0, total: 0 };
    if (latch.perTurn !== undefined && count.turn >= latch.perTurn) continue;
    if (latch.total !== undefined && count.total >= latch.total) continue;
    if (latch.fires({ ...view, firedThisTurn: count.turn, firedTotal: count.total })) return latch;
  }
  return undefined;
}

export function nudgeMessage(latch: NudgeLatch, view: NudgeView): string {
  return typeof latch.message === 'string' ? latch.message : latch.message(view);
}
