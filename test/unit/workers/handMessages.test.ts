import { afterEach, describe, expect, it, vi } from 'vitest';
import { createSessionActor } from '../../../src/run/runtime.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import { ScriptedProvider } from '../../../src/testing/scriptedProvider.js';
import { handMessages } from '../../../src/workers/runHere.js';
import { untilSettled } from '../../support/helpers.js';

/** A job hands the session it runs the steering messages a look found in its journal; the look may answer after the session stopped. */

const queued = (seq: number, text: string): JournalRow => ({ runId: 'r', seq, session: 'root', ts: 0, record: { type: 'queued', text } });

async function restingRoot(): Promise<{ actor: ReturnType<typeof createSessionActor>; provider: ScriptedProvider }> {
  const provider = new ScriptedProvider({ agents: { root: [{ text: 'first' }, { text: 'second' }] } });
  const actor = createSessionActor({ provider, task: 'go' });
  actor.start();
  await untilSettled(actor);
  return { actor, provider };
}

describe('messages from elsewhere, handed to the job’s session', () => {
  afterEach(() => vi.restoreAllMocks());

  it('a running session takes the message as its next turn, and seen moves past it', async () => {
    const { actor, provider } = await restingRoot();
    const seen = { seq: 3 };
    handMessages(actor, 'root', [queued(3, 'old'), queued(4, 'also check the README')], seen);
    expect(seen.seq).toBe(4);
    await untilSettled(actor);
    const asked = provider.requestsOf('root');
    expect(asked).toHaveLength(2);
    expect(JSON.stringify(asked[1]?.lastMessage)).toContain('also check the README');
    actor.stop();
  });

  it('a session stopped before the look answered (parked, handed back) is sent nothing, and seen stays: the look before parking finds the message', async () => {
    const { actor } = await restingRoot();
    actor.stop();
    const warn = vi.spyOn(console, 'warn');
    const seen = { seq: 3 };
    handMessages(actor, 'root', [queued(4, 'also check the README')], seen);
    expect(warn.mock.calls.filter((args) => /was sent to stopped actor/.test(String(args[0])))).toEqual([]);
    expect(seen.seq).toBe(3);
  });
});
