import { stringifyBounded } from './nesting.js';

/**
 * The one value→text rule, used wherever a value becomes text for a model or a parent:
 * the `reply` payload, tool outputs, inbox results (CONTRACT §3).
 */

/**
 * A string passes through raw (a markdown report keeps real newlines); objects and arrays are
 * pretty-printed with 2-space indentation; numbers and booleans as their JSON text; `undefined`,
 * `null` and `''` render to nothing. A value nested past MAX_JSON_DEPTH renders with the deeper
 * levels elided instead of overflowing the stack (see nesting.ts).
 */
export function renderValue(value: unknown): string {
  if (value === undefined || value === null) return '';
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'boolean') return JSON.stringify(value);
  if (typeof value === 'bigint') return value.toString();
  if (typeof value === 'object') return stringifyBounded(value, 2) ?? '';
  return String(value);
}

/** The inline marker left where `clip` removed the middle of a text. */
export function elisionMarker(elided: number): string {
  return `\n\n[… ${elided} characters elided by exarch …]\n\n`;
}

/**
 * Clips `text` to at most `cap` characters by middle elision: head and tail are kept and an inline
 * marker says how much was removed. The result, marker included, is never longer than `cap`.
 */
export function clip(text: string, cap: number): string {
  if (!Number.isInteger(cap) || cap < 0) throw new RangeError(`clip: cap must be a non-negative integer, got ${cap}`);
  if (text.length <= cap) return text;
  // The marker's length depends on the count it reports, which depends on the marker's length:
  // step to the fixed point. A step never shortens the marker (a longer one elides more, and a
  // larger count has no fewer digits) and the count's digits are bounded, so this ends, after at
  // most two steps.
  let markerLength = elisionMarker(text.length - cap).length;
  for (;;) {
    const next = elisionMarker(text.length - Math.max(0, cap - markerLength)).length;
    if (next === markerLength) break;
    markerLength = next;
  }
  const keep = cap - markerLength;
  if (keep <= 0) return wholeHead(text, cap);
  let headEnd = Math.ceil(keep / 2);
  let tailStart = text.length - (keep - headEnd);
  // Never split a surrogate pair: move a cut inwards, eliding one more unit. (At the text's end,
  // charCodeAt gives NaN, no surrogate.) The count grows by the one or two units dropped and gains
  // at most one digit, so the result stays within the cap.
  if (isHighSurrogate(text.charCodeAt(headEnd - 1))) headEnd -= 1;
  if (isLowSurrogate(text.charCodeAt(tailStart))) tailStart += 1;
  return text.slice(0, headEnd) + elisionMarker(tailStart - headEnd) + text.slice(tailStart);
}

/** The first `cap` code units of `text`, one fewer if the last would be half of a surrogate pair. */
function wholeHead(text: string, cap: number): string {
  return cap > 0 && isHighSurrogate(text.charCodeAt(cap - 1)) ? text.slice(0, cap - 1) : text.slice(0, cap);
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}

function isLowSurrogate(code: number): boolean {
  return code >= 0xdc00 && code <= 0xdfff;
}
