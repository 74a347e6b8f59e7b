import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { call, exarch, lastUserText, onCleanup, serve, stream, workdir, type CliRun } from '../../support/cliHarness.js';
import { filesUnder } from '../../support/filesUnder.js';

/**
 * Issue 37, hole 5, MCP: `--mcp https://…?token=…` was stored whole with the run (`options.mcp`),
 * in a database every reader of the run reads. It is stored masked now; the run that was given
 * it connects with it, a resume of it says in one line how to give the token instead (`${NAME}`,
 * read from the environment of each process that runs the run), and a run given it that way is
 * resumed with the token.
 */

const TOKEN = 'McpTok-24680-secret';
const SECRET_BITS = ['McpTok-24680', '24680-secret'];

/** A streamable HTTP MCP server with one tool (`echo`) that answers 401 to a request without `?token=TOKEN`; the query strings it was sent. */
async function tokenServer(): Promise<{ url: string; queries: string[] }> {
  const queries: string[] = [];
  const sessions = new Map<string, StreamableHTTPServerTransport>();
  const http = createServer(async (req, res) => {
    const query = new URL(req.url ?? '/', 'http://x').search;
    queries.push(query);
    if (query !== `?token=${TOKEN}`) {
      res.writeHead(401).end('who are you?');
      return;
    }
    const id = req.headers['mcp-session-id'];
    const known = typeof id === 'string' ? sessions.get(id) : undefined;
    const transport: StreamableHTTPServerTransport =
      known ?? new StreamableHTTPServerTransport({ sessionIdGenerator: () => randomUUID(), onsessioninitialized: (sid) => void sessions.set(sid, transport) });
    if (!known) {
      const server = new Server({ name: 'web', version: '1.0.0' }, { capabilities: { tools: {} } });
      server.setRequestHandler(ListToolsRequestSchema, async () => ({
        tools: [{ name: 'echo', inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } } } }],
      }));
      server.setRequestHandler(CallToolRequestSchema, async (request) => ({
        content: [{ type: 'text', text: `echo: ${String(request.params.arguments?.['text'])}` }],
      }));
      await server.connect(transport);
    }
    await transport.handleRequest(req, res);
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  onCleanup(async () => {
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
  });
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, queries };
}

function leaks(runs: readonly CliRun[], dir: string): string[] {
  const texts = new Map([
    ...runs.flatMap((run, i): [string, string][] => [
      [`stdout #${i}`, run.stdout],
      [`stderr #${i}`, run.stderr],
    ]),
    ...filesUnder(dir),
  ]);
  return [...texts].flatMap(([where, text]) => SECRET_BITS.filter((bit) => text.includes(bit)).map((bit) => `${bit} in ${where}`));
}

/** The `mcp` option the run was stored with, read with SQLite itself. */
function storedMcp(cwd: string, id: string): unknown {
  const db = new Database(join(cwd, '.exarch', 'exarch.db'), { readonly: true });
  try {
    const row = db.prepare('SELECT options FROM runs WHERE id = ?').get(id) as { options: string } | undefined;
    return (JSON.parse(row?.options ?? '{}') as { mcp?: unknown }).mcp;
  } finally {
    db.close();
  }
}

const runIdOf = (run: CliRun): string => /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';

describe('an MCP server URL with a token', () => {
  it('given in the URL: the run uses it, the store keeps it masked, and a resume says in one line how to give it', { timeout: 60_000 }, async () => {
    const mcp = await tokenServer();
    const cwd = workdir();
    const model = await serve({
      root: [stream({ toolCalls: [call('mcp__web__echo', { text: 'hi' })] }), (request) => stream({ text: lastUserText(request) })],
    });
    const run = await exarch(['run', '--mcp', `${mcp.url}?token=${TOKEN}`, 'Echo hi.'], { server: model, cwd });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe('[result ok: "echo: hi"]\n');
    const id = runIdOf(run);
    expect(storedMcp(cwd, id)).toEqual([`${mcp.url}?token=***`]);

    // Interrupted before its first request is answered, then resumed: the token is not there to be had.
    const interrupted = await exarch(['run', '--mcp', `${mcp.url}?token=${TOKEN}`, 'Echo again.'], {
      server: await serve({ root: [stream({ text: 'never' }, { latencyMs: 30_000 })] }),
      cwd,
      whenRequests: { count: 1, then: (child) => child.kill('SIGINT') },
    });
    expect(interrupted.code).toBe(130);
    const resumed = await exarch(['resume', runIdOf(interrupted)], { server: model, cwd });
    expect(resumed.code).toBe(1);
    expect(resumed.stderr).toBe(
      `exarch: --mcp ${mcp.url}?token=***: the URL's secret is not kept with a stored run; give it as \${NAME} in the URL, read from the environment of each process that runs the run\n`,
    );
    expect(leaks([run, interrupted, resumed], cwd)).toEqual([]);
  });

  it('given as a variable reference: stored as written, read from the environment of the run and of its resume', { timeout: 60_000 }, async () => {
    const mcp = await tokenServer();
    const cwd = workdir();
    const given = `${mcp.url}?token=\${WEB_MCP_TOKEN}`;
    const interrupted = await exarch(['run', '--mcp', given, 'Echo hi.'], {
      server: await serve({ root: [stream({ text: 'never' }, { latencyMs: 30_000 })] }),
      cwd,
      env: { WEB_MCP_TOKEN: TOKEN },
      whenRequests: { count: 1, then: (child) => child.kill('SIGINT') },
    });
    expect(interrupted.code, interrupted.stderr).toBe(130);
    const id = runIdOf(interrupted);
    expect(storedMcp(cwd, id)).toEqual([given]);
    const model = await serve({
      root: [stream({ toolCalls: [call('mcp__web__echo', { text: 'again' })] }), (request) => stream({ text: lastUserText(request) })],
    });
    const missing = await exarch(['resume', id], { server: model, cwd });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`exarch: --mcp ${mcp.url}?token=***: \${WEB_MCP_TOKEN} is not set in the environment\n`);
    const resumed = await exarch(['resume', id], { server: model, cwd, env: { WEB_MCP_TOKEN: TOKEN } });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toBe('[result ok: "echo: again"]\n');
    expect(mcp.queries.every((query) => query === `?token=${TOKEN}`)).toBe(true);
    expect(leaks([interrupted, missing, resumed], cwd)).toEqual([]);
  });
});
