import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ReceivedRequest } from '../../support/anthropicServer.js';
import { call, exarch, onCleanup, serve, stream } from '../../support/cliHarness.js';
import { toolResultsOf } from '../../support/hostileInput.js';
import { expectNoInternalText, expectOneLine } from '../../support/oneLine.js';

/**
 * Issue 37, "internal error text never reaches a user", MCP servers. Through `exarch run --mcp`
 * against real servers: test/fixtures/mcp/server.mjs (the SDK's server side) and scripted.mjs
 * (hand-written, to send what a careless or hostile server would).
 *
 * A message over the 4 MiB cap from a stdio server: the SDK stops the server, and the call said
 * only "the process exited". Now it says the server sent a message over the cap, naming both, and
 * the run goes on (the server's later calls say why it is gone), as the cap's design has it.
 *
 * One tool of a server's list that is not one MCP allows (an input schema that is not an object
 * schema, no name): the SDK refused the whole list, and the run did not start, with zod's dump of
 * every issue as its line. Now that tool is left out, in one line naming the server, the tool and
 * why, and the server's other tools are offered. A list or a call result that is not what MCP
 * allows is one line too, not a dump.
 */

const SERVER = fileURLToPath(new URL('../../fixtures/mcp/server.mjs', import.meta.url));
const SCRIPTED = fileURLToPath(new URL('../../fixtures/mcp/scripted.mjs', import.meta.url));
const quote = (word: string): string => `'${word.replace(/'/g, `'\\''`)}'`;

/** The model's answer: what its last request's tool results said, one a line. */
const results = (request: ReceivedRequest) =>
  stream({
    text: toolResultsOf(request)
      .map((r) => `${r.isError ? 'error' : 'ok'}: ${r.content}`)
      .join('\n'),
  });

describe('exarch run --mcp, a message over the cap', () => {
  it('from a stdio server: the call says the server sent a message over the 4 MiB cap; its next call says it is gone; the run goes on', async () => {
    const server = await serve({
      root: [
        stream({ toolCalls: [call('mcp__test_server__huge', {})] }),
        stream({ toolCalls: [call('mcp__test_server__echo', { text: 'after' }), call('read_file', { path: 'nothing.md' })] }),
        results,
      ],
    });
    const run = await exarch(['run', '--no-store', '--mcp', `${quote(process.execPath)} ${quote(SERVER)} stdio`, 'use the server'], { server });
    expect(run.code, run.stderr).toBe(0);
    const [huge] = toolResultsOf(server.requests[1]);
    expect(huge).toMatchObject({
      isError: true,
      content:
        "tool 'mcp__test_server__huge' failed: MCP server 'test_server' sent a message over the 4 MiB cap (4194304 bytes): the call failed, and the server was stopped",
    });
    const [after, local] = toolResultsOf(server.requests[2]);
    expect(after).toMatchObject({
      isError: true,
      content:
        "tool 'mcp__test_server__echo' failed: MCP server 'test_server' is not running: it sent a message over the 4 MiB cap (4194304 bytes), and was stopped",
    });
    // The run's other tools answer as ever.
    expect(local?.content).toMatch(/nothing\.md/);
    expect(run.stdout).toContain('error: tool');
    expectNoInternalText(run.stderr);
  });

  it('from a streamable HTTP server: the call says so, in the same words, and the server’s next call is answered', async () => {
    const http = spawn(process.execPath, [SERVER, 'http'], { stdio: ['ignore', 'pipe', 'inherit'] });
    onCleanup(() => void http.kill('SIGKILL'));
    const port = await new Promise<string>((resolve) => {
      let out = '';
      http.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        const match = /port (\d+)/.exec(out);
        if (match?.[1]) resolve(match[1]);
      });
    });
    const server = await serve({
      root: [stream({ toolCalls: [call('mcp__test_server__huge', {})] }), stream({ toolCalls: [call('mcp__test_server__echo', { text: 'after' })] }), results],
    });
    const run = await exarch(['run', '--no-store', '--mcp', `http://127.0.0.1:${port}/mcp`, 'use the server'], { server });
    expect(run.code, run.stderr).toBe(0);
    expect(toolResultsOf(server.requests[1])[0]).toMatchObject({
      isError: true,
      content:
        "tool 'mcp__test_server__huge' failed: MCP server 'test_server' sent a message over the 4 MiB cap (4194304 bytes): the calls it was answering failed",
    });
    expect(toolResultsOf(server.requests[2])[0]).toMatchObject({ isError: false, content: 'echo: after' });
    expectNoInternalText(run.stderr);
  });
});

/** `exarch run --mcp` of the hand-written server with this scenario (see scripted.mjs). */
const scriptedFlag = (scenario: object): string => `${quote(process.execPath)} ${quote(SCRIPTED)} ${quote(JSON.stringify(scenario))}`;

describe('exarch run --mcp, a server whose list holds a tool MCP does not allow', () => {
  it('leaves that tool out in one line naming the server, the tool and why, and offers the others', async () => {
    const scenario = {
      name: 'kit',
      tools: [
        { name: 'good', description: 'works', inputSchema: { type: 'object' } },
        { name: 'stringly', inputSchema: 'any string will do' },
        { name: 'scalar', inputSchema: { type: 'string' } },
        { description: 'a tool without a name', inputSchema: { type: 'object' } },
        { name: 'also_good', inputSchema: { type: 'object' } },
      ],
      // A call result that is not MCP's: `content` must be a list.
      results: { also_good: { content: 'just text' } },
    };
    const server = await serve({
      root: [stream({ toolCalls: [call('mcp__kit__good', {}), call('mcp__kit__also_good', {})] }), results],
    });
    const run = await exarch(['run', '--no-store', '--mcp', scriptedFlag(scenario), 'use the kit'], { server });
    expect(run.code, run.stderr).toBe(0);
    expectOneLine(run.stderr, /^exarch: MCP server 'kit': its tool 'stringly' is left out: inputSchema is not an object$/);
    expectOneLine(run.stderr, /^exarch: MCP server 'kit': its tool 'scalar' is left out: inputSchema\.type is not "object"$/);
    expectOneLine(run.stderr, /^exarch: MCP server 'kit': its tool '\(no name\)' is left out: name is missing$/);
    const offered = server.requests[0]?.body.tools?.map((tool) => tool.name) ?? [];
    expect(offered.filter((name) => name.startsWith('mcp__'))).toEqual(['mcp__kit__good', 'mcp__kit__also_good']);
    expect(toolResultsOf(server.requests[1])).toMatchObject([
      { isError: false, content: 'called good' },
      {
        isError: true,
        content: "tool 'mcp__kit__also_good' failed: MCP server 'kit': it sent an answer that is not what MCP allows (content is not an array)",
      },
    ]);
  });

  it('a list that is no list: the run does not start, with one line naming the server and why', async () => {
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarch(['run', '--no-store', '--mcp', scriptedFlag({ name: 'kit', onList: 'garbage' }), 'use the kit'], { server });
    expect(run.code).toBe(1);
    expectOneLine(run.stderr, /^exarch: MCP server 'kit' could not list its tools: it sent an answer that is not what MCP allows \(tools is not an array\)$/);
    expect(server.requests).toHaveLength(0);
  });
});
