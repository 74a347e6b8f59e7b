import type { Tool } from '../defineTool.js';
import type { McpServerSpec } from './serverSpec.js';
import type { McpToolset } from './toolset.js';

/** The `mcp` option of `runAgent`, `startRun` and `resumeRun`. */
export interface McpOption {
  /**
   * MCP servers whose tools every agent of the run is offered, as `mcp__<server>__<tool>`:
   * `{ command, args, env?, cwd? }` run over stdio, `{ url, headers? }` over streamable HTTP.
   * Connected once when the run starts (a server that cannot start fails the run with one line)
   * and closed when it ends.
   */
  readonly mcp?: readonly McpServerSpec[];
}

/**
 * `input` with its `mcp` servers connected and their tools after the host's; `close` ends them.
 * Without servers nothing is loaded or connected.
 */
export async function withMcpTools<T extends McpOption & { readonly tools?: readonly Tool[] }>(
  input: T,
): Promise<{ input: Omit<T, 'mcp'>; close: () => Promise<void>; toolset?: McpToolset }> {
  const { mcp, ...rest } = input;
  if (!mcp || mcp.length === 0) return { input: rest, close: async () => undefined };
  const { connectMcpServers } = await import('./toolset.js');
  const hostTools = rest.tools ?? [];
  const toolset = await connectMcpServers(mcp, { takenNames: hostTools.map((tool) => tool.name) });
  return { input: { ...rest, tools: [...hostTools, ...toolset.tools] }, close: () => toolset.close(), toolset };
}
