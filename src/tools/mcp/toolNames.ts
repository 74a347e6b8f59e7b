import { createHash } from 'node:crypto';

/** The provider's rule for a tool name (CONTRACT §2 and the Anthropic API). */
const TOOL_NAME_MAX = 64;
/** Room a server's name takes in `mcp__<server>__<tool>`: the tool's own name keeps at least 33 characters. */
const SERVER_NAME_MAX = 24;

/** `raw` in the characters a tool name allows: every other run of characters becomes one `_`. */
function sanitize(raw: string): string {
  return raw.replace(/[^A-Za-z0-9_-]+/g, '_');
}

/** A server's name as it appears in tool names: sanitized, at most 24 characters, never empty. */
function serverLabel(raw: string): string {
  const label = sanitize(raw)
    .slice(0, SERVER_NAME_MAX)
    .replace(/^_+|_+$/g, '');
  return label === '' ? 'server' : label;
}

/**
 * Hands out names of the form `mcp__<server>__<tool>`, each 1–64 characters of `A-Za-z0-9_-` and
 * unique among everything named so far (host tools included). A name cut short for length, or one
 * already taken, gets a short hash of the server's and tool's raw names, so that two tools whose
 * names clean up alike still differ, the same way on every run (a durable run's resume depends on it).
 */
export class ToolNamer {
  private readonly taken: Set<string>;

  constructor(taken: Iterable<string>) {
    this.taken = new Set(taken);
  }

  /** A server name not yet used by another server of this run. */
  serverName(raw: string, servers: ReadonlySet<string>): string {
    const base = serverLabel(raw);
    if (!servers.has(base)) return base;
    for (let n = 2; ; n++) {
      const candidate = `${base.slice(0, SERVER_NAME_MAX - String(n).length - 1)}_${n}`;
      if (!servers.has(candidate)) return candidate;
    }
  }

  toolName(server: string, rawTool: string): string {
    const wanted = `mcp__${server}__${sanitize(rawTool)}`;
    if (wanted.length <= TOOL_NAME_MAX && !this.taken.has(wanted) && rawTool !== '') return this.take(wanted);
    const digest = createHash('sha256').update(`${server}\0${rawTool}`).digest('hex');
    for (let i = 0; ; i++) {
      const suffix = `_${digest.slice(i, i + 8)}`;
      const candidate = `${wanted.slice(0, TOOL_NAME_MAX - suffix.length)}${suffix}`;
      if (!this.taken.has(candidate)) return this.take(candidate);
      if (i + 8 >= digest.length) break;
    }
    for (let n = 2; ; n++) {
      const suffix = `_${n}`;
      const candidate = `${wanted.slice(0, TOOL_NAME_MAX - suffix.length)}${suffix}`;
      if (!this.taken.has(candidate)) return this.take(candidate);
    }
  }

  private take(name: string): string {
    this.taken.add(name);
    return name;
  }
}
