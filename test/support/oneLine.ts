import { expect } from 'vitest';

/**
 * The oracle of issue 37's "internal error text never reaches a user": about a problem, stderr has
 * exactly one line, it is exarch's (`exarch: …`), and nothing on stderr is the text of an internal
 * error: no stack frame, no zod dump, no name of a JavaScript error class, no `undefined`.
 */

/** What JavaScript and its libraries say that a person cannot act on (V8's TypeError messages among them). */
const INTERNAL = [
  /^\s+at /m,
  /ZodError/,
  /\bTypeError\b/,
  /\bSyntaxError\b/,
  /\bRangeError\b/,
  /\bReferenceError\b/,
  /undefined/,
  /"code":\s*"invalid_/,
  /Cannot read propert/,
  /is not a function/,
  /is not iterable/,
  /" is not valid JSON/,
  /Maximum call stack/,
];

/** Checks `stderr` says `about` in one line of exarch's, and holds no internal text; returns that line. */
export function expectOneLine(stderr: string, about: RegExp): string {
  const lines = stderr.split('\n').filter((line) => about.test(line));
  expect(lines, `one line about ${String(about)} in:\n${stderr}`).toHaveLength(1);
  expect(lines[0]).toMatch(/^exarch( worker)?: /);
  expectNoInternalText(stderr);
  return lines[0] ?? '';
}

/** Checks nothing on `stderr` is the text of an internal error. */
export function expectNoInternalText(stderr: string): void {
  for (const pattern of INTERNAL) expect(stderr, `internal text (${String(pattern)}) in:\n${stderr}`).not.toMatch(pattern);
}
