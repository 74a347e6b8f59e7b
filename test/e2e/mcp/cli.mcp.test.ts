import { spawn } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { call, exarch, lastUserText, onCleanup, serve, stream, workdir } from '../../support/cliHarness.js';
import { alive } from '../../support/processes.js';

/**
 * `exarch run --mcp` end to end: the compiled command, the scripted model server, and a real MCP
 * server (test/fixtures/mcp/server.mjs, the SDK's server side) over stdio and over HTTP on 127.0.0.1.
 */

const SERVER = fileURLToPath(new URL('../../fixtures/mcp/server.mjs', import.meta.url));
const quote = (word: string): string => `'${word.replace(/'/g, `'\\''`)}'`;
const stdioFlag = (mode = 'normal'): string => `${quote(process.execPath)} ${quote(SERVER)} stdio ${mode}`;

describe('exarch run --mcp', () => {
  it('offers a stdio server’s tools to the agents, says so on stderr, and leaves no server process behind', async () => {
    const server = await serve({
      root: [
        stream({ toolCalls: [call('mcp__test_server__echo', { text: 'from the cli' }), call('mcp__test_server__pid', {})] }),
        (request) => stream({ text: `Heard:\n${lastUserText(request)}` }),
      ],
    });
    const run = await exarch(['run', '--no-store', '--mcp', stdioFlag(), 'use the server'], { server });
    expect(run.stderr).not.toMatch(/failed|Error/);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Heard:\n\[result ok: "echo: from the cli"\]\n\[result ok: "\d+"\]\n$/);
    expect(run.stderr).toContain("exarch: MCP server 'test_server': 14 tools (mcp__test_server__echo, mcp__test_server__add, ");
    expect(run.stderr).toContain('exarch: MCP tool mcp__test_server__deep: its input schema nests deeper than 32 levels; it is offered as taking any object');
    // The model was shown the server's tools beside the built-in ones.
    const offered = (server.requests[0]?.body.tools ?? []).map((tool) => String((tool as { name?: unknown }).name));
    expect(offered).toEqual(expect.arrayContaining(['read_file', 'mcp__test_server__echo', 'mcp__test_server__hang']));
    const pid = Number(/\[result ok: "(\d+)"\]/.exec(run.stdout)?.[1]);
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(false);
  });

  it('a streamable HTTP server is given by its URL', async () => {
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
      root: [stream({ toolCalls: [call('mcp__test_server__add', { a: 20, b: 22 })] }), (request) => stream({ text: lastUserText(request) })],
    });
    const run = await exarch(['run', '--mcp', `http://127.0.0.1:${port}/mcp`, 'add'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('[result ok: "{\\n  \\"sum\\": 42\\n}"]\n');
  });

  it('a run interrupted while a server call hangs is resumed with the same server, started again', async () => {
    const cwd = workdir();
    const server = await serve({
      root: [
        stream({ toolCalls: [call('mcp__test_server__hang', {})] }),
        stream({ toolCalls: [call('mcp__test_server__echo', { text: 'after the resume' })] }),
        (request) => stream({ text: lastUserText(request) }),
      ],
    });
    const first = await exarch(['run', '--mcp', stdioFlag(), 'hang'], { server, cwd, whenRequests: { count: 1, then: (child) => child.kill('SIGINT') } });
    expect(first.code).toBe(130);
    const id = /exarch: run (\w{26}) started/.exec(first.stderr)?.[1] ?? '';
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.stderr).toContain("exarch: MCP server 'test_server': 14 tools");
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('[result ok: "echo: after the resume"]\n');
  });

  it('a server that does not start stops the run before the model is asked: one line, exit 1', async () => {
    const server = await serve({ root: [stream({ text: 'never' })] });
    const run = await exarch(['run', '--mcp', stdioFlag('crash-at-start'), 'x'], { server });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^exarch: MCP server 'node' could not start: .*\(its last words: fatal: no configuration found\)\n$/);
    expect(server.requests).toHaveLength(0);
    expect(run.stdout).toBe('');
  });

  it("a declared agent's profile may name the servers' tools; a name no server offers is one line", async () => {
    const cwd = workdir();
    writeFileSync(
      join(cwd, 'exarch.config.json'),
      JSON.stringify({ agents: { echoer: { description: 'Echoes through the server.', tools: ['mcp__test_server__echo'] } } }),
    );
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'e', type: 'echoer', task: 'Echo hi.' }), call('wait_for_agents', {})] }),
        (request) => stream({ text: lastUserText(request) }),
      ],
      e: [
        stream({ toolCalls: [call('mcp__test_server__echo', { text: 'hi' })] }),
        (request) => stream({ toolCalls: [call('reply', { result: lastUserText(request) })] }),
      ],
    });
    const run = await exarch(['run', '--no-store', '--mcp', stdioFlag(), 'echo'], { server, cwd });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain('[result ok: "echo: hi"]');
    // The declared agent was offered exactly its profile's tools: the server's echo and the protocol tools.
    const offered = (server.requests.find((r) => r.agent === 'e')?.body.tools ?? []).map((tool) => String((tool as { name?: unknown }).name));
    expect(offered).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply', 'mcp__test_server__echo']);

    writeFileSync(join(cwd, 'exarch.config.json'), JSON.stringify({ agents: { echoer: { description: 'Echoes.', tools: ['mcp__test_server__nope'] } } }));
    const asked = server.requests.length;
    const unknown = await exarch(['run', '--mcp', stdioFlag(), 'echo'], { server, cwd });
    expect(unknown.code).toBe(1);
    const lines = unknown.stderr.trimEnd().split('\n');
    expect(lines.at(-1)).toMatch(
      /^exarch: exarch\.config\.json: agents\.echoer\.tools lists 'mcp__test_server__nope', which is not one of the run's tools \(.*mcp__test_server__echo.*\); --allow-write, --allow-shell and --mcp offer more$/,
    );
    // Only the server's own line came before it; the server was closed and the model never asked.
    expect(lines.slice(0, -1).every((line) => line.startsWith("exarch: MCP server 'test_server'") || line.startsWith('exarch: MCP tool '))).toBe(true);
    expect(server.requests).toHaveLength(asked);
    expect(existsSync(join(cwd, '.exarch', 'exarch.db'))).toBe(false);
  });

  it('a --mcp value that is not a server is a usage error', async () => {
    const empty = await exarch(['run', '--mcp', '  ', 'x'], { env: { ANTHROPIC_API_KEY: 'k' } });
    expect(empty.code).toBe(2);
    expect(empty.stderr.split('\n')[0]).toBe('exarch: --mcp needs a command or an http(s):// URL, got an empty value');
    const unclosed = await exarch(['run', '--mcp', "node 'server.mjs", 'x'], { env: { ANTHROPIC_API_KEY: 'k' } });
    expect(unclosed.code).toBe(2);
    expect(unclosed.stderr.split('\n')[0]).toBe("exarch: --mcp value has an unclosed ' quote: node 'server.mjs");
    const resume = await exarch(['resume', '01HZZZZZZZZZZZZZZZZZZZZZZZ', '--mcp', 'x']);
    expect(resume.code).toBe(2);
    expect(resume.stderr.split('\n')[0]).toBe('exarch: --mcp is not an option of resume');
  });
});
