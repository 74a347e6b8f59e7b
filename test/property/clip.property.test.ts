import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { assertToolPairing, findPairingProblems, PairingError } from '../../src/engine/pairing.js';
import { clip, renderValue } from '../../src/engine/render.js';
import { renderAgentResult } from '../../src/engine/inbox.js';
import type { Message } from '../../src/engine/types.js';

/**
 * `clip` and its neighbours against oracles written from CONTRACT §3 alone: the marker's text is
 * spelled out here, lengths are checked by arithmetic, and a kept head and tail must be a real
 * prefix and suffix of the input. (Mutation testing found these rules held only by examples.)
 */

const MARKER = /^([\s\S]*)\n\n\[… (\d+) characters elided by exarch …\]\n\n([\s\S]*)$/;
/** The marker's length for a count, spelled out independently of src/engine/render.ts. */
const markerLength = (elided: number): number => `\n\n[… ${elided} characters elided by exarch …]\n\n`.length;

/** Text with surrogate pairs (emoji, CJK extension B) among ASCII, never a lone surrogate. */
const unit = fc.constantFrom('a', 'b', ' ', '\n', '😀', '𠀋', 'é');
const text = fc.string({ unit, minLength: 0, maxLength: 400 });
const long = fc.string({ unit, minLength: 80, maxLength: 600 }).filter((s) => s.length >= 80);
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

describe('clip (CONTRACT §3: middle elision, at most the cap, marker included)', () => {
  it('returns a text that fits unchanged', () => {
    fc.assert(
      fc.property(text, fc.nat(50), (input, extra) => {
        expect(clip(input, input.length + extra)).toBe(input);
      }),
    );
  });

  it('keeps a real head and tail around a marker that counts what it removed, using the cap but never passing it', () => {
    fc.assert(
      fc.property(long, fc.double({ min: 0, max: 1, noNaN: true }), (input, at) => {
        // Caps with room for the marker and a few characters beside it, up to one short of the text.
        const least = markerLength(input.length) + 4;
        const cap = least + Math.floor(at * (input.length - 1 - least));
        const out = clip(input, cap);
        expect(out.length).toBeLessThanOrEqual(cap);
        const parts = MARKER.exec(out);
        expect(parts, JSON.stringify(out)).not.toBeNull();
        const [, head = '', count = '', tail = ''] = parts ?? [];
        expect(input.startsWith(head)).toBe(true);
        expect(input.endsWith(tail)).toBe(true);
        expect(head.length + Number(count) + tail.length).toBe(input.length);
        // Balanced, and nothing given away: at most one unit each side moved off a surrogate pair, plus a digit.
        expect(head.length).toBeGreaterThanOrEqual(tail.length - 1);
        expect(head.length - tail.length).toBeLessThanOrEqual(3);
        expect(out.length).toBeGreaterThanOrEqual(cap - 3);
        // No pair is cut: the kept parts are well-formed UTF-16 as the input was.
        expect(LONE_SURROGATE.test(head) || LONE_SURROGATE.test(tail)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('at a cap too small for the marker, keeps a prefix of at most the cap', () => {
    fc.assert(
      fc.property(text, fc.nat(40), (input, cap) => {
        fc.pre(input.length > cap && cap < markerLength(input.length));
        const out = clip(input, cap);
        expect(out.length).toBeLessThanOrEqual(cap);
        expect(input.startsWith(out)).toBe(true);
        // Issue 13: not even a prefix this short ends in half of a pair.
        expect(LONE_SURROGATE.test(out), JSON.stringify(out)).toBe(false);
      }),
      { numRuns: 500 },
    );
  });

  it('never returns half of a pair, at every cap from 0 to the length, for any text of pairs and plain characters', () => {
    const mixed = fc.string({ unit, minLength: 1, maxLength: 120 });
    fc.assert(
      fc.property(mixed, (input) => {
        for (let cap = 0; cap <= input.length; cap++) {
          const out = clip(input, cap);
          expect(out.length).toBeLessThanOrEqual(cap);
          expect(LONE_SURROGATE.test(out), `cap ${cap}: ${JSON.stringify(out)}`).toBe(false);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('never splits a pair at any cap, for a text of pairs only', () => {
    const pairs = '😀'.repeat(50);
    for (let cap = 0; cap <= pairs.length; cap++) expect(LONE_SURROGATE.test(clip(pairs, cap)), `cap ${cap}`).toBe(false);
  });

  it('refuses a cap that is not a non-negative integer', () => {
    for (const cap of [-1, 1.5, Number.NaN]) expect(() => clip('text', cap)).toThrow(RangeError);
  });
});

describe('renderValue (CONTRACT §3)', () => {
  it('numbers and booleans as their JSON text, strings raw, objects with two-space indentation, nothing for null', () => {
    expect([renderValue(0), renderValue(-2.5), renderValue(1e21), renderValue(true), renderValue(false)]).toEqual(['0', '-2.5', '1e+21', 'true', 'false']);
    expect(renderValue('line\n"two"')).toBe('line\n"two"');
    expect(renderValue({ a: [1, { b: null }] })).toBe('{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ]\n}');
    expect([renderValue(null), renderValue(undefined), renderValue('')]).toEqual(['', '', '']);
  });
});

describe('the failed tag (CONTRACT §4: one line)', () => {
  it('collapses every run of whitespace in a reason to one space, and says "unknown error" without one', () => {
    expect(renderAgentResult({ name: 'w', outcome: 'failed', text: '', reason: '  first\n\n\tsecond   third \r\n' } as never)).toBe(
      "[agent 'w' failed: first second third]",
    );
    expect(renderAgentResult({ name: 'w', outcome: 'failed', text: '' } as never)).toBe("[agent 'w' failed: unknown error]");
  });
});

describe('the pairing check', () => {
  const call = (id: string): Message => ({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'x', input: {} }] });
  const result = (id: string): Message => ({ role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'ok' }] });
  const user: Message = { role: 'user', content: [{ type: 'text', text: 'go' }] };

  it('finds an empty history, a call left open at the end, and a result with no call before it', () => {
    expect(findPairingProblems([])).toEqual(['history is empty']);
    expect(findPairingProblems([user, call('a')]).join('\n')).toMatch(/tool_use a without tool_result \(history ends\)/);
    expect(findPairingProblems([user, call('a'), result('b')]).join('\n')).toMatch(/\bb\b/);
    expect(findPairingProblems([user, call('a'), result('a')])).toEqual([]);
  });

  it('throws a PairingError naming the problems only when there are some', () => {
    expect(() => assertToolPairing([user, call('a'), result('a')])).not.toThrow();
    try {
      assertToolPairing([user, call('a')]);
      expect.unreachable('a history ending in an open call passed');
    } catch (error) {
      expect(error).toBeInstanceOf(PairingError);
      expect((error as Error).name).toBe('PairingError');
      expect((error as Error).message).toMatch(/^history breaks the tool_use\/tool_result pairing rule: .*tool_use a without tool_result/);
    }
  });
});
