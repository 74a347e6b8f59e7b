import { ExarchError } from '../../engine/exarchError.js';
import { MAX_TIMER_MS } from '../../engine/maxTimer.js';
import { redactUrl } from '../../engine/urlSecrets.js';

/**
 * How to reach one MCP server: a command run as a child process speaking MCP over stdio, or a
 * streamable HTTP endpoint.
 */
export type McpServerSpec = McpStdioServer | McpHttpServer;

export interface McpStdioServer {
  /** The executable; looked up on PATH as `spawn` would. */
  readonly command: string;
  readonly args?: readonly string[];
  /** Added to a minimal inherited environment (HOME, PATH, SHELL, TERM, USER, LOGNAME). */
  readonly env?: Readonly<Record<string, string>>;
  readonly cwd?: string;
  /** Names the server in tool names and messages (default: the name the server reports). */
  readonly name?: string;
  /** Per call of this server's tools (default: the session's `toolTimeoutMs`). */
  readonly timeoutMs?: number;
}

export interface McpHttpServer {
  /** An `http://` or `https://` URL of a streamable HTTP MCP endpoint. */
  readonly url: string;
  /** Sent with every request (an `Authorization` header, …). */
  readonly headers?: Readonly<Record<string, string>>;
  /** Names the server in tool names and messages (default: the name the server reports). */
  readonly name?: string;
  /** Per call of this server's tools (default: the session's `toolTimeoutMs`). */
  readonly timeoutMs?: number;
}

/** Why an `mcp` entry or `--mcp` value cannot be used: one line. */
export class McpSpecError extends ExarchError<'mcp-spec'> {
  constructor(message: string) {
    super('mcp-spec', message);
  }
}

/**
 * `--mcp "cmd args"`: a value that starts with `http://` or `https://` is a streamable HTTP
 * endpoint; anything else a command line, split like a POSIX shell's words (single and double
 * quotes, backslash escapes; no expansion, no operators).
 */
export function parseMcpFlag(value: string): McpServerSpec {
  const text = value.trim();
  if (/^https?:\/\//i.test(text)) return checkSpec({ url: text });
  const words = splitWords(text);
  const [command, ...args] = words;
  if (command === undefined) throw new McpSpecError('--mcp needs a command or an http(s):// URL, got an empty value');
  return { command, args };
}

/** Checks an entry of the `mcp` option; returns it as it is when usable. */
export function checkSpec(spec: McpServerSpec): McpServerSpec {
  if (typeof spec !== 'object' || spec === null) throw new McpSpecError(`an mcp server must be { command, args } or { url }, got ${String(spec)}`);
  if ('url' in spec && typeof spec.url === 'string') {
    let url: URL;
    try {
      url = new URL(spec.url);
    } catch {
      throw new McpSpecError(`mcp server url ${JSON.stringify(redactUrl(spec.url))} is not a URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:')
      throw new McpSpecError(`mcp server url ${JSON.stringify(redactUrl(spec.url))} must be http:// or https://`);
  } else if (!('command' in spec) || typeof spec.command !== 'string' || spec.command === '') {
    throw new McpSpecError('an mcp server needs a non-empty `command` (stdio) or a `url` (streamable HTTP)');
  }
  if (spec.timeoutMs !== undefined && (!Number.isSafeInteger(spec.timeoutMs) || spec.timeoutMs < 1)) {
    throw new McpSpecError(`mcp server timeoutMs must be an integer ≥ 1, got ${String(spec.timeoutMs)}`);
  }
  if (spec.timeoutMs !== undefined && spec.timeoutMs > MAX_TIMER_MS) {
    throw new McpSpecError(`mcp server timeoutMs must be at most ${MAX_TIMER_MS} (the longest a timer can wait), got ${spec.timeoutMs}`);
  }
  return spec;
}

/** What a person calls the server before it has told its name: the command's last path part, or the URL's host. */
export function provisionalName(spec: McpServerSpec): string {
  if (spec.name !== undefined) return spec.name;
  if ('url' in spec) {
    try {
      return new URL(spec.url).host;
    } catch {
      return spec.url;
    }
  }
  return spec.command.split(/[\\/]/).at(-1) ?? spec.command;
}

/**
 * Shell-like word splitting, by hand: no splitter is installed, and the rules needed (quotes,
 * backslashes, whitespace; `$`, `*`, `|` stay literal since no shell runs) take fewer lines than
 * a new dependency would cost.
 */
function splitWords(text: string): string[] {
  const words: string[] = [];
  let word = '';
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < text.length; i++) {
    const c = text.charAt(i);
    if (quote === "'") {
      if (c === "'") quote = undefined;
      else word += c;
    } else if (quote === '"') {
      if (c === '"') quote = undefined;
      else if (c === '\\' && i + 1 < text.length && '"\\$`'.includes(text.charAt(i + 1))) word += text.charAt(++i);
      else word += c;
    } else if (c === "'" || c === '"') {
      quote = c;
      inWord = true;
    } else if (c === '\\' && i + 1 < text.length) {
      word += text.charAt(++i);
      inWord = true;
    } else if (/\s/.test(c)) {
      if (inWord) words.push(word);
      word = '';
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (quote !== undefined) throw new McpSpecError(`--mcp value has an unclosed ${quote} quote: ${text}`);
  if (inWord) words.push(word);
  return words;
}
