import type { Message } from '../engine/types.js';

/**
 * What of a request a recording keeps and a replay compares: the body the provider sends,
 * canonical. Hand-written: canonical JSON is a dozen lines here, and the libraries for it
 * (RFC 8785 canonicalisers) would be a dependency for a sort of keys.
 */

/** JSON with object keys sorted at every level: equal values give equal text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(sortKeys(value));
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(value).sort()) {
    const field = (value as Record<string, unknown>)[key];
    if (field !== undefined) out[key] = sortKeys(field);
  }
  return out;
}

/**
 * The body's top-level fields but `messages`, without `cache_control` markers: where the provider
 * puts its cache breakpoints is its own business, not the request's.
 */
export function requestFields(body: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(body)) {
    if (key !== 'messages' && value !== undefined) fields[key] = withoutCacheControl(value);
  }
  return fields;
}

function withoutCacheControl(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withoutCacheControl);
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(value)) if (key !== 'cache_control') out[key] = withoutCacheControl(field);
  return out;
}

/**
 * Follows one agent's history across its requests. The history is one array that only grows, its
 * last message sometimes replaced by a merge (src/engine/history.ts); so the messages before the previous
 * request's last are the same objects now, and need neither storing nor comparing again. Checked,
 * not assumed: a history that was rebuilt counts as all new.
 */
export class HistoryCursor {
  private count = 0;
  private last: Message | undefined;
  private beforeLast: Message | undefined;

  /** How many leading messages of `messages` are those of the previous call, unchanged. */
  advance(messages: readonly Message[]): number {
    const { count } = this;
    let kept = 0;
    if (count > 0 && messages.length >= count - 1 && (count < 2 || messages[count - 2] === this.beforeLast)) {
      kept = messages[count - 1] === this.last ? count : count - 1;
    }
    this.count = messages.length;
    this.last = messages[messages.length - 1];
    this.beforeLast = messages[messages.length - 2];
    return kept;
  }
}

/** The JSON path of the first place two JSON values differ (`messages[3].content[0].text`), or undefined. */
export function firstDifference(a: unknown, b: unknown, path: string): string | undefined {
  if (a === b) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      if (i >= a.length || i >= b.length) return `${path}[${i}]`;
      const inner = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (inner !== undefined) return inner;
    }
    return undefined;
  }
  if (isObject(a) && isObject(b)) {
    for (const key of [...new Set([...Object.keys(a), ...Object.keys(b)])].sort()) {
      const inner = firstDifference(a[key], b[key], path === '' ? key : `${path}.${key}`);
      if (inner !== undefined) return inner;
    }
    return undefined;
  }
  return path === '' ? '(the whole request)' : path;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
