import { describe, expect, it } from 'vitest';
import { nudgeMessage, pickNudge, replyReminder, truncationReminder, type LatchCount, type NudgeLatch, type NudgeView } from '../../../src/engine/nudges.js';

/**
 * Which latch the registry picks, from the rules of its doc comment: consulted only for its
 * stop kind, in order, while `fires` says so and neither budget is spent. Latches here record
 * what they were shown, so the view a host's latch receives is checked as the host sees it.
 */

const root = { name: 'root', path: ['root'], depth: 0, id: 'root' };
const child = { name: 'c', path: ['root', 'c'], depth: 1, id: 'root/c' };
type View = Omit<NudgeView, 'firedThisTurn' | 'firedTotal'>;
const view = (over: Partial<View> = {}): View => ({ agent: root, isSubAgent: false, quiet: true, stopReason: 'end_turn', stepText: 'done', steps: 1, ...over });
const always = (id: string, on: NudgeLatch['on'], budgets: { perTurn?: number; total?: number } = {}): NudgeLatch => ({
  id,
  on,
  fires: () => true,
  message: `${id} says`,
  ...budgets,
});
const counts = (entries: Record<string, LatchCount>): Record<string, LatchCount> => entries;

describe('nudge registry: picking a latch', () => {
  it('consults only the latches of the stop kind, first match wins', () => {
    const latches = [always('cut', 'max_tokens'), always('first', 'end_turn'), always('second', 'end_turn')];
    expect(pickNudge(latches, 'end_turn', {}, view())?.id).toBe('first');
    expect(pickNudge(latches, 'max_tokens', {}, view())?.id).toBe('cut');
    expect(pickNudge([always('cut', 'max_tokens')], 'end_turn', {}, view())).toBeUndefined();
  });

  it('a per-turn budget of 2 allows firings 1 and 2 of the turn, not a third', () => {
    const latch = always('twice', 'end_turn', { perTurn: 2 });
    expect(pickNudge([latch], 'end_turn', counts({ twice: { turn: 1, total: 9 } }), view())?.id).toBe('twice');
    expect(pickNudge([latch], 'end_turn', counts({ twice: { turn: 2, total: 9 } }), view())).toBeUndefined();
  });

  it('a total budget of 1 allows one firing in the session, whatever the turn', () => {
    const latch = always('once', 'end_turn', { total: 1 });
    expect(pickNudge([latch], 'end_turn', counts({ once: { turn: 0, total: 0 } }), view())?.id).toBe('once');
    expect(pickNudge([latch], 'end_turn', counts({ once: { turn: 0, total: 1 } }), view())).toBeUndefined();
  });

  it('a spent latch lets the next one of its kind be picked', () => {
    const latches = [always('spent', 'end_turn', { perTurn: 1 }), always('next', 'end_turn')];
    expect(pickNudge(latches, 'end_turn', counts({ spent: { turn: 1, total: 1 } }), view())?.id).toBe('next');
  });

  it('a latch that does not fire is passed over', () => {
    const never: NudgeLatch = { id: 'never', on: 'end_turn', fires: () => false, message: '' };
    expect(pickNudge([never, always('next', 'end_turn')], 'end_turn', {}, view())?.id).toBe('next');
    expect(pickNudge([never], 'end_turn', {}, view())).toBeUndefined();
  });

  it('a latch sees the step and how often it fired, this turn and in all', () => {
    const seen: NudgeView[] = [];
    const spy: NudgeLatch = {
      id: 'spy',
      on: 'end_turn',
      fires: (v) => {
        seen.push(v);
        return true;
      },
      message: '',
    };
    pickNudge([spy], 'end_turn', counts({ spy: { turn: 2, total: 5 } }), view({ stepText: 'hello', steps: 4 }));
    pickNudge([spy], 'end_turn', {}, view());
    expect(seen).toEqual([
      { agent: root, isSubAgent: false, quiet: true, stopReason: 'end_turn', stepText: 'hello', steps: 4, firedThisTurn: 2, firedTotal: 5 },
      { agent: root, isSubAgent: false, quiet: true, stopReason: 'end_turn', stepText: 'done', steps: 1, firedThisTurn: 0, firedTotal: 0 },
    ]);
  });
});

describe('nudge registry: the built-in latches', () => {
  it('the reply reminder fires once per session, for a quiet sub-agent only', () => {
    expect(replyReminder).toMatchObject({ id: 'reply-reminder', on: 'end_turn', total: 1 });
    expect(pickNudge([replyReminder], 'end_turn', {}, view({ agent: child, isSubAgent: true, quiet: true }))?.id).toBe('reply-reminder');
    expect(pickNudge([replyReminder], 'end_turn', {}, view({ agent: child, isSubAgent: true, quiet: false }))).toBeUndefined();
    expect(pickNudge([replyReminder], 'end_turn', {}, view({ isSubAgent: false, quiet: true }))).toBeUndefined();
    expect(
      pickNudge([replyReminder], 'end_turn', counts({ 'reply-reminder': { turn: 0, total: 1 } }), view({ agent: child, isSubAgent: true })),
    ).toBeUndefined();
    expect(replyReminder.message).toBe(
      'You ended your turn without calling the `reply` tool. Only the `result` argument of `reply` reaches the agent that started you; ' +
        'your messages do not. Call `reply` now with your complete result. If you end another turn without calling it, you finish with no output.',
    );
  });

  it('the truncation reminder answers max_tokens, `budget` times per turn', () => {
    const latch = truncationReminder(2);
    expect(latch).toMatchObject({ id: 'truncation-reminder', on: 'max_tokens', perTurn: 2 });
    expect(latch.total).toBeUndefined();
    expect(pickNudge([latch], 'max_tokens', counts({ 'truncation-reminder': { turn: 1, total: 40 } }), view({ stopReason: 'max_tokens' }))?.id).toBe(
      'truncation-reminder',
    );
    expect(pickNudge([latch], 'max_tokens', counts({ 'truncation-reminder': { turn: 2, total: 2 } }), view({ stopReason: 'max_tokens' }))).toBeUndefined();
    expect(latch.message).toBe(
      'Your previous response was cut off because it reached the maximum output length. Continue where you stopped. ' +
        'Any tool call that was cut off was not executed: send it again, complete, and keep long content short or split it across several calls.',
    );
  });

  it('a message is the latch text, or what its function makes of the view', () => {
    const full = { ...view({ stepText: 'hi' }), firedThisTurn: 1, firedTotal: 3 };
    expect(nudgeMessage(always('fixed', 'end_turn'), full)).toBe('fixed says');
    expect(nudgeMessage({ ...always('f', 'end_turn'), message: (v) => `${v.stepText}/${v.firedThisTurn}/${v.firedTotal}` }, full)).toBe('hi/1/3');
  });
});
