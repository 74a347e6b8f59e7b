import { describe, expect, it } from 'vitest';
import { clip, elisionMarker, renderValue } from '../../../src/engine/render.js';

/**
 * `clip` at its edges: the first and last code points that are surrogate halves (U+D800, U+DBFF,
 * U+DC00, U+DFFF), a cap of 0, caps that are not whole numbers, and every cap around a length.
 * Expected values are written out or checked by arithmetic on the input, never by calling clip.
 */

const LONE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
const MARKER = /^([\s\S]*)\n\n\[… (\d+) characters elided by exarch …\]\n\n([\s\S]*)$/;

/** Pairs made of the extreme surrogate halves: U+10000 is D800 DC00, U+10FFFF is DBFF DFFF. */
const LOWEST = '\uD800\uDC00';
const HIGHEST = '\uDBFF\uDFFF';

/** The marker's length for a count, spelled out here rather than taken from src/engine/render.ts. */
const markerLength = (elided: number): number => `\n\n[… ${elided} characters elided by exarch …]\n\n`.length;

/** Head, count and tail of a clipped text, checked against the input by arithmetic. */
function checkElided(input: string, cap: number, out: string): void {
  expect(out.length).toBeLessThanOrEqual(cap);
  expect(out).not.toMatch(LONE);
  const parts = MARKER.exec(out);
  expect(parts, `no marker in ${JSON.stringify(out)}`).not.toBeNull();
  const [, head = '', count = '', tail = ''] = parts ?? [];
  expect(input.startsWith(head)).toBe(true);
  expect(input.endsWith(tail)).toBe(true);
  expect(head.length + Number(count) + tail.length).toBe(input.length);
}

describe('clip at its edges', () => {
  it('a cap of 0 gives the empty text; a cap that is not a whole number is refused', () => {
    expect(clip('abc', 0)).toBe('');
    expect(clip('', 0)).toBe('');
    expect(() => clip('abc', 1.5)).toThrow(new RangeError('clip: cap must be a non-negative integer, got 1.5'));
    expect(() => clip('abc', Number.NaN)).toThrow('clip: cap must be a non-negative integer, got NaN');
  });

  it('a text exactly as long as the cap is returned whole, however long', () => {
    for (const length of [1, 60, 100, 1000]) {
      const text = 'x'.repeat(length);
      expect(clip(text, length)).toBe(text);
    }
  });

  it('under a cap smaller than the marker, the head is cut before a surrogate pair, never inside it', () => {
    for (const pair of [LOWEST, HIGHEST]) {
      const text = pair.repeat(10);
      expect(clip(text, 5)).toBe(pair.repeat(2));
      expect(clip(text, 4)).toBe(pair.repeat(2));
      expect(clip(text, 1)).toBe('');
    }
    // A character just outside the surrogate range is cut like any other.
    expect(clip('\uD7FF'.repeat(10), 5)).toBe('\uD7FF'.repeat(5));
    expect(clip('\uE000'.repeat(10), 5)).toBe('\uE000'.repeat(5));
  });

  it('with room for the marker, neither cut splits a pair of the extreme surrogate halves', () => {
    for (const pair of [LOWEST, HIGHEST]) {
      const text = pair.repeat(100);
      for (let cap = 60; cap <= 70; cap++) checkElided(text, cap, clip(text, cap));
    }
  });

  it('characters just outside the surrogate range are kept to the last one the cap allows', () => {
    for (const ch of ['\uD7FF', '\uE000']) {
      const text = ch.repeat(200);
      for (let cap = 60; cap <= 64; cap++) {
        const out = clip(text, cap);
        checkElided(text, cap, out);
        expect(out.length).toBe(cap);
      }
    }
  });

  it('ASCII is clipped to the most the cap allows: half the kept text (rounded up) before the marker, half after', () => {
    const text = 'A'.repeat(5000) + 'B'.repeat(5000);
    for (const cap of [60, 61, 100, 101, 999, 1000, 1001, 4096, 9990]) {
      // The largest kept length whose marker still fits, found by arithmetic on the marker's length.
      let keep = cap;
      while (keep + markerLength(text.length - keep) > cap) keep -= 1;
      const expected = `${'A'.repeat(Math.ceil(keep / 2))}\n\n[… ${text.length - keep} characters elided by exarch …]\n\n${'B'.repeat(Math.floor(keep / 2))}`;
      expect(clip(text, cap)).toBe(expected);
    }
  });

  it('a cap with room for the marker and nothing beside it gives the head of the text, not a bare marker', () => {
    const text = 'x'.repeat(500);
    const cap = markerLength(500);
    expect(clip(text, cap)).toBe('x'.repeat(cap));
  });

  it('at every cap, a text of surrogate pairs keeps whole pairs and uses the cap but for the halves it cut around', () => {
    // Counts cross 10, 100 and 1000 here, where moving a cut inwards can add a digit to the marker.
    for (const text of [`x${LOWEST.repeat(600)}`, HIGHEST.repeat(600), `xy${LOWEST.repeat(30)}${'z'.repeat(7)}`]) {
      for (let cap = markerLength(text.length) + 4; cap < text.length; cap++) {
        const out = clip(text, cap);
        checkElided(text, cap, out);
        expect(cap - out.length, `cap ${cap}`).toBeLessThanOrEqual(3);
      }
    }
  });

  it('the marker reads the count it is given', () => {
    expect(elisionMarker(7)).toBe('\n\n[… 7 characters elided by exarch …]\n\n');
  });
});

describe('renderValue beyond JSON', () => {
  it('a bigint renders as its digits, a symbol and a function as their text', () => {
    expect(renderValue(12345678901234567890n)).toBe('12345678901234567890');
    expect(renderValue(Symbol('s'))).toBe('Symbol(s)');
    expect(renderValue(0)).toBe('0');
    expect(renderValue(true)).toBe('true');
  });

  it('numbers that JSON has no text for render as JSON renders them', () => {
    expect(renderValue(Number.NaN)).toBe('null');
    expect(renderValue(Number.POSITIVE_INFINITY)).toBe('null');
  });

  it('an object whose toJSON gives nothing renders to nothing', () => {
    expect(renderValue({ toJSON: () => undefined })).toBe('');
  });
});
