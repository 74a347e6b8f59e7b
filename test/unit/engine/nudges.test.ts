import { describe, expect, it } from 'vitest';
import type { NudgeLatch } from '../../../src/index.js';
import { runTraced, userTexts } from '../../support/helpers.js';

/** The nudge registry: built-in latches and a host's own. */

const verify: NudgeLatch = {
  id: 'verify',
  on: 'end_turn',
  perTurn: 1,
  fires: (view) => !view.isSubAgent && !view.stepText.includes('VERIFIED'),
  message: 'Before you finish: check your answer against the task once more.',
};

describe('nudge registry', () => {
  it('a host latch nudges the root once per turn before it ends', async () => {
    const { snapshot, trail, logs } = await runTraced({ root: [{ text: 'answer' }, { text: 'answer, VERIFIED' }] }, { task: 't', nudges: [verify] });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'nudged', 'streaming', 'readyForUser']);
    expect(userTexts(snapshot.context.messages)).toEqual(['t', verify.message]);
    expect(logs.records('root').filter((r) => r.type === 'nudge')).toEqual([expect.objectContaining({ latch: 'verify' })]);
  });

  it('a latch whose per-turn budget is spent lets the turn end', async () => {
    const { snapshot } = await runTraced({ root: [{ text: 'answer' }, { text: 'still unverified' }] }, { task: 't', nudges: [verify] });
    expect(snapshot.value).toBe('readyForUser');
    expect(userTexts(snapshot.context.messages).filter((t) => t === verify.message)).toHaveLength(1);
  });

  it('a message function sees the step that ended', async () => {
    const echoBack: NudgeLatch = { id: 'echo', on: 'end_turn', total: 1, fires: () => true, message: (v) => `You said: ${v.stepText}` };
    const { snapshot } = await runTraced({ root: [{ text: 'hello' }, { text: 'bye' }] }, { task: 't', nudges: [echoBack] });
    expect(userTexts(snapshot.context.messages)).toEqual(['t', 'You said: hello']);
  });

  it('the built-in reply reminder comes before host latches for a sub-agent', async () => {
    const always: NudgeLatch = { id: 'always', on: 'end_turn', total: 1, fires: (v) => v.isSubAgent, message: 'host says hi' };
    const { logs } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'x' } }] }, { text: 'wait' }, { text: 'done' }],
        c: [{ text: 'no reply' }, { text: 'still none' }, { calls: [{ name: 'reply', input: { result: 'ok' } }] }],
      },
      { task: 'go', nudges: [always] },
    );
    expect(
      logs
        .records('root/c')
        .filter((r) => r.type === 'nudge')
        .map((r) => (r.type === 'nudge' ? r.latch : '')),
    ).toEqual(['reply-reminder', 'always']);
  });

  it('the default step cap is 50 model requests per turn', async () => {
    const { snapshot, provider } = await runTraced({ root: () => ({ text: 'again', stopReason: 'pause_turn' }) }, { task: 't' });
    expect(snapshot.value).toBe('capped');
    expect(provider.requests).toHaveLength(50);
  });
});
