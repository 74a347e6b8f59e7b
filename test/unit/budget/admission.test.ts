import { describe, expect, it } from 'vitest';
import { Admission, FREE, reaches, roomIn, type AdmissionOwner, type Held } from '../../../src/engine/admission.js';

/**
 * The admission rule of a budget (issue 37), at its edges: a request fits when its estimate and
 * what is spent and held come to the budget exactly; past it, it waits while others run, and when
 * none runs it goes alone while the spend is under the budget, never once the spend has reached it.
 */

const idle = (): Held => ({ tokens: 0, cost: 0, requests: 0 });

describe('roomIn', () => {
  it('admits anything where no bound is set', () => {
    expect(roomIn({ tokens: 10 ** 9, cost: 10 ** 9, requests: 9 }, 10 ** 9, 10 ** 9, undefined, undefined, 10 ** 9, 10 ** 9)).toBe('yes');
  });

  it('tokens: fits to the last token, waits past it while another runs, goes alone under the budget, never at it', () => {
    const running: Held = { tokens: 300, cost: 0, requests: 1 };
    expect(roomIn(running, 200, 0, 1_000, undefined, 500, 0)).toBe('yes');
    expect(roomIn(running, 200, 0, 1_000, undefined, 501, 0)).toBe('wait');
    expect(roomIn(idle(), 999, 0, 1_000, undefined, 5_000, 0)).toBe('yes');
    expect(roomIn(idle(), 1_000, 0, 1_000, undefined, 1, 0)).toBe('never');
  });

  it('cost: the same rule in US$, each bound on its own', () => {
    const running: Held = { tokens: 0, cost: 0.3, requests: 1 };
    expect(roomIn(running, 0, 0.2, undefined, 1, 0, 0.5)).toBe('yes');
    expect(roomIn(running, 0, 0.2, undefined, 1, 0, 0.51)).toBe('wait');
    // Tokens fit, cost does not: it waits.
    expect(roomIn(running, 0, 0.2, 10_000, 1, 10, 0.6)).toBe('wait');
    // Cost fits, tokens do not: it waits.
    expect(roomIn({ tokens: 900, cost: 0, requests: 1 }, 0, 0, 1_000, 1, 200, 0.1)).toBe('wait');
    expect(roomIn(idle(), 0, 0.99, undefined, 1, 0, 5)).toBe('yes');
    expect(roomIn(idle(), 0, 1, undefined, 1, 0, 0.01)).toBe('never');
  });

  it('reaches a bound at it, not before; a missing bound is never reached', () => {
    expect(reaches(100, 99, undefined, 10)).toBe(false);
    expect(reaches(100, 100, undefined, 10)).toBe(true);
    expect(reaches(undefined, 10 ** 9, 1, 0.99)).toBe(false);
    expect(reaches(undefined, 0, 1, 1)).toBe(true);
    expect(reaches(undefined, 10 ** 9, undefined, 10 ** 9)).toBe(false);
  });
});

describe('Admission', () => {
  it('gives back exactly what it held, tokens and US$, on every level, once; its owner hears of it once', () => {
    const levels: Held[] = [
      { tokens: 500, cost: 0.5, requests: 2 },
      { tokens: 700, cost: 0.7, requests: 3 },
    ];
    const heard: unknown[] = [];
    const owner: AdmissionOwner = { released: (admission, kept) => heard.push([admission.tokens, kept]) };
    const admission = new Admission(owner, levels, 200, 0.2, 1_000, undefined);
    const kept = { inputTokens: 1, outputTokens: 2, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
    admission.release(kept);
    admission.release(kept);
    expect(levels.map((h) => [h.tokens, Math.round(h.cost * 100) / 100, h.requests])).toEqual([
      [300, 0.3, 1],
      [500, 0.5, 2],
    ]);
    expect(heard).toEqual([[200, kept]]);
  });

  it('FREE holds nothing: releasing it, however often, changes nothing', () => {
    FREE.release();
    FREE.release();
    expect([FREE.tokens, FREE.cost]).toEqual([0, 0]);
  });
});
