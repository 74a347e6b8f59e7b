import type { Tool as McpTool } from '@modelcontextprotocol/sdk/types.js';
import { clip } from '../../engine/render.js';
import type { PreparedRun, Tool, Validation } from '../defineTool.js';
import type { McpConnection } from './connection.js';
import { ToolErrorResult } from '../toolErrorResult.js';
import { boundedInputSchema } from './inputSchema.js';
import { renderCallResult } from './renderResult.js';
import { checkSpec, McpSpecError, type McpServerSpec } from './serverSpec.js';
import { MAX_TIMER_MS } from '../../engine/maxTimer.js';
import { ToolNamer } from './toolNames.js';

/** Characters of a server tool's description shown to the model (it is in every request). */
const MAX_DESCRIPTION = 2_000;
/** Default time a server has to start, answer `initialize` and list its tools. */
const DEFAULT_START_TIMEOUT_MS = 30_000;

export interface McpConnectOptions {
  /** Names already used by the host's tools: no server tool is given one of them. */
  readonly takenNames?: Iterable<string>;
  /** Time each server has to start and list its tools (default 30,000 ms). */
  readonly startTimeoutMs?: number;
}

/** One connected server, as a toolset reports it. */
export interface McpServerInfo {
  /** The name in its tools' names (`mcp__<name>__<tool>`). */
  readonly name: string;
  /** The names its tools are offered under, in the server's order. */
  readonly tools: readonly string[];
  /** The stdio server's process id (none for HTTP). */
  readonly pid: number | undefined;
}

/** The tools of a run's MCP servers, connected once and shared by every agent of the tree. */
export interface McpToolset {
  readonly tools: readonly Tool[];
  readonly servers: readonly McpServerInfo[];
  /** Things worth a line to the user that did not stop the servers (a tool list cut short, a schema replaced). */
  readonly warnings: readonly string[];
  /** Closes every server (stdio processes are ended and reaped). Safe to call more than once. */
  close(): Promise<void>;
}

/**
 * Connects to every server in `specs` (all at once) and makes their tools exarch tools named
 * `mcp__<server>__<tool>`. A server that cannot start fails the whole call with one line naming
 * it (`McpServerError`, kind `start`), the others closed first: a run that was asked for a
 * server's tools does not start without them.
 *
 * @example
 * ```ts
 * const mcp = await connectMcpServers([{ command: 'node', args: ['server.js'] }]);
 * try {
 *   await runAgent(task, { provider, tools: [...mcp.tools] });
 * } finally {
 *   await mcp.close();
 * }
 * ```
 */
export async function connectMcpServers(specs: readonly McpServerSpec[], options: McpConnectOptions = {}): Promise<McpToolset> {
  const checked = specs.map(checkSpec);
  const startTimeoutMs = options.startTimeoutMs ?? DEFAULT_START_TIMEOUT_MS;
  if (!Number.isSafeInteger(startTimeoutMs) || startTimeoutMs < 1 || startTimeoutMs > MAX_TIMER_MS)
    throw new McpSpecError(`startTimeoutMs must be an integer from 1 to ${MAX_TIMER_MS} (the longest a timer can wait), got ${String(startTimeoutMs)}`);
  // The connection code (and zod, with which it checks what servers send) is loaded with the first server.
  const { McpConnection } = await import('./connection.js');
  const opened = await Promise.allSettled(checked.map((spec) => McpConnection.open(spec, startTimeoutMs)));
  const connections = opened.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
  const closeAll = async (): Promise<void> => {
    await Promise.all(connections.map((c) => c.close()));
  };
  const failed = opened.find((o): o is PromiseRejectedResult => o.status === 'rejected');
  if (failed) {
    await closeAll();
    throw failed.reason;
  }
  try {
    const namer = new ToolNamer(options.takenNames ?? []);
    const serverNames = new Set<string>();
    const tools: Tool[] = [];
    const servers: McpServerInfo[] = [];
    const warnings: string[] = [];
    // Names are chosen in the order the servers were given, so they come out the same on every run.
    for (const connection of connections) {
      connection.name = namer.serverName(connection.spec.name ?? connection.reportedName ?? 'server', serverNames);
      serverNames.add(connection.name);
    }
    const listed = await Promise.all(connections.map((c) => c.listTools(startTimeoutMs)));
    connections.forEach((connection, i) => {
      const { tools: serverTools, dropped, leftOut } = listed[i] ?? { tools: [], dropped: 0, leftOut: [] };
      for (const tool of leftOut) warnings.push(`MCP server '${connection.name}': its tool '${tool.name}' is left out: ${tool.problem}`);
      if (dropped > 0)
        warnings.push(
          `MCP server '${connection.name}' offers ${serverTools.length + dropped} tools; only the first ${serverTools.length} are offered to agents`,
        );
      const names: string[] = [];
      for (const mcpTool of serverTools) {
        const tool = serverTool(connection, mcpTool, namer.toolName(connection.name, mcpTool.name), warnings);
        tools.push(tool);
        names.push(tool.name);
      }
      servers.push({ name: connection.name, tools: names, pid: connection.pid });
    });
    return { tools, servers, warnings, close: closeAll };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/** One of a server's tools as an exarch tool. */
function serverTool(connection: McpConnection, mcpTool: McpTool, name: string, warnings: string[]): Tool {
  const { schema, note } = boundedInputSchema(mcpTool.inputSchema);
  if (note) warnings.push(`MCP tool ${name}: ${note}; it is offered as taking any object`);
  const described = typeof mcpTool.description === 'string' && mcpTool.description.trim() !== '' ? mcpTool.description : (mcpTool.title ?? `${mcpTool.name}`);
  const description = clip(`${described}\n\n(Tool '${mcpTool.name}' of the MCP server '${connection.name}'.)`, MAX_DESCRIPTION);
  const rawName = mcpTool.name;
  return {
    name,
    spec: { name, description, input_schema: schema },
    timeoutMs: connection.spec.timeoutMs,
    // MCP's readOnlyHint and idempotentHint are the server's word, which a durable resume would
    // act on by running a call twice: not taken.
    idempotent: false,
    readOnly: false,
    prepare(input): Validation<PreparedRun> {
      if (typeof input !== 'object' || input === null || Array.isArray(input)) {
        return { ok: false, error: `invalid input for tool '${name}': (input): expected an object` };
      }
      const args = input as Record<string, unknown>;
      return {
        ok: true,
        value: async (context) => {
          const result = await connection.call(rawName, args, context.signal);
          const text = renderCallResult(result);
          if (typeof result === 'object' && result !== null && (result as { isError?: unknown }).isError === true) {
            throw new ToolErrorResult(text || `tool '${rawName}' of MCP server '${connection.name}' reported an error without a message`);
          }
          return text;
        },
      };
    },
  };
}
