import { afterEach, describe, expect, it, vi } from 'vitest';
import { ExchangeOrder } from '../../../src/replay/exchangeOrder.js';

/**
 * A replay hands its answers out in the recorded order, and gives up waiting for something that
 * does not happen again after a while: 2 s, plus twice the time the recorded run took to get
 * there. Timers are faked: the test reads the waits, it does not sleep through them.
 *
 * The recording here: position 0, agent A's request begins; 1, agent B's request begins, 5 s
 * later in the recorded run (after a slow tool, say); 2, A's answer arrives.
 */
describe('ExchangeOrder', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  function replay(times?: number[]) {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const order = new ExchangeOrder(3, times);
    order.happened(0);
    let released = false;
    void order.turn(2, new AbortController().signal).then(() => {
      released = true;
    });
    return { order, released: () => released };
  }

  it('gives an answer once what came before it in the recording has happened again', async () => {
    const { order, released } = replay([0, 5_000, 5_100]);
    await vi.advanceTimersByTimeAsync(1_000);
    expect(released()).toBe(false);
    order.happened(1);
    await vi.advanceTimersByTimeAsync(1);
    expect(released()).toBe(true);
  });

  it('waits out a slow stretch of the recording: 2 s plus twice its length (5 s) before it gives up', async () => {
    const { released } = replay([0, 5_000, 5_100]);
    await vi.advanceTimersByTimeAsync(11_990);
    expect(released()).toBe(false);
    await vi.advanceTimersByTimeAsync(20);
    expect(released()).toBe(true);
  });

  it('waits out at most a minute of a recorded stretch: one of ten minutes gives up after 2 s + 2 × 60 s', async () => {
    const { released } = replay([0, 600_000, 600_100]);
    await vi.advanceTimersByTimeAsync(121_990);
    expect(released()).toBe(false);
    await vi.advanceTimersByTimeAsync(20);
    expect(released()).toBe(true);
  });

  it('a recording without times: gives up after 2 s of nothing moving', async () => {
    const { released } = replay();
    await vi.advanceTimersByTimeAsync(1_990);
    expect(released()).toBe(false);
    await vi.advanceTimersByTimeAsync(20);
    expect(released()).toBe(true);
  });

  it('an abort takes the waiting answer out: nothing is released for it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate'] });
    const order = new ExchangeOrder(3, [0, 10, 20]);
    const abort = new AbortController();
    const outcome = order.turn(2, abort.signal).then(
      () => 'released',
      (reason: unknown) => `rejected: ${String(reason)}`,
    );
    abort.abort('stopped');
    await vi.advanceTimersByTimeAsync(60_000);
    expect(await outcome).toBe('rejected: stopped');
  });
});
