import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../../src/tools/defineTool.js';
import { withMcpTools } from '../../../src/tools/mcp/mcpOption.js';
import type { McpServerSpec } from '../../../src/index.js';
import { alive } from '../../support/processes.js';

/**
 * The `mcp` option as a host passes it (`withMcpTools`, what the CLI and a worker build a run's
 * tools with): the servers' tools after the host's own, named apart from them, and the servers
 * closed with the run. Against the stdio test server (test/fixtures/mcp/server.mjs).
 */

const SERVER = fileURLToPath(new URL('../../fixtures/mcp/server.mjs', import.meta.url));
const stdio: McpServerSpec = { command: process.execPath, args: [SERVER, 'stdio', 'normal'] };

describe('the mcp option', () => {
  it('an empty list starts nothing: the input as it was, without `mcp`, and no toolset', async () => {
    const host = defineTool({ name: 'ping', description: 'Pings.', input: z.object({}), run: async () => 'pong' });
    const made = await withMcpTools({ tools: [host], mcp: [], wake: 'each' as const });
    expect(made.input).toEqual({ tools: [host], wake: 'each' });
    expect(made.toolset).toBeUndefined();
    await made.close();
  });

  it("adds the servers' tools after the host's, a server's tool renamed where a host tool has its name", async () => {
    const host = defineTool({ name: 'mcp__test_server__echo', description: 'The host’s own echo.', input: z.object({}), run: async () => 'host' });
    const made = await withMcpTools({ tools: [host], mcp: [stdio] });
    try {
      const names = (made.input.tools ?? []).map((tool) => tool.name);
      expect(names[0]).toBe('mcp__test_server__echo');
      expect(made.input.tools?.[0]).toBe(host);
      // Every name offered once: the server's echo took another.
      expect(new Set(names).size).toBe(names.length);
      expect(names.filter((name) => name.startsWith('mcp__test_server__echo'))).toHaveLength(2);
      expect(names).toContain('mcp__test_server__pid');
    } finally {
      await made.close();
    }
  });

  it("without host tools, offers the servers' alone; close ends the servers it started", async () => {
    const made = await withMcpTools({ mcp: [stdio] });
    // No host tools: the servers' alone.
    const tools: readonly { readonly name: string }[] = (made.input as { tools?: readonly { readonly name: string }[] }).tools ?? [];
    expect(tools.length).toBeGreaterThan(0);
    expect(tools.every((tool) => typeof tool === 'object' && tool.name.startsWith('mcp__test_server__'))).toBe(true);
    const pid = made.toolset?.servers[0]?.pid ?? 0;
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(true);
    await made.close();
    expect(alive(pid)).toBe(false);
  });

  it("a server's tool takes only an object as its input: anything else is refused with one line, before the server is asked", async () => {
    const made = await withMcpTools({ mcp: [stdio] });
    try {
      const echo = made.toolset?.tools.find((tool) => tool.name === 'mcp__test_server__echo');
      if (!echo) throw new Error('no echo tool');
      for (const input of [null, 'text', 42, ['text']])
        expect(echo.prepare(input)).toEqual({ ok: false, error: "invalid input for tool 'mcp__test_server__echo': (input): expected an object" });
      const prepared = echo.prepare({ text: 'hi' });
      expect(prepared.ok).toBe(true);
    } finally {
      await made.close();
    }
  });
});
