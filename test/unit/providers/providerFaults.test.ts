import { describe, expect, it } from 'vitest';
import { describeError, ProviderError, StallError } from '../../../src/engine/model/errors.js';
import { AttemptAbort, backoffDelay, sleep, StepCancellation } from '../../../src/engine/model/streamModel.js';

/** How a provider's faults read, how long a retry waits, and how a step's cancellation reaches it. */

describe('provider faults as a host reads them', () => {
  it('a fault carries its status, whether it is retried, and a kind that defaults from that', () => {
    const transient = new ProviderError('overloaded', { retryable: true, status: 529 });
    expect(transient).toMatchObject({ name: 'ProviderError', message: 'overloaded', retryable: true, status: 529, kind: 'transient' });
    expect(transient.cause).toBeUndefined();
    expect('cause' in transient).toBe(false);
    const fatal = new ProviderError('bad key', { retryable: false, status: 401, kind: 'http', cause: 'why' });
    expect(fatal).toMatchObject({ retryable: false, status: 401, kind: 'http', cause: 'why' });
    expect(new ProviderError('x', { retryable: false }).kind).toBe('fatal');
    expect(new ProviderError('x', { retryable: false }).status).toBeUndefined();
  });

  it('a stall says how long the stream was silent, and is retried', () => {
    const stall = new StallError(250);
    expect(stall).toBeInstanceOf(ProviderError);
    expect(stall).toMatchObject({ name: 'StallError', message: 'model stream stalled: no event for 250 ms', retryable: true, kind: 'stall' });
  });

  it('any thrown value becomes one line of text', () => {
    expect(describeError(new Error('line one\n  line two\t end '))).toBe('line one line two end');
    expect(describeError('  plain\nstring ')).toBe('plain string');
    expect(describeError({ code: 7 })).toBe('{"code":7}');
    expect(describeError(42)).toBe('42');
    expect(describeError(undefined)).toBe('undefined');
    expect(describeError(new Error(''))).toBe('unknown error');
    expect(describeError('   ')).toBe('unknown error');
  });
});

describe('retry backoff', () => {
  const policy = { maxRetries: 9, baseDelayMs: 100, maxDelayMs: 1000 };
  /** Many draws of the jittered delay for one attempt. */
  const draws = (attempt: number): number[] => Array.from({ length: 400 }, () => backoffDelay(policy, attempt));

  it('waits between half and all of base × 2^attempt, capped at the maximum, and jitters within that', () => {
    for (const [attempt, ceiling] of [
      [0, 100],
      [1, 200],
      [3, 800],
      [4, 1000],
      [8, 1000],
    ] as const) {
      const delays = draws(attempt);
      expect(Math.min(...delays)).toBeGreaterThanOrEqual(ceiling / 2);
      expect(Math.max(...delays)).toBeLessThanOrEqual(ceiling);
      // Full jitter over the upper half: 400 draws spread over most of it.
      expect(Math.max(...delays) - Math.min(...delays)).toBeGreaterThan(ceiling / 4);
      expect(delays.every((d) => Number.isInteger(d))).toBe(true);
    }
  });
});

describe('cancelling a model step', () => {
  it('an attempt aborted before anyone reads its signal hands out an aborted signal with the reason', () => {
    const attempt = new AttemptAbort();
    attempt.abort('first');
    attempt.abort('second');
    expect(attempt.signal.aborted).toBe(true);
    expect(attempt.signal.reason).toBe('first');
  });

  it('an attempt whose signal is read first is aborted through it, once', () => {
    const attempt = new AttemptAbort();
    const signal = attempt.signal;
    expect(signal.aborted).toBe(false);
    expect(attempt.signal).toBe(signal);
    attempt.abort('stop');
    attempt.abort('again');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('stop');
  });

  it('a step abort reaches the current attempt, and every later attempt starts aborted', () => {
    const step = new StepCancellation();
    expect(step.isAborted).toBe(false);
    expect(step.abortReason).toBeUndefined();
    const earlier = step.next();
    const current = step.next();
    step.abort('user cancelled');
    step.abort('later');
    expect(step.isAborted).toBe(true);
    expect(step.abortReason).toBe('user cancelled');
    expect(current.signal.reason).toBe('user cancelled');
    expect(earlier.signal.aborted).toBe(false);
    const after = step.next();
    expect(after.signal.aborted).toBe(true);
    expect(after.signal.reason).toBe('user cancelled');
  });

  it('a backoff wait ends early with the abort reason, or at once when already aborted', async () => {
    const controller = new AbortController();
    const waiting = sleep(60_000, controller.signal);
    controller.abort('cancelled');
    await expect(waiting).rejects.toBe('cancelled');
    await expect(sleep(60_000, AbortSignal.abort('gone'))).rejects.toBe('gone');
    await expect(sleep(1, new AbortController().signal)).resolves.toBeUndefined();
  });
});
