import { describe, expect, it } from 'vitest';
import { clip, elisionMarker, renderValue } from '../../../src/index.js';

describe('renderValue: the one value→text rule', () => {
  it('passes a string through raw, keeping real newlines', () => {
    expect(renderValue('# Report\n\n- a\n- b')).toBe('# Report\n\n- a\n- b');
  });
  it('pretty-prints objects and arrays with 2-space indentation', () => {
    expect(renderValue({ a: [1, { b: null }] })).toBe('{\n  "a": [\n    1,\n    {\n      "b": null\n    }\n  ]\n}');
    expect(renderValue([])).toBe('[]');
  });
  it('renders numbers and booleans as their JSON text', () => {
    expect(renderValue(3.5)).toBe('3.5');
    expect(renderValue(false)).toBe('false');
  });
  it('renders missing, null and empty string to nothing', () => {
    expect(renderValue(undefined)).toBe('');
    expect(renderValue(null)).toBe('');
    expect(renderValue('')).toBe('');
  });
});

describe('clip: middle elision', () => {
  it('leaves text within the cap untouched', () => {
    expect(clip('short', 5)).toBe('short');
  });

  it('keeps head and tail, says how much was elided, and never exceeds the cap', () => {
    const text = 'A'.repeat(5000) + 'B'.repeat(5000);
    for (const cap of [100, 999, 1000, 1001, 4096]) {
      const clipped = clip(text, cap);
      expect(clipped.length).toBeLessThanOrEqual(cap);
      expect(clipped.length).toBeGreaterThanOrEqual(cap - 1);
      const elided = Number(/\[… (\d+) characters elided/.exec(clipped)?.[1]);
      expect(clipped.length - elisionMarker(elided).length + elided).toBe(text.length);
      expect(clipped.startsWith('AAAA')).toBe(true);
      expect(clipped.endsWith('BBBB')).toBe(true);
    }
  });

  it('never splits a surrogate pair', () => {
    const text = '😀'.repeat(1000);
    const clipped = clip(text, 301);
    expect(clipped.length).toBeLessThanOrEqual(301);
    expect(clipped).not.toMatch(/[\ud800-\udbff](?![\udc00-\udfff])/);
    expect(clipped).not.toMatch(/(?<![\ud800-\udbff])[\udc00-\udfff]/);
  });

  it('a cap smaller than the marker still returns at most cap characters', () => {
    expect(clip('x'.repeat(100), 10)).toHaveLength(10);
  });

  it('rejects a negative cap with a clear error', () => {
    expect(() => clip('x', -1)).toThrow('clip: cap must be a non-negative integer, got -1');
  });
});
