import { randomUUID } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterEach, describe, expect, it } from 'vitest';
import { connectMcpServers, McpServerError, type McpToolset } from '../../../../src/index.js';
import type { ToolContext } from '../../../../src/tools/defineTool.js';
import { within } from '../../../support/until.js';

/**
 * An MCP server over streamable HTTP, as a host reaches it: the headers it was given, the
 * session ended on close, and the ways a call fails in transport. The server is the SDK's server
 * side on 127.0.0.1, in this process so that a test can see every request it got and make one
 * of them fail at the HTTP level.
 */

type Seen = { readonly method: string; readonly headers: IncomingHttpHeaders };
type Behaviour = {
  /** A header every request must carry, or the server answers 401. */
  requireHeader?: readonly [string, string];
  /** How a DELETE (the end of a session) is answered: passed to the transport, a status, or never. */
  onDelete?: 'handle' | 'hang' | number;
};

const servers: HttpServer[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Starts the server; resolves with its URL and the requests it has seen. */
async function mcpOverHttp(behaviour: Behaviour = {}): Promise<{ url: string; seen: Seen[]; sessions: string[] }> {
  const seen: Seen[] = [];
  const sessions: string[] = [];
  const transports = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer(async (req, res) => {
    seen.push({ method: req.method ?? '', headers: req.headers });
    const [name, value] = behaviour.requireHeader ?? [];
    if (name !== undefined && req.headers[name] !== value) {
      res.writeHead(401).end('who are you?');
      return;
    }
    if (req.method === 'DELETE' && behaviour.onDelete !== undefined && behaviour.onDelete !== 'handle') {
      if (typeof behaviour.onDelete === 'number') res.writeHead(behaviour.onDelete).end('cannot end it');
      return;
    }
    let body: unknown;
    if (req.method === 'POST') {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      // A gateway in front of the server failing one tool's calls: an HTTP error, no JSON-RPC answer.
      if (isCallOf(body, 'gateway')) {
        res.writeHead(502).end('the gateway is down');
        return;
      }
    }
    const id = req.headers['mcp-session-id'];
    let transport = typeof id === 'string' ? transports.get(id) : undefined;
    if (!transport) {
      const created = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        onsessioninitialized: (sid) => {
          sessions.push(sid);
          transports.set(sid, created);
        },
      });
      await serverOfTools().connect(created);
      transport = created;
    }
    await transport.handleRequest(req, res, body);
  });
  servers.push(http);
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, seen, sessions };
}

function isCallOf(body: unknown, tool: string): boolean {
  if (typeof body !== 'object' || body === null || !('method' in body) || body.method !== 'tools/call') return false;
  return 'params' in body && typeof body.params === 'object' && body.params !== null && 'name' in body.params && body.params.name === tool;
}

function serverOfTools(): Server {
  const server = new Server({ name: 'web', version: '1.0.0' }, { capabilities: { tools: {} } });
  const object = { type: 'object' as const, properties: {} };
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [
      { name: 'echo', inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } } } },
      { name: 'gateway', inputSchema: object },
      { name: 'huge', inputSchema: object },
      { name: 'hang', inputSchema: object },
    ],
  }));
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    switch (request.params.name) {
      case 'huge':
        return { content: [{ type: 'text', text: 'H'.repeat(5 * 1024 * 1024) }] };
      case 'hang':
        return new Promise(() => {});
      default:
        return { content: [{ type: 'text', text: `echo: ${String(request.params.arguments?.['text'])}` }] };
    }
  });
  return server;
}

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' };

/** Runs `tool` of `toolset` with `input`, as the session's toolbox does; resolves with its result or its error. */
async function call(toolset: McpToolset, tool: string, input: object = {}): Promise<unknown> {
  const found = toolset.tools.find((t) => t.name === tool);
  if (!found) throw new Error(`no tool ${tool}`);
  const prepared = found.prepare(input);
  if (!prepared.ok) throw new Error(prepared.error);
  const context: ToolContext = { agent, toolUseId: 'toolu_test', signal: new AbortController().signal };
  return prepared.value(context).then(
    (result) => result,
    (error: unknown) => error,
  );
}

describe('headers given for a server', () => {
  it('go with every request, the end of its session too; without them a server that needs them is one line', async () => {
    const server = await mcpOverHttp({ requireHeader: ['authorization', 'Bearer t0ken'] });
    const toolset = await connectMcpServers([{ url: server.url, name: 'web', headers: { authorization: 'Bearer t0ken' } }]);
    expect(await call(toolset, 'mcp__web__echo', { text: 'in' })).toBe('echo: in');
    await toolset.close();
    expect(server.seen.map((r) => r.method)).toContain('DELETE');
    expect(server.seen.filter((r) => r.headers.authorization !== 'Bearer t0ken')).toEqual([]);

    const refused = await connectMcpServers([{ url: server.url, name: 'web' }]).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toBeInstanceOf(McpServerError);
    expect(refused).toMatchObject({ kind: 'start', server: 'web' });
    expect((refused as Error).message).toMatch(/^MCP server 'web' could not start: .*who are you\?$/);
  });
});

describe('closing the connection', () => {
  it("ends the server's session with a DELETE naming it", async () => {
    const server = await mcpOverHttp();
    const toolset = await connectMcpServers([{ url: server.url, name: 'web' }]);
    expect(server.sessions).toHaveLength(1);
    await toolset.close();
    const ended = server.seen.filter((r) => r.method === 'DELETE');
    expect(ended.map((r) => r.headers['mcp-session-id'])).toEqual(server.sessions);
  });

  it('finishes when the server refuses to end the session, or never answers', async () => {
    for (const onDelete of [500, 'hang'] as const) {
      const server = await mcpOverHttp({ onDelete });
      const toolset = await connectMcpServers([{ url: server.url, name: 'web' }]);
      await expect(within(toolset.close(), 4_000, `close (DELETE answered ${String(onDelete)})`)).resolves.toBeUndefined();
      expect(server.seen.map((r) => r.method)).toContain('DELETE');
    }
  });
});

describe('a call that fails in transport', () => {
  it('is one line naming the server with what the HTTP answer said, its cause kept, and the server stays usable', async () => {
    const server = await mcpOverHttp();
    const toolset = await connectMcpServers([{ url: server.url, name: 'web' }]);
    try {
      const failure = await call(toolset, 'mcp__web__gateway');
      expect(failure).toBeInstanceOf(McpServerError);
      expect(failure).toMatchObject({
        kind: 'call',
        server: 'web',
        message: "MCP server 'web': Streamable HTTP error: Error POSTing to endpoint: the gateway is down",
      });
      expect((failure as Error).cause).toMatchObject({ code: 502 });
      expect(await call(toolset, 'mcp__web__echo', { text: 'after' })).toBe('echo: after');
    } finally {
      await toolset.close();
    }
  });

  it('a response past 4 MiB fails every call in flight on that server with one line giving the cap', async () => {
    const server = await mcpOverHttp();
    const toolset = await connectMcpServers([{ url: server.url, name: 'web' }]);
    try {
      const hanging = call(toolset, 'mcp__web__hang');
      const huge = await call(toolset, 'mcp__web__huge');
      const expected = {
        kind: 'call',
        server: 'web',
        message: "MCP server 'web' sent a message over the 4 MiB cap (4194304 bytes): the calls it was answering failed",
      };
      expect(huge).toMatchObject(expected);
      expect((huge as Error).cause).toMatchObject({ message: 'a response exceeded 4194304 bytes' });
      expect(await within(hanging, 4_000, 'the call in flight beside it')).toMatchObject(expected);
      expect(await call(toolset, 'mcp__web__echo', { text: 'after' })).toBe('echo: after');
    } finally {
      await toolset.close();
    }
  });

  it('nothing listening: the run does not start, and the line says why fetch failed', async () => {
    const server = await mcpOverHttp();
    for (const open of servers.splice(0)) await new Promise((resolve) => open.close(resolve));
    const refused = await connectMcpServers([{ url: server.url, name: 'web' }]).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(refused).toMatchObject({ kind: 'start' });
    expect((refused as Error).cause).toBeInstanceOf(Error);
    expect((refused as Error).message).toMatch(/^MCP server 'web' could not start: .*fetch failed: connect ECONNREFUSED 127\.0\.0\.1:\d+$/);
  });
});
