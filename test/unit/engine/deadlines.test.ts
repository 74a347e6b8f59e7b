import { describe, expect, it } from 'vitest';
import { DeadlineQueue } from '../../../src/engine/deadlines.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('DeadlineQueue (the time limits of tool calls and the stall watchdog)', () => {
  it('fires deadlines in time order, each once, and never a cancelled one', async () => {
    const queue = new DeadlineQueue();
    const fired: string[] = [];
    queue.add(40, () => fired.push('c'));
    const b = queue.add(25, () => fired.push('b-cancelled'));
    queue.add(10, () => fired.push('a'));
    queue.add(25, () => fired.push('b'));
    b.cancel();
    b.cancel();
    expect(queue.size).toBe(3);
    await sleep(80);
    expect(fired).toEqual(['a', 'b', 'c']);
    expect(queue.size).toBe(0);
  });

  it('a deadline added while the timer waits for a later one still fires on time', async () => {
    const queue = new DeadlineQueue();
    const fired: number[] = [];
    const t0 = performance.now();
    queue.add(1_000, () => fired.push(1_000)).cancel();
    queue.add(20, () => fired.push(Math.round(performance.now() - t0)));
    await sleep(60);
    expect(fired).toHaveLength(1);
    expect(fired[0]).toBeGreaterThanOrEqual(19);
  });

  it('keeps many deadlines in order through random cancels', async () => {
    const queue = new DeadlineQueue();
    const fired: number[] = [];
    const handles = Array.from({ length: 200 }, (_, i) => ({ delay: (i * 37) % 50, handle: queue.add((i * 37) % 50, () => fired.push((i * 37) % 50)) }));
    const kept = handles.filter((_, i) => i % 3 !== 0);
    handles.forEach((h, i) => {
      if (i % 3 === 0) h.handle.cancel();
    });
    await sleep(100);
    expect(fired).toEqual(kept.map((h) => h.delay).sort((x, y) => x - y));
  });

  it('an aborted model request leaves no stall watchdog behind, even when its provider never settles', async () => {
    const { deadlines } = await import('../../../src/engine/deadlines.js');
    const { runModelStep, StepCancellation } = await import('../../../src/engine/model/streamModel.js');
    const before = deadlines.size;
    // A provider that ignores the abort and never settles (an SDK stream aborted mid-chunk once did).
    const provider = { name: 'stuck', stream: () => new Promise<never>(() => undefined) };
    const cancellation = new StepCancellation();
    const step = runModelStep(
      {
        provider,
        request: { agent: { name: 'a', path: ['a'], depth: 0, id: 'a' }, system: '', messages: [], tools: [] },
        listener: undefined,
        retry: { maxRetries: 0, baseDelayMs: 1, maxDelayMs: 1 },
        stallTimeoutMs: 600_000,
      },
      cancellation,
    );
    void step.catch(() => undefined);
    expect(deadlines.size).toBe(before + 1);
    cancellation.abort(new Error('cancelled'));
    // Its ref'd deadline would have kept the process alive for ten minutes.
    expect(deadlines.size).toBe(before);
  });
});
