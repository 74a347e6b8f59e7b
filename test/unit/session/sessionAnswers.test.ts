import { describe, expect, it } from 'vitest';
import type { LogRecord } from '../../../src/index.js';
import { runTraced, startTraced, toolResults, until, userTexts } from '../../support/helpers.js';

/**
 * What a session says back, read where a user reads it: the tool results the model gets for the
 * protocol calls, the tag its parent gets, and the reason a finished session gives. The expected
 * texts are written out here from what the session promises, not taken from machines/session.ts.
 */

const SLOW = { text: 'never finishes', delayMs: 60_000 };

/** The outcome record a session's log ends with. */
function outcomeOf(records: readonly LogRecord[]): LogRecord | undefined {
  return records.find((r) => r.type === 'outcome');
}

describe('what a session answers its model', () => {
  it('cancel_agent is answered with what will arrive, and the child says who cancelled it', async () => {
    const { snapshot, logs } = await runTraced(
      {
        root: [
          { calls: [{ name: 'agent', input: { name: 'c', task: 'work' } }] },
          { calls: [{ name: 'cancel_agent', input: { name: 'c' } }] },
          { text: 'waiting' },
          { text: 'done' },
        ],
        c: [SLOW],
      },
      { task: 'go' },
    );
    expect(toolResults(snapshot.context.messages).map((r) => r.content)).toEqual([
      "Sub-agent 'c' started. Its result will arrive later as a message beginning with [agent 'c' …].",
      "Sub-agent 'c' is being cancelled; [agent 'c' was cancelled] will arrive.",
    ]);
    expect(userTexts(snapshot.context.messages)).toContain("[agent 'c' was cancelled]");
    expect(outcomeOf(logs.records('root/c'))).toMatchObject({ outcome: 'cancelled', reason: 'cancelled by root' });
  });

  it('a second reply in one response is refused and the first one is what the parent gets', async () => {
    const { snapshot, last } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'work' } }] }, { text: 'waiting' }, { text: 'done' }],
        c: [
          {
            calls: [
              { name: 'reply', input: { result: 'first' } },
              { name: 'reply', input: { result: 'second' } },
            ],
          },
        ],
      },
      { task: 'go' },
    );
    const child = last.get('root/c');
    expect(toolResults(child?.context.messages ?? []).map((r) => [r.content, r.is_error ?? false])).toEqual([
      ['Reply recorded. Your session ends once the other calls of this response have run.', false],
      ['reply was already called in this response; the first reply stands', true],
    ]);
    expect(userTexts(snapshot.context.messages)).toContain("[agent 'c' replied]\nfirst");
  });

  it('two wait_for_agents in one response: the second is refused, the first waits', async () => {
    const { snapshot } = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'c', task: 'work' } },
              { name: 'wait_for_agents', input: {} },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'done' },
        ],
        c: [{ calls: [{ name: 'reply', input: { result: 'r' } }] }],
      },
      { task: 'go' },
    );
    expect(toolResults(snapshot.context.messages).map((r) => r.content)).toEqual([
      "Sub-agent 'c' started. Its result will arrive later as a message beginning with [agent 'c' …].",
      '1 sub-agent finished; their results follow.',
      'wait_for_agents was already called in this response; the first one stands',
    ]);
  });
});

describe('why a session ended', () => {
  it('a refusal and a full context window each fail the session with their own reason', async () => {
    const refused = await runTraced({ root: [{ text: 'no', stopReason: 'refusal' }] }, { task: 'go' });
    expect(refused.snapshot.output).toMatchObject({ outcome: 'failed', reason: 'the model refused to continue (stop reason: refusal)' });
    const full = await runTraced({ root: [{ text: 'x', stopReason: 'model_context_window_exceeded' }] }, { task: 'go' });
    expect(full.snapshot.output).toMatchObject({ outcome: 'failed', reason: 'the conversation exceeded the model context window' });
  });

  it('the step cap names its size', async () => {
    const { snapshot } = await runTraced({ root: () => ({ calls: [{ name: 'wait_for_agents', input: {} }] }) }, { task: 'go', maxSteps: 3 });
    expect(snapshot.output).toMatchObject({ outcome: 'capped', reason: 'step cap of 3 reached', text: '' });
  });

  it('children still running are cancelled with the reason their parent ended', async () => {
    const capped = await runTraced({ root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'w' } }] }], c: [SLOW] }, { task: 'go', maxSteps: 1 });
    expect(outcomeOf(capped.logs.records('root/c'))).toMatchObject({ outcome: 'cancelled', reason: 'parent hit the step cap' });

    const failed = await runTraced(
      { root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'w' } }] }, { text: 'no', stopReason: 'refusal' }], c: [SLOW] },
      { task: 'go' },
    );
    expect(outcomeOf(failed.logs.records('root/c'))).toMatchObject({ outcome: 'cancelled', reason: 'parent failed' });

    const replied = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'w' } }] }, { text: 'waiting' }, { text: 'done' }],
        c: [
          {
            calls: [
              { name: 'agent', input: { name: 'd', task: 'w' } },
              { name: 'reply', input: { result: 'r' } },
            ],
          },
        ],
        d: [SLOW],
      },
      { task: 'go' },
    );
    expect(outcomeOf(replied.logs.records('root/c/d'))).toMatchObject({ outcome: 'cancelled', reason: 'parent replied' });
  });

  it('a cancelled root gives the reason it was cancelled with, or none, and so do its children', async () => {
    const traced = startTraced({ root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 'w' } }] }, SLOW], c: [SLOW] }, { task: 'go' });
    await until(traced.actor, (s) => s.context.children.size === 1 && s.value === 'streaming');
    traced.actor.send({ type: 'cancel', reason: 'user pressed Ctrl-C' });
    expect(traced.actor.getSnapshot().output).toMatchObject({ outcome: 'cancelled', reason: 'user pressed Ctrl-C' });
    expect(outcomeOf(traced.logs.records('root/c'))).toMatchObject({ outcome: 'cancelled', reason: 'parent cancelled' });

    const quiet = startTraced({ root: [SLOW] }, { task: 'go' });
    await until(quiet.actor, (s) => s.value === 'streaming');
    quiet.actor.send({ type: 'cancel' });
    const output = quiet.actor.getSnapshot().output;
    expect(output?.outcome).toBe('cancelled');
    expect(output && 'reason' in output).toBe(false);
  });
});
