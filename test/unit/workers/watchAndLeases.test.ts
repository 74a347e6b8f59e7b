import { afterEach, describe, expect, it, vi } from 'vitest';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import type { RemoteChildSpec } from '../../../src/engine/remoteChildren.js';
import type { JobStore, SessionLease, SessionRef, SessionSignal, WatchedSession } from '../../../src/store/jobStore.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import { RemoteWatch } from '../../../src/workers/remoteWatch.js';
import { SessionLeases } from '../../../src/workers/sessionLeases.js';

/**
 * What a worker holding many runs' sessions asks of the store (issue 40): its watch and its
 * leases cost one statement per poll or renewal for all of them, not one per run or per session.
 * The store is a fake that records each call (a call is one statement in the Postgres store).
 */

const usage = { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
const outcomeRow = (runId: string, session: string, text: string): JournalRow => {
  const record: JournalRecord = { type: 'outcome', outcome: 'replied', text, usage, totalUsage: usage };
  return { runId, seq: 1, session, ts: 0, record };
};
const identity = (id: string) => ({ id, name: id.split('/').at(-1) ?? id, path: id.split('/'), depth: id.split('/').length - 1 });
const spec = (id: string): RemoteChildSpec => ({ actorId: id, parent: identity('root'), agent: identity(id), task: 'work' });

/** A store for the watch: answers with `ended`'s outcomes and `cancelled`'s cancels, and records what it was asked. */
function watchStore(ended: readonly JournalRow[], cancelled: readonly SessionSignal[]) {
  const asked = { outcomes: [] as SessionRef[][], signals: [] as WatchedSession[][] };
  const store = {
    outcomes: async (sessions: readonly SessionRef[]) => {
      asked.outcomes.push([...sessions]);
      return ended.filter((row) => sessions.some((s) => s.runId === row.runId && s.session === row.session));
    },
    sessionSignals: async (sessions: readonly WatchedSession[]) => {
      asked.signals.push([...sessions]);
      return cancelled.filter((signal) => sessions.some((s) => s.runId === signal.runId && s.session === signal.session));
    },
  } as unknown as JobStore;
  return { store, asked };
}

describe("a worker's watch and leases, for many runs at once", () => {
  afterEach(() => vi.useRealTimers());

  it('the watch asks once per poll for the results and the signals of every run, and hands each to its own session', async () => {
    vi.useFakeTimers();
    const ended = [outcomeRow('r1', 'root/a', 'r1 a'), outcomeRow('r2', 'root/a', 'r2 a')];
    const { store, asked } = watchStore(ended, [{ runId: 'r3', session: 'root/x', cancel: 'stop' }]);
    const watch = new RemoteWatch(store);
    const abort = new AbortController();
    const got: string[] = [];
    for (const runId of ['r1', 'r2', 'r3'])
      for (const id of ['root/a', 'root/b'])
        void watch.child(runId, spec(id), abort.signal, async () => undefined).result.then((r) => got.push(`${runId}:${r.text}`));
    const cancels: string[] = [];
    for (const runId of ['r1', 'r2', 'r3'])
      watch.steering(runId, 'root/x', abort.signal, {
        subtree: false,
        onCancel: (reason, session) => cancels.push(`${runId}:${session}:${reason}`),
        onMessages: () => undefined,
      });
    await vi.advanceTimersByTimeAsync(0);
    // One look of each kind for the three runs, naming every session waited on or running.
    expect(asked.outcomes).toHaveLength(1);
    expect(asked.signals).toHaveLength(1);
    expect(asked.outcomes[0]).toHaveLength(6);
    expect(asked.signals[0]?.map((s) => s.runId)).toEqual(['r1', 'r2', 'r3']);
    expect(got).toEqual(['r1:r1 a', 'r2:r2 a']);
    expect(cancels).toEqual(['r3:root/x:stop']);
    // The next poll asks only for what is still awaited: one look again, for the four left.
    await vi.advanceTimersByTimeAsync(200);
    expect(asked.outcomes).toHaveLength(2);
    expect(asked.outcomes[1]?.map((s) => `${s.runId}:${s.session}`)).toEqual(['r1:root/b', 'r2:root/b', 'r3:root/a', 'r3:root/b']);
    abort.abort();
    watch.stop();
  });

  it('the leases of every session held, of every run, are renewed in one call a third of the lease; one let go is not', async () => {
    vi.useFakeTimers();
    const renewed: SessionLease[][] = [];
    const leases = new SessionLeases(
      {
        renewSessions: async (held: readonly SessionLease[]) => {
          renewed.push([...held]);
          return [];
        },
      },
      30_000,
    );
    const letGo = [leases.hold('r1', 'root/a', 't1'), leases.hold('r1', 'root/b', 't2'), leases.hold('r2', 'root', 't3')];
    await vi.advanceTimersByTimeAsync(10_000);
    expect(renewed).toEqual([
      [
        { runId: 'r1', session: 'root/a', token: 't1' },
        { runId: 'r1', session: 'root/b', token: 't2' },
        { runId: 'r2', session: 'root', token: 't3' },
      ],
    ]);
    letGo[1]?.();
    await vi.advanceTimersByTimeAsync(10_000);
    expect(renewed[1]?.map((l) => l.token)).toEqual(['t1', 't3']);
    letGo[0]?.();
    letGo[2]?.();
    await vi.advanceTimersByTimeAsync(30_000);
    // None held: no timer, no call.
    expect(renewed).toHaveLength(2);
    expect(vi.getTimerCount()).toBe(0);
  });
});
