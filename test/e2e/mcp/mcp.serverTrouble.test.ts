import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { connectMcpServers, McpServerError, type McpServerSpec } from '../../../src/index.js';
import { processesWith } from '../../support/processes.js';
import { within } from '../../support/until.js';

/**
 * A server that starts but then fails exarch: its tool list refused or cut off by its exit, with
 * what it last said on stderr, against a hand-written stdio MCP server
 * (test/fixtures/mcp/scripted.mjs) that does what a scenario says.
 */

const SCRIPTED = fileURLToPath(new URL('../../fixtures/mcp/scripted.mjs', import.meta.url));
const scripted = (scenario: object, marker = 'none'): McpServerSpec => ({
  command: process.execPath,
  args: [SCRIPTED, JSON.stringify(scenario), marker],
  name: 'lister',
});

async function failure(specs: McpServerSpec[], options: { startTimeoutMs?: number } = {}): Promise<McpServerError> {
  const error = await connectMcpServers(specs, options).then(
    async (toolset) => {
      await toolset.close();
      throw new Error('the servers were connected');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(McpServerError);
  return error as McpServerError;
}

describe('a server that cannot list its tools', () => {
  it('answers tools/list with an error: the run does not start, with one line naming the server, and every server is closed', async () => {
    const marker = `list-error-${process.pid}-${Date.now()}`;
    const error = await failure([scripted({ onList: 'error' }, marker), { ...scripted({ tools: [] }, marker), name: 'fine' }]);
    expect(error.message).toBe("MCP server 'lister' could not list its tools: MCP error -32603: the tool registry is down");
    expect(error.kind).toBe('start');
    expect(error.server).toBe('lister');
    expect(processesWith(marker)).toEqual([]);
    expect(error.cause).toMatchObject({ code: -32603 });
  });

  it('exits instead: the line quotes the last non-blank line it wrote to stderr, trimmed', async () => {
    const error = await failure([scripted({ onList: 'exit', stderr: 'starting\n  giving up: no registry  \n\n   \n' })]);
    expect(error.message).toBe("MCP server 'lister' could not list its tools: the process exited (its last words: giving up: no registry)");
  });

  it('exits after a very long line: only its first 300 characters are quoted', async () => {
    const longer = await failure([scripted({ onList: 'exit', stderr: `${'w'.repeat(301)}\n` })]);
    expect(longer.message).toBe(`MCP server 'lister' could not list its tools: the process exited (its last words: ${'w'.repeat(300)}…)`);
    const longest = await failure([scripted({ onList: 'exit', stderr: `${'v'.repeat(300)}\n` })]);
    expect(longest.message).toBe(`MCP server 'lister' could not list its tools: the process exited (its last words: ${'v'.repeat(300)})`);
  });

  it('writes more than it keeps: the quote comes from the last 4,096 characters of its stderr', async () => {
    // One unbroken line of 10,000 characters: the tail kept is all 'b', the start of it is quoted.
    const error = await failure([scripted({ onList: 'exit', stderr: `${'a'.repeat(5_000)}${'b'.repeat(5_000)}` })]);
    expect(error.message).toBe(`MCP server 'lister' could not list its tools: the process exited (its last words: ${'b'.repeat(300)}…)`);
  });

  it('never answers tools/list: fails once the start time is up, with the SDK error as its cause', async () => {
    const error = await within(failure([scripted({ onList: 'hang' })], { startTimeoutMs: 300 }), 10_000, 'a tool list that never comes');
    expect(error.message).toBe("MCP server 'lister' could not list its tools: MCP error -32001: Request timed out");
    expect(error.kind).toBe('start');
    expect(error.cause).toMatchObject({ code: -32001 });
  });

  it('exits without a word: the line says only that it exited', async () => {
    const error = await failure([scripted({ onList: 'exit' })]);
    expect(error.message).toBe("MCP server 'lister' could not list its tools: the process exited");
  });
});

describe('a server that does not finish its handshake', () => {
  it('exits during it: the line quotes the last line it wrote to stderr', async () => {
    const error = await failure([scripted({ onInitialize: 'exit', stderr: 'fatal: no configuration found\n' })]);
    expect(error.message).toMatch(/^MCP server 'lister' could not start: .+ \(its last words: fatal: no configuration found\)$/);
    expect(error.kind).toBe('start');
  });

  it('fails once the start time is up, with one line and the SDK error as its cause', async () => {
    const error = await within(failure([scripted({ onInitialize: 'hang' })], { startTimeoutMs: 300 }), 10_000, 'a handshake that never comes');
    expect(error.message).toBe("MCP server 'lister' could not start: MCP error -32001: Request timed out");
    expect(error.kind).toBe('start');
    expect(error.cause).toMatchObject({ code: -32001 });
  });
});
