import { describe, expect, it } from 'vitest';
import { defineTool } from '../../../src/index.js';
import { z } from 'zod';
import { runTraced, startTraced, until, userTexts } from '../../support/helpers.js';

/**
 * One test per transition of the session machine (machines/session.ts), named for what a user
 * sees. Each asserts the exact state trail, so removing or rerouting the transition fails it.
 */

/** An assistant message of one text block. */
const said = (text: string) => ({ role: 'assistant', content: [{ type: 'text', text }] });

const echo = defineTool({ name: 'echo', description: 'Echo', input: z.object({ text: z.string() }), run: ({ text }) => text });

describe('readyForUser', () => {
  it('a session given a task rests in starting for one tick, then streams: never readyForUser (turn over) before its first turn', async () => {
    const { trail } = await runTraced({ root: [{ text: 'hello' }] }, { task: 'hi' });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'readyForUser']);
  });

  it('waits without a task, and a user message starts a turn', async () => {
    const { actor, trail, provider } = startTraced({ root: [{ text: 'answer' }] });
    expect(actor.getSnapshot().value).toBe('readyForUser');
    expect(provider.requests).toHaveLength(0);
    actor.send({ type: 'user.message', text: 'question' });
    await until(actor, (s) => s.value === 'readyForUser' && s.context.steps === 1);
    expect(trail.get('root')).toEqual(['readyForUser', 'streaming', 'readyForUser']);
    expect(userTexts(actor.getSnapshot().context.messages)).toEqual(['question']);
  });

  it('a user message sent while the root is busy is queued for the next turn, not lost', async () => {
    const { actor } = startTraced({ root: [{ text: 'first', delayMs: 20 }, { text: 'second' }] }, { task: 'one' });
    await until(actor, (s) => s.value === 'streaming');
    actor.send({ type: 'user.message', text: 'two' });
    await until(actor, (s) => s.value === 'readyForUser' && s.context.pendingUser.length === 0 && s.context.steps === 1 && s.context.messages.length === 4);
    expect(userTexts(actor.getSnapshot().context.messages)).toEqual(['one', 'two']);
  });

  it('a sub-agent whose children are still running waits there, and their results wake it', async () => {
    const { trail } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'lead', task: 't' } }] }, { text: 'wait' }, { text: 'done' }],
        lead: [
          { calls: [{ name: 'agent', input: { name: 'worker', task: 'w' } }] },
          { text: 'waiting for worker' },
          { calls: [{ name: 'reply', input: { result: 'lead done' } }] },
        ],
        worker: [{ calls: [{ name: 'reply', input: { result: 'worker done' } }], delayMs: 10 }],
      },
      { task: 'go' },
    );
    expect(trail.get('root/lead')).toEqual([
      'starting',
      'streaming',
      'dispatchingBatch',
      'streaming',
      'readyForUser',
      'streaming',
      'dispatchingBatch',
      'replied',
    ]);
  });
});

describe('streaming', () => {
  it('goes to dispatchingBatch when the message has tool calls', async () => {
    const { trail } = await runTraced({ root: [{ calls: [{ name: 'echo', input: { text: 'x' } }] }, { text: 'ok' }] }, { task: 't', tools: [echo] });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'readyForUser']);
  });

  it('goes to readyForUser when the root ends its turn', async () => {
    const { trail, snapshot } = await runTraced({ root: [{ text: 'all done' }] }, { task: 't' });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'readyForUser']);
    expect(snapshot.status).toBe('active');
  });

  it('fails when the model refuses', async () => {
    const { trail, snapshot } = await runTraced({ root: [{ text: 'I cannot help with that.', stopReason: 'refusal' }] }, { task: 't' });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'failed']);
    expect(snapshot.output?.reason).toMatch(/refus/);
    expect(snapshot.context.messages.at(-1)).toEqual(said('I cannot help with that.'));
  });

  it('fails when the model context window is exceeded', async () => {
    const { snapshot } = await runTraced({ root: [{ text: 'partial', stopReason: 'model_context_window_exceeded' }] }, { task: 't' });
    expect(snapshot.value).toBe('failed');
    expect(snapshot.output?.reason).toMatch(/context window/);
  });

  it('fails with a one-line reason when the provider reports a fatal error', async () => {
    const { trail, snapshot } = await runTraced(
      { root: [{ fault: { retryable: false, status: 401, message: 'authentication failed: invalid x-api-key' } }] },
      { task: 't' },
    );
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'failed']);
    expect(snapshot.output?.reason).toBe('authentication failed: invalid x-api-key');
    expect(snapshot.context.messages).toHaveLength(1);
  });

  it('is nudged after output truncated without tool calls, and continues', async () => {
    const { trail, snapshot } = await runTraced({ root: [{ text: 'long text cut', stopReason: 'max_tokens' }, { text: 'rest' }] }, { task: 't' });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'nudged', 'streaming', 'readyForUser']);
    expect(snapshot.context.messages[1]).toEqual(said('long text cut'));
    expect(userTexts(snapshot.context.messages)[1]).toMatch(/cut off/);
  });

  it('fails after the truncation budget is spent', async () => {
    const cut = { text: 'cut', stopReason: 'max_tokens' as const };
    const { trail, snapshot } = await runTraced({ root: [cut, cut, cut] }, { task: 't', truncationBudget: 2 });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'nudged', 'streaming', 'nudged', 'streaming', 'failed']);
    expect(snapshot.output?.reason).toBe('output truncated repeatedly');
    // The last cut response is committed before the session fails: its history ends with it.
    expect(snapshot.context.messages.at(-1)).toEqual(said('cut'));
  });

  it('is capped instead of nudged for truncation when the step cap is reached', async () => {
    const { trail, snapshot } = await runTraced({ root: [{ text: 'cut', stopReason: 'max_tokens' }] }, { task: 't', maxSteps: 1 });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'capped']);
    expect(snapshot.context.messages.at(-1)).toEqual(said('cut'));
  });

  it('continues the same message after pause_turn', async () => {
    const { trail, snapshot } = await runTraced({ root: [{ text: 'part one, ', stopReason: 'pause_turn' }, { text: 'part two' }] }, { task: 't' });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'readyForUser']);
    expect(snapshot.context.steps).toBe(2);
    expect(snapshot.context.messages).toHaveLength(2);
    expect(snapshot.context.messages[1]?.content).toEqual([
      { type: 'text', text: 'part one, ' },
      { type: 'text', text: 'part two' },
    ]);
  });

  it('is capped at pause_turn when the step cap is reached', async () => {
    const { trail, snapshot } = await runTraced({ root: [{ text: 'paused', stopReason: 'pause_turn' }] }, { task: 't', maxSteps: 1 });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'capped']);
    expect(snapshot.context.messages.at(-1)).toEqual(said('paused'));
  });

  it('nudges a quiet sub-agent that ends a step without replying', async () => {
    const { trail, last } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 't' } }] }, { text: 'wait' }, { text: 'done' }],
        c: [{ text: 'my report' }, { calls: [{ name: 'reply', input: { result: 'r' } }] }],
      },
      { task: 'go' },
    );
    expect(trail.get('root/c')).toEqual(['starting', 'streaming', 'nudged', 'streaming', 'dispatchingBatch', 'replied']);
    // The quiet response stays in the history, the reminder after it.
    expect(last.get('root/c')?.context.messages[1]).toEqual(said('my report'));
  });

  it('is capped instead of nudged when the reminder would exceed the step cap', async () => {
    const echoStep = { calls: [{ name: 'echo', input: { text: 'x' } }] };
    const { trail, last } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 't' } }] }, { text: 'wait' }, { text: 'done' }],
        c: [echoStep, echoStep, { text: 'my report, no reply' }],
      },
      { task: 'go', maxSteps: 3, tools: [echo] },
    );
    expect(trail.get('root/c')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'dispatchingBatch', 'streaming', 'capped']);
    expect(last.get('root/c')?.context.messages.at(-1)).toEqual(said('my report, no reply'));
  });

  it('finishes a sub-agent with no output when it stays quiet without replying after the reminder', async () => {
    const { trail, last } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 't' } }] }, { text: 'wait' }, { text: 'done' }],
        c: [{ text: 'report' }, { text: 'still no reply' }],
      },
      { task: 'go' },
    );
    expect(trail.get('root/c')).toEqual(['starting', 'streaming', 'nudged', 'streaming', 'finishedWithoutReply']);
    expect(last.get('root/c')?.context.messages.at(-1)).toEqual(said('still no reply'));
  });
});

describe('dispatchingBatch', () => {
  it('ends a sub-agent in replied after its batch drains', async () => {
    const { trail } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 't' } }] }, { text: 'wait' }, { text: 'done' }],
        c: [{ calls: [{ name: 'reply', input: { result: 'r' } }] }],
      },
      { task: 'go' },
    );
    expect(trail.get('root/c')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'replied']);
  });

  it('streams again once every result is committed', async () => {
    const { trail, provider } = await runTraced({ root: [{ calls: [{ name: 'echo', input: { text: 'a' } }] }, { text: 'ok' }] }, { task: 't', tools: [echo] });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'readyForUser']);
    expect(provider.requests[1]?.lastMessage?.content).toEqual([{ type: 'tool_result', tool_use_id: expect.any(String), content: 'a' }]);
  });

  it('is capped when the step cap is reached after a batch', async () => {
    const { trail, snapshot } = await runTraced({ root: [{ calls: [{ name: 'echo', input: { text: 'a' } }] }] }, { task: 't', tools: [echo], maxSteps: 1 });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'capped']);
    expect(snapshot.output?.outcome).toBe('capped');
  });

  it('is nudged after a truncated batch and the model continues', async () => {
    const { trail } = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'echo', input: { text: 'a' } },
              { name: 'echo', input: { text: 'b' }, cutOff: true },
            ],
          },
          { text: 'ok' },
        ],
      },
      { task: 't', tools: [echo] },
    );
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'nudged', 'streaming', 'readyForUser']);
  });

  it('fails after a truncated batch when the truncation budget is spent', async () => {
    const { trail, snapshot } = await runTraced(
      { root: [{ calls: [{ name: 'echo', input: { text: 'b' }, cutOff: true }] }] },
      { task: 't', tools: [echo], truncationBudget: 0 },
    );
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'failed']);
    expect(snapshot.output?.reason).toBe('output truncated repeatedly');
  });

  it('is capped after a truncated batch when the step cap is reached', async () => {
    const { trail } = await runTraced({ root: [{ calls: [{ name: 'echo', input: { text: 'b' }, cutOff: true }] }] }, { task: 't', tools: [echo], maxSteps: 1 });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'capped']);
  });
});

describe('cancel', () => {
  it('cancels a streaming session', async () => {
    const { actor, trail } = startTraced({ root: [{ text: 'slow', delayMs: 10_000 }] }, { task: 't' });
    await until(actor, (s) => s.value === 'streaming');
    actor.send({ type: 'cancel', reason: 'user pressed stop' });
    expect(actor.getSnapshot().value).toBe('cancelled');
    expect(actor.getSnapshot().output).toMatchObject({ outcome: 'cancelled', reason: 'user pressed stop' });
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'cancelled']);
  });

  it('cancels a session waiting in readyForUser', async () => {
    const { actor } = await runTraced({ root: [{ text: 'hi' }] }, { task: 't' });
    actor.send({ type: 'cancel' });
    expect(actor.getSnapshot().value).toBe('cancelled');
  });
});
