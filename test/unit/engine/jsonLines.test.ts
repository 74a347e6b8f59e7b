import { describe, expect, it } from 'vitest';
import { jsonLines } from '../../../src/engine/jsonLines.js';

const all = (text: string) => [...jsonLines(text)];

describe('jsonLines: the one reader of traces and recordings', () => {
  it('numbers lines as an editor does: blank and whitespace-only lines are skipped but counted', () => {
    expect(all('{"a":1}\n\n   \n[2]\n')).toEqual([
      { line: 1, json: true, value: { a: 1 } },
      { line: 4, json: true, value: [2] },
    ]);
  });

  it('reads lines ended by \\r\\n and a last line without a newline', () => {
    expect(all('1\r\n"two"\r\n  null  ')).toEqual([
      { line: 1, json: true, value: 1 },
      { line: 2, json: true, value: 'two' },
      { line: 3, json: true, value: null },
    ]);
  });

  it('hands on a line that is not JSON, with its number, and goes on reading', () => {
    expect(all('{"a":1}\n{"a":\nnot json\n{"b":2}')).toEqual([
      { line: 1, json: true, value: { a: 1 } },
      { line: 2, json: false },
      { line: 3, json: false },
      { line: 4, json: true, value: { b: 2 } },
    ]);
  });

  it('keeps an escaped newline inside a string as part of its line', () => {
    expect(all('{"text":"a\\nb"}\n')).toEqual([{ line: 1, json: true, value: { text: 'a\nb' } }]);
  });

  it('yields nothing for an empty or blank text', () => {
    expect(all('')).toEqual([]);
    expect(all('\n\n \t\n')).toEqual([]);
  });
});
