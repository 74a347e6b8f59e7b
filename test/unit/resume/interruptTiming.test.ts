import { describe, expect, it } from 'vitest';
import { createRunObserver, MemoryRunStore, startRun } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';

/**
 * When an interrupt takes effect. Given by the host's code, it cancels the tree before it returns:
 * what the host reads next already shows the root cancelled. Given by a run observer's listener,
 * which XState calls in the middle of its own work, it waits for that work (a microtask), so a
 * crew is never stopped under an event XState is delivering (src/engine/inspection.ts).
 */
describe('interrupt', () => {
  const slowRoot = () => scriptedProvider({ agents: { root: [{ text: 'thinking', delayMs: 5_000 }] } });

  it('from the host’s own code: the root is cancelled by the time interrupt() returns, with an observer attached or not', async () => {
    // With an observer: its listeners have run (and returned) many times by now, which must leave no mark.
    const observer = createRunObserver();
    const seen: string[] = [];
    observer.subscribe((event) => seen.push(event.type));
    const run = await startRun('go', { provider: slowRoot() }, { store: new MemoryRunStore(), actor: { inspect: observer.inspect } });
    await new Promise((resolve) => setTimeout(resolve, 10));
    expect(seen.length).toBeGreaterThan(0);
    run.interrupt();
    expect(run.actor.getSnapshot().value).toBe('cancelled');
    expect((await run.result).status).toBe('interrupted');
  });

  it('from an observer’s listener: it takes effect once XState is done, and the run ends interrupted', async () => {
    const observer = createRunObserver();
    const run = await startRun('go', { provider: slowRoot() }, { store: new MemoryRunStore(), actor: { inspect: observer.inspect } });
    const seenInListener: string[] = [];
    observer.subscribe((event) => {
      if (event.type !== 'agent.state' || event.state !== 'streaming' || seenInListener.length > 0) return;
      run.interrupt();
      seenInListener.push(String(run.actor.getSnapshot().value));
    });
    expect((await run.result).status).toBe('interrupted');
    expect(seenInListener).toEqual(['streaming']);
    expect(run.actor.getSnapshot().value).toBe('cancelled');
  });
});
