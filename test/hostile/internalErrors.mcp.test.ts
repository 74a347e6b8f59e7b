import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import type { ReceivedRequest } from '../support/anthropicServer.js';
import { call, exarch, onCleanup, serve, stream } from '../support/cliHarness.js';
import { toolResultsOf } from '../support/hostileInput.js';
import { expectNoInternalText } from '../support/oneLine.js';

/**
 * Issue 37, "internal error text never reaches a user", MCP servers. Through `exarch run --mcp`
 * against real servers: test/fixtures/mcp/server.mjs (the SDK's server side) and scripted.mjs
 * (hand-written, to send what a careless or hostile server would).
 *
 * A message over the 4 MiB cap from a stdio server: the SDK stops the server, and the call said
 * only "the process exited". Now it says the server sent a message over the cap, naming both, and
 * the run goes on (the server's later calls say why it is gone), as the cap's design has it.
 */

const SERVER = fileURLToPath(new URL('../fixtures/mcp/server.mjs', import.meta.url));
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
