import { appendUserBlocks, text } from '../src/engine/history.js';
import { renderInbox } from '../src/engine/inbox.js';
import { nudgeMessage, pickNudge, type LatchCount, type NudgeLatch } from '../src/engine/nudges.js';
import type { UserBlock } from '../src/engine/types.js';
import type { SessionContext, SessionArgs } from './sessionTypes.js';
import { nudgeView, stepEndFor } from './guards.js';

// Turn boundaries of the session chart: the turn's user message, and the nudges appended within it.

/** The inbox and queued user messages become (or join) the turn's user message; the caller empties both. */
function deliverTurnInput(context: SessionContext): void {
  const blocks: UserBlock[] = [];
  if (context.inbox.length > 0) blocks.push(text(renderInbox(context.inbox)));
  for (const message of context.pendingUser) if (message.length > 0) blocks.push(text(message));
  appendUserBlocks(context.messages, blocks);
  context.fixed.recorder.record({ type: 'message', role: 'user', content: blocks });
}

/** Delivers the inbox and queued user messages as one user turn, and restarts the turn's counts. */
export function startTurn({ context }: SessionArgs): Partial<SessionContext> {
  deliverTurnInput(context);
  const latchCounts: Record<string, LatchCount> = {};
  for (const [id, count] of Object.entries(context.latchCounts)) latchCounts[id] = { turn: 0, total: count.total };
  return { inbox: [], pendingUser: [], steps: 0, latchCounts, joinable: true };
}

/**
 * Results that arrived after the turn started but before its first request left (a durable
 * run's request waits for the journal) join that turn's user message: one request for them all,
 * never a second request made for them alone. User messages queued meanwhile join too, as at
 * any turn start (a resume reads the joined message as one).
 */
export function joinTurn({ context }: SessionArgs): Partial<SessionContext> {
  deliverTurnInput(context);
  return { inbox: [], pendingUser: [] };
}

/** Appends the chosen latch's reminder to the history (merged into a trailing user message). */
export function applyNudge({ context, event }: SessionArgs, params: { on: NudgeLatch['on'] }): Partial<SessionContext> {
  const view = nudgeView(context, stepEndFor(context, event));
  const latch = pickNudge(context.fixed.latches, params.on, context.latchCounts, view);
  if (!latch) throw new Error(`exarch: a ${params.on} nudge was chosen but no latch fires`);
  const count = context.latchCounts[latch.id] ?? { turn: 0, total: 0 };
  const message = nudgeMessage(latch, { ...view, firedThisTurn: count.turn, firedTotal: count.total });
  appendUserBlocks(context.messages, [text(message)]);
  context.fixed.recorder.record({ type: 'nudge', latch: latch.id, text: message });
  return { latchCounts: { ...context.latchCounts, [latch.id]: { turn: count.turn + 1, total: count.total + 1 } } };
}
