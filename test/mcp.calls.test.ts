import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { connectMcpServers, type McpServerSpec, type McpToolset } from '../src/index.js';
import type { ToolContext } from '../src/tools/defineTool.js';

/**
 * A server's tool called as a session calls it (`prepare`, then the run with the call's context):
 * a call the session cancels ends at once with the session's reason, and a call after the
 * servers were closed is refused with one line naming the server.
 */

const SERVER = fileURLToPath(new URL('./fixtures/mcp/server.mjs', import.meta.url));
const stdio: McpServerSpec = { command: process.execPath, args: [SERVER, 'stdio', 'normal'] };
const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' };

/** Runs `tool` of `toolset` with `input` and `signal`, as the session's toolbox does. */
async function call(toolset: McpToolset, tool: string, input: object, signal: AbortSignal): Promise<unknown> {
  const found = toolset.tools.find((t) => t.name === tool);
  if (!found) throw new Error(`no tool ${tool}`);
  const prepared = found.prepare(input);
  if (!prepared.ok) throw new Error(prepared.error);
  const context: ToolContext = { agent, toolUseId: 'toolu_test', signal };
  return prepared.value(context);
}

describe("an MCP server's tool, called", () => {
  it('a call the session cancels ends at once with its reason, before or during the call', async () => {
    const toolset = await connectMcpServers([stdio]);
    try {
      const reason = new Error('cancelled by the session');
      // Cancelled before the call: the server is not kept waiting, the reason comes back.
      await expect(call(toolset, 'mcp__test_server__echo', { text: 'hi' }, AbortSignal.abort(reason))).rejects.toBe(reason);
      // Cancelled during a call the server never answers.
      const during = new AbortController();
      const hanging = call(toolset, 'mcp__test_server__hang', {}, during.signal);
      setTimeout(() => during.abort(reason), 200);
      await expect(hanging).rejects.toBe(reason);
      // The connection goes on: the next call is answered.
      expect(await call(toolset, 'mcp__test_server__echo', { text: 'again' }, new AbortController().signal)).toContain('again');
    } finally {
      await toolset.close();
    }
  });

  it('a call after the servers were closed is refused with one line naming the server', async () => {
    const toolset = await connectMcpServers([stdio]);
    await toolset.close();
    await expect(call(toolset, 'mcp__test_server__echo', { text: 'hi' }, new AbortController().signal)).rejects.toMatchObject({
      message: "MCP server 'test_server' is not running: closed by exarch at the end of the run",
      kind: 'exited',
    });
  });

  it('a server that exits during a call fails it with one line saying so, its cause kept', async () => {
    const toolset = await connectMcpServers([stdio]);
    try {
      const failure = await call(toolset, 'mcp__test_server__crash', {}, new AbortController().signal).then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(failure).toMatchObject({
        kind: 'exited',
        message: expect.stringMatching(/^MCP server 'test_server' stopped during the call: the process exited/),
      });
      expect((failure as Error).cause).toBeInstanceOf(Error);
    } finally {
      await toolset.close();
    }
  });
});
