// The SDK (about 0.3 s to load) is imported when a server is first opened: a run without MCP
// servers, and every `import 'exarch'`, does without it.
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { describeError } from '../../engine/model/errors.js';
import { Redactor } from '../../engine/redact.js';
import { schemaProblem } from '../../engine/schemaProblem.js';
import { urlSecrets } from '../../engine/urlSecrets.js';
import { cappedFetch } from './cappedFetch.js';
import { McpServerError } from './mcpError.js';
import { provisionalName, type McpServerSpec } from './serverSpec.js';

/** Bytes one message from a server may take (stdio read buffer, HTTP response body). */
// 4 MiB: far more than a model is shown (outputs are clipped at 50,000 characters by default), and
// the SDK's stdio reader copies its whole buffer on every chunk, so a larger cap costs time squared.
const MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/** What a server that sent more is told apart by, in the SDK's words (its stdio reader's; pinned by test/e2e/hostile/internalErrors.mcp.test.ts). */
const STDIO_OVER_CAP = /ReadBuffer exceeded maximum size/;

/** A server that sent a message over the cap, as a person reads it. */
function overCap(label: string): string {
  return `MCP server '${label}' sent a message over the ${MAX_MESSAGE_BYTES / 1024 / 1024} MiB cap (${MAX_MESSAGE_BYTES} bytes)`;
}
/** Pages of `tools/list` read, and tools kept per server: a server is not let to flood every request. */
const MAX_LIST_PAGES = 20;
const MAX_TOOLS_PER_SERVER = 128;
/** setTimeout's largest delay: the SDK's own request timeout is set past reach, exarch's per-call deadline governs. */
const NO_SDK_TIMEOUT = 2_147_483_647;
/** Longest wait for a stdio server's exit: the SDK's close takes up to 4 s (EOF, SIGTERM, SIGKILL, 2 s apart). */
const EXIT_WAIT_MS = 5_000;
/** Characters of a stdio server's stderr kept, to say why it stopped. */
const STDERR_TAIL = 4_096;

type OpenTransport = { readonly kind: 'stdio'; readonly stdio: StdioClientTransport } | { readonly kind: 'http'; readonly http: StreamableHTTPClientTransport };

const CLIENT_INFO = { name: 'exarch', version: '0.1.0' };

/** One connected MCP server: its client, the name its tools go by, and whether it is still there. */
export class McpConnection {
  private gone: string | undefined;
  private closing: Promise<void> | undefined;
  /** Calls in flight, to fail when the server sends what cannot be read (an oversized response). */
  private readonly inFlight = new Set<AbortController>();

  private constructor(
    readonly spec: McpServerSpec,
    private readonly client: Client,
    private readonly transport: OpenTransport,
    private readonly stderrTail: () => string,
    /** Settles once a stdio server's process has exited and its pipes closed (at once for HTTP). */
    private readonly exited: Promise<void>,
    /** What the server calls itself (`serverInfo.name`), as it sent it. */
    readonly reportedName: string | undefined,
    /** Set when a stdio server sent a message over the cap: the SDK then stops it, and that is why it went. */
    private readonly trouble: { overCap: boolean },
  ) {
    client.onclose = () => {
      this.gone ??= this.exitLine();
    };
  }

  /** The name in tool names and messages; set once the toolset has chosen it. */
  name = '';

  /**
   * Starts (stdio) or reaches (HTTP) the server and runs the MCP handshake within `startTimeoutMs`.
   * Throws `McpServerError` (`start`) with one line naming the server, having closed whatever was opened.
   */
  static async open(spec: McpServerSpec, startTimeoutMs: number): Promise<McpConnection> {
    const label = provisionalName(spec);
    // Set once the connection exists; a response that is too large before then fails the handshake by itself.
    let onOversize: (error: Error) => void = () => undefined;
    const [{ Client }, { StdioClientTransport }, { StreamableHTTPClientTransport }] = await Promise.all([
      import('@modelcontextprotocol/sdk/client/index.js'),
      import('@modelcontextprotocol/sdk/client/stdio.js'),
      import('@modelcontextprotocol/sdk/client/streamableHttp.js'),
    ]);
    let tail = '';
    let transport: OpenTransport;
    let exited: Promise<void> = Promise.resolve();
    if ('url' in spec) {
      const http = new StreamableHTTPClientTransport(new URL(spec.url), {
        ...(spec.headers ? { requestInit: { headers: { ...spec.headers } } } : {}),
        fetch: cappedFetch(MAX_MESSAGE_BYTES, (error) => onOversize(error)),
      });
      transport = { kind: 'http', http };
    } else {
      const stdio = new StdioClientTransport({
        command: spec.command,
        args: [...(spec.args ?? [])],
        ...(spec.env ? { env: { ...spec.env } } : {}),
        ...(spec.cwd ? { cwd: spec.cwd } : {}),
        // Piped, not inherited: a server's log lines would tear exarch's progress display; the last
        // of them is kept to say why a server stopped.
        stderr: 'pipe',
        maxBufferSize: MAX_MESSAGE_BYTES,
      });
      stdio.stderr?.on('data', (chunk: Buffer) => {
        tail = (tail + chunk.toString('utf8')).slice(-STDERR_TAIL);
      });
      // The client chains its own handler after this one: the transport calls it on the process's 'close'.
      exited = new Promise((resolve) => {
        stdio.onclose = resolve;
      });
      transport = { kind: 'stdio', stdio };
    }
    // No client capabilities (the SDK's default): exarch offers servers no sampling, roots or elicitation.
    const client = new Client(CLIENT_INFO);
    // The transport's errors, which the SDK reports here and otherwise drops: a line past the stdio
    // cap is one, and the SDK stops the server for it; the others (a line that is not JSON-RPC)
    // leave the connection as it was.
    const trouble = { overCap: false };
    client.onerror = (error) => {
      if (transport.kind === 'stdio' && STDIO_OVER_CAP.test(describeError(error))) trouble.overCap = true;
    };
    try {
      await client.connect(transport.kind === 'http' ? transport.http : transport.stdio, { timeout: startTimeoutMs });
    } catch (error) {
      await client.close().catch(() => undefined);
      // The client's own close may still be escalating to SIGTERM and SIGKILL: the error is not
      // reported before the process is gone (or the escalation had its time).
      await boundedWait(exited, EXIT_WAIT_MS);
      if (trouble.overCap) throw new McpServerError(`${overCap(label)} and could not start`, 'start', label, { cause: error });
      // An HTTP server's URL secrets (a `?token=`) are never in the line, should the failure quote the URL.
      const why = 'url' in spec ? new Redactor(urlSecrets(spec.url)).text(describeFailure(error)) : describeFailure(error);
      const last = lastLine(tail);
      throw new McpServerError(`MCP server '${label}' could not start: ${why}${last ? ` (its last words: ${last})` : ''}`, 'start', label, { cause: error });
    }
    const reported = client.getServerVersion()?.name;
    const connection = new McpConnection(spec, client, transport, () => tail, exited, typeof reported === 'string' ? reported : undefined, trouble);
    onOversize = (error) => connection.failInFlight(error);
    return connection;
  }

  /**
   * The server's tools, at most MAX_TOOLS_PER_SERVER (the rest are reported in `dropped`). A tool
   * entry that is not one MCP allows (an input schema that is not an object schema, no name) is
   * left out, with why, in `leftOut`: the SDK refuses the whole list for one such entry.
   */
  async listTools(timeoutMs: number): Promise<{ tools: McpTool[]; dropped: number; leftOut: LeftOutTool[] }> {
    const tools: McpTool[] = [];
    const leftOut: LeftOutTool[] = [];
    let dropped = 0;
    let cursor: string | undefined;
    try {
      for (let page = 0; page < MAX_LIST_PAGES; page++) {
        const listed = await this.listPage(cursor, timeoutMs);
        for (const entry of listed.tools) {
          const tool = await checkedTool(entry);
          if ('problem' in tool) leftOut.push(tool);
          else if (tools.length < MAX_TOOLS_PER_SERVER) tools.push(tool.tool);
          else dropped += 1;
        }
        cursor = listed.nextCursor;
        if (cursor === undefined) break;
      }
    } catch (error) {
      throw new McpServerError(`MCP server '${this.label}' could not list its tools: ${this.gone ?? describeFailure(error)}`, 'start', this.label, {
        cause: error,
      });
    }
    return { tools, dropped, leftOut };
  }

  /**
   * One page of `tools/list`: through the SDK's own `listTools` (which also keeps each tool's
   * output schema, to check the results of its calls), or, when one entry of the page is not a tool
   * MCP allows and the SDK refuses the page for it, the page asked for again and taken as a list
   * of entries, each checked on its own by `listTools`.
   */
  private async listPage(cursor: string | undefined, timeoutMs: number): Promise<{ tools: readonly unknown[]; nextCursor?: string | undefined }> {
    const params = cursor === undefined ? {} : { cursor };
    try {
      return await this.client.listTools(params, { timeout: timeoutMs });
    } catch (error) {
      if (!isZodError(error)) throw error;
      return await this.client.request({ method: 'tools/list', params }, LOOSE_TOOL_LIST, { timeout: timeoutMs });
    }
  }

  /**
   * Calls a tool of the server; resolves with the raw result (whose `isError` the caller reads).
   * A server that is gone or goes away during the call, or a call that fails in transport,
   * rejects with one line naming the server. `signal` (the call's deadline, the session's
   * cancel) cancels the request at the server too.
   */
  async call(tool: string, args: Record<string, unknown>, signal: AbortSignal): Promise<unknown> {
    if (this.gone !== undefined) throw new McpServerError(`MCP server '${this.label}' is not running: ${this.gone}`, 'exited', this.label);
    const own = new AbortController();
    const forward = (): void => own.abort(signal.reason);
    signal.addEventListener('abort', forward, { once: true });
    if (signal.aborted) forward();
    this.inFlight.add(own);
    try {
      return await this.client.callTool({ name: tool, arguments: args }, undefined, { signal: own.signal, timeout: NO_SDK_TIMEOUT });
    } catch (error) {
      if (own.signal.aborted) throw own.signal.reason instanceof Error ? own.signal.reason : error;
      // The transport reports a process's exit just after it fails the requests in flight.
      await new Promise((resolve) => setImmediate(resolve));
      if (this.trouble.overCap)
        throw new McpServerError(`${overCap(this.label)}: the call failed, and the server was stopped`, 'exited', this.label, { cause: error });
      if (this.gone !== undefined)
        throw new McpServerError(`MCP server '${this.label}' stopped during the call: ${this.gone}`, 'exited', this.label, { cause: error });
      throw new McpServerError(`MCP server '${this.label}': ${describeFailure(error)}`, 'call', this.label, { cause: error });
    } finally {
      this.inFlight.delete(own);
      signal.removeEventListener('abort', forward);
    }
  }

  /**
   * Fails every call in flight: a response was cut off, and the SDK, which would wait for the rest
   * of an event stream, cannot tell which request it answered.
   */
  private failInFlight(error: Error): void {
    for (const call of this.inFlight)
      call.abort(new McpServerError(`${overCap(this.label)}: the calls it was answering failed`, 'call', this.label, { cause: error }));
  }

  /** Closes the connection; a stdio server gets EOF, then SIGTERM, then SIGKILL (2 s apart) until it has exited. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.gone ??= 'closed by exarch at the end of the run';
      if (this.transport.kind === 'http') {
        // Ends the server's session politely; a server that does not answer in a second is left to expire it.
        const timer = new Promise((resolve) => setTimeout(resolve, 1_000).unref());
        await Promise.race([this.transport.http.terminateSession().catch(() => undefined), timer]);
      }
      await this.client.close().catch(() => undefined);
      // After SIGKILL the transport does not wait for the exit; this does (bounded), so that a
      // run that returned has no server process left.
      await boundedWait(this.exited, EXIT_WAIT_MS);
    })();
    return this.closing;
  }

  /** The child process's id, for a stdio server that runs (tests check it is gone after a run). */
  get pid(): number | undefined {
    return this.transport.kind === 'stdio' ? (this.transport.stdio.pid ?? undefined) : undefined;
  }

  private get label(): string {
    return this.name || provisionalName(this.spec);
  }

  private exitLine(): string {
    if (this.trouble.overCap) return `it sent a message over the ${MAX_MESSAGE_BYTES / 1024 / 1024} MiB cap (${MAX_MESSAGE_BYTES} bytes), and was stopped`;
    const last = lastLine(this.stderrTail());
    const what = 'url' in this.spec ? 'the connection was closed' : 'the process exited';
    return last ? `${what} (its last words: ${last})` : what;
  }
}

/** Waits for `promise`, or `ms` at most. */
async function boundedWait(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}

function lastLine(text: string): string {
  const lines = text
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const last = lines.at(-1) ?? '';
  return last.length > 300 ? `${last.slice(0, 300)}…` : last;
}

/** A tool entry left out of a server's list: its name as the server gave it (cleaned for a line), and why. */
export interface LeftOutTool {
  readonly name: string;
  readonly problem: string;
}

/** A page of `tools/list` taken as it comes: a list of entries, each checked apart. */
const LOOSE_TOOL_LIST = z.looseObject({ tools: z.array(z.unknown()), nextCursor: z.string().optional() });

/** `entry` as a tool of MCP's schema (the SDK's own), or what is wrong with it. */
async function checkedTool(entry: unknown): Promise<{ readonly tool: McpTool } | LeftOutTool> {
  const { ToolSchema } = await import('@modelcontextprotocol/sdk/types.js');
  const parsed = ToolSchema.safeParse(entry, { reportInput: true });
  if (parsed.success) return { tool: entry as McpTool };
  const raw = typeof entry === 'object' && entry !== null ? (entry as { name?: unknown }).name : undefined;
  const name = typeof raw === 'string' && raw !== '' ? clipName(raw) : '(no name)';
  return { name, problem: schemaProblem(parsed.error) };
}

/** A name a server gave, for a line: control characters replaced, at most 80 characters. */
function clipName(name: string): string {
  const clean = name.replace(/[\u0000-\u001f\u007f-\u009f]/g, '?');
  return clean.length > 80 ? `${clean.slice(0, 79)}…` : clean;
}

/** A zod error (the SDK checks what servers send with zod, its core's `$ZodError`): its issues, not its JSON dump, are what a person reads. */
function isZodError(error: unknown): error is z.core.$ZodError {
  return error instanceof z.core.$ZodError;
}

/** An error's message with its cause's (`fetch failed` says little without `ECONNREFUSED`). */
function describeFailure(error: unknown): string {
  // The SDK's check of a message from the server: said in one line, not as zod's dump.
  if (isZodError(error)) return `it sent an answer that is not what MCP allows (${schemaProblem(error)})`;
  const message = describeError(error);
  const cause = error instanceof Error ? error.cause : undefined;
  return cause === undefined ? message : `${message}: ${describeError(cause)}`;
}
