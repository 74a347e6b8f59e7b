import { describe, expect, it } from 'vitest';
import { newRunId } from '../../../src/run/durableRun.js';

/** Crockford's base 32, as the ULID spec writes it (no I, L, O, U). */
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';

/** The milliseconds a ULID's first 10 characters encode. */
function timeOf(id: string): number {
  return [...id.slice(0, 10)].reduce((ms, char) => ms * 32 + CROCKFORD.indexOf(char), 0);
}

describe('run ids', () => {
  it('are ULIDs: 26 characters of Crockford base 32, the first 10 the time the run started', () => {
    const before = Date.now();
    const id = newRunId();
    const after = Date.now();
    expect(id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    expect(timeOf(id)).toBeGreaterThanOrEqual(before);
    expect(timeOf(id)).toBeLessThanOrEqual(after);
  });

  it('differ from one another, with every symbol in every random position over many ids', () => {
    const ids = Array.from({ length: 5000 }, () => newRunId());
    expect(new Set(ids).size).toBe(ids.length);
    // 16 random characters of 32 symbols each: 5,000 ids leave a symbol unseen in a position
    // with probability about 16 × 32 × (31/32)^5000, below 10^-65.
    for (let position = 10; position < 26; position++) {
      expect(new Set(ids.map((id) => id[position])).size, `position ${position}`).toBe(32);
    }
  });

  it('sort by the time their runs started', async () => {
    const first = newRunId();
    await new Promise((resolve) => setTimeout(resolve, 3));
    const second = newRunId();
    expect([second, first].sort()).toEqual([first, second]);
  });
});
