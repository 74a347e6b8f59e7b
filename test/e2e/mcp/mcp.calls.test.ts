import { createHook } from 'node:async_hooks';
import { getEventListeners } from 'node:events';
import { mkdtemp, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { connectMcpServers, type McpServerSpec, type McpToolset } from '../../../src/index.js';
import type { ToolContext } from '../../../src/tools/defineTool.js';
import { alive, processesWith } from '../../support/processes.js';
import { within } from '../../support/until.js';

/**
 * A server's tool called as a session calls it (`prepare`, then the run with the call's context):
 * a call the session cancels ends at once with the session's reason, and a call after the
 * servers were closed is refused with one line naming the server.
 */

const SERVER = fileURLToPath(new URL('../../fixtures/mcp/server.mjs', import.meta.url));
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

describe('a stdio server', () => {
  const SCRIPTED = fileURLToPath(new URL('../../fixtures/mcp/scripted.mjs', import.meta.url));
  const whereami = JSON.stringify({ tools: [{ name: 'whereami', inputSchema: { type: 'object' } }], results: { whereami: 'whereami' } });

  it('starts with the arguments, working directory and environment it was given, and without them in exarch’s', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'exarch-mcp-cwd-'));
    // A command given no arguments gets none: a wrapper that hands scripted.mjs its own.
    const wrapper = join(dir, 'server.sh');
    await writeFile(wrapper, `#!/bin/sh\nexec '${process.execPath}' '${SCRIPTED}' '${whereami}' "$@"\n`, { mode: 0o755 });
    const given = await connectMcpServers([
      { command: process.execPath, args: [SCRIPTED, whereami, 'one', 'two words'], name: 'probe', cwd: dir, env: { EXARCH_MCP_PROBE: 'given' } },
    ]);
    // Set here too: a server given no environment gets only the SDK's safe default set, not this.
    process.env['EXARCH_MCP_PROBE'] = 'inherited?';
    const plain = await connectMcpServers([{ command: wrapper, name: 'probe' }]);
    try {
      const signal = new AbortController().signal;
      const client = { name: 'exarch', version: '0.1.0' };
      expect(JSON.parse(String(await call(given, 'mcp__probe__whereami', {}, signal)))).toEqual({
        argv: ['one', 'two words'],
        cwd: await realpath(dir),
        probe: 'given',
        client,
        capabilities: {},
      });
      expect(JSON.parse(String(await call(plain, 'mcp__probe__whereami', {}, signal)))).toEqual({
        argv: [],
        cwd: process.cwd(),
        probe: null,
        client,
        capabilities: {},
      });
    } finally {
      delete process.env['EXARCH_MCP_PROBE'];
      await Promise.all([given.close(), plain.close()]);
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('many calls under one signal (a session’s) leave no listener on it', async () => {
    const toolset = await connectMcpServers([{ command: process.execPath, args: [SCRIPTED, whereami], name: 'probe' }]);
    try {
      const session = new AbortController();
      for (let i = 0; i < 20; i++) await call(toolset, 'mcp__probe__whereami', {}, session.signal);
      expect(getEventListeners(session.signal, 'abort')).toEqual([]);
    } finally {
      await toolset.close();
    }
  });

  it('whose own helper process keeps its output open: closing still returns, once the server is gone', async () => {
    const marker = `daemon-${process.pid}-${Date.now()}`;
    const scenario = JSON.stringify({ tools: [], daemon: marker });
    const toolset = await connectMcpServers([{ command: process.execPath, args: [SCRIPTED, scenario], name: 'forking' }]);
    const pid = toolset.servers[0]?.pid;
    try {
      // The SDK's close takes up to 4 s (EOF, SIGTERM, SIGKILL) and exarch's wait for the pipes 5 s more.
      await within(toolset.close(), 15_000, 'closing a server whose helper holds its pipes');
      expect(pid !== undefined && alive(pid)).toBe(false);
    } finally {
      for (const daemon of processesWith(marker)) process.kill(daemon, 'SIGKILL');
    }
  }, 30_000);

  it('that ignores the end of its input and SIGTERM is killed, and gone when closing returns', async () => {
    const toolset = await connectMcpServers([{ command: process.execPath, args: [SCRIPTED, JSON.stringify({ tools: [], stubborn: true })], name: 'stubborn' }]);
    const pid = toolset.servers[0]?.pid;
    expect(pid).toBeTypeOf('number');
    // EOF, 2 s, SIGTERM, 2 s, SIGKILL: then the close waits for the exit.
    await within(toolset.close(), 15_000, 'closing a server that ignores SIGTERM');
    expect(pid !== undefined && alive(pid)).toBe(false);
  }, 30_000);

  it('closed, leaves no timer behind that would keep the process alive', async () => {
    // Every timer created while the server is opened and closed, until it fires or is cleared.
    const live = new Map<number, { hasRef(): boolean }>();
    const hook = createHook({
      init(id, type, _trigger, resource) {
        if (type === 'Timeout') live.set(id, resource as { hasRef(): boolean });
      },
      destroy(id) {
        live.delete(id);
      },
    }).enable();
    try {
      const toolset = await connectMcpServers([stdio]);
      await toolset.close();
      await new Promise((resolve) => setImmediate(resolve));
    } finally {
      hook.disable();
    }
    expect([...live.values()].filter((timer) => timer.hasRef())).toEqual([]);
  });
});
