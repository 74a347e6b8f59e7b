import type { InspectionEvent } from 'xstate';
import { describe, expect, it, vi } from 'vitest';
import { createSessionActor, waitForSettled, type SessionActor } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';

/**
 * A cancel that meets a sub-agent the moment it replied: XState tells an inspector of the
 * sub-agent's `done` event after the sub-agent reached its final state and before its crew takes
 * the event. A host's own inspect callback that cancels the root right there (exarch's own
 * commands wait for XState, see src/engine/inspection.ts; a host's direct `send` does not) makes
 * the crew pass the cancel on while that member is final: it must go only to members still
 * running, or XState says `Event "cancel" was sent to stopped actor`.
 */
describe('a cancel as a sub-agent replies', () => {
  it('is passed on only to the sub-agents still running, never to the one that has just replied', async () => {
    const provider = scriptedProvider({
      agents: {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'quick', task: 'reply at once' } },
              { name: 'agent', input: { name: 'slow', task: 'take your time' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'never asked' },
        ],
        quick: [{ calls: [{ name: 'reply', input: { result: 'done' } }] }],
        slow: [{ text: 'still thinking', delayMs: 5_000 }],
      },
    });
    let root: SessionActor | undefined;
    let cancelled = false;
    // The host's own inspector: at the first sub-agent's done event, the root is cancelled at once.
    const inspect = (event: InspectionEvent): void => {
      if (cancelled || event.type !== '@xstate.event' || !event.event.type.startsWith('xstate.done.actor.')) return;
      cancelled = true;
      root?.send({ type: 'cancel', reason: 'the host has enough' });
    };
    // Kept from the output: the crew itself, stopped with the root under that done event, is still
    // sent it by XState (a host's direct send inside an inspection callback; exarch's commands wait).
    const warn = vi.spyOn(console, 'warn').mockImplementation(() => undefined);
    root = createSessionActor({ provider, task: 'go' }, { inspect });
    root.start();
    const settled = await waitForSettled(root);
    const cancelWarnings = warn.mock.calls.filter((args) => /^Event "cancel" was sent to stopped actor/.test(String(args[0])));
    warn.mockRestore();
    expect(cancelled).toBe(true);
    expect(settled.value).toBe('cancelled');
    expect(cancelWarnings).toEqual([]);
  });
});
