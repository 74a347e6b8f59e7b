import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { connectMcpServers, McpServerError, parseMcpFlag, runAgent, type McpServerSpec } from '../../../src/index.js';
import { resumeRun, RunError, startRun, type DurableRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider, type Script } from '../../../src/testing/index.js';
import type { Message, ModelRequest, Provider, StreamSink, ToolSpec } from '../../../src/engine/types.js';
import { toolResults } from '../../support/helpers.js';
import { alive, processesWith } from '../../support/processes.js';

/**
 * MCP tools (issue 16 §4) against a real MCP server built on the SDK's server side
 * (test/fixtures/mcp/server.mjs), over stdio as a child process and over streamable HTTP on
 * 127.0.0.1; no part of the client side is replaced.
 */

const SERVER = fileURLToPath(new URL('../../fixtures/mcp/server.mjs', import.meta.url));
const stdio = (mode = 'normal', extra: Partial<McpServerSpec> = {}): McpServerSpec => ({ command: process.execPath, args: [SERVER, 'stdio', mode], ...extra });

const children: ChildProcess[] = [];
afterEach(() => {
  for (const child of children.splice(0)) child.kill('SIGKILL');
});

/** The HTTP server as its own process; resolves with its URL once it listens. */
async function httpServer(): Promise<{ url: string; child: ChildProcess }> {
  const child = spawn(process.execPath, [SERVER, 'http'], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  const port = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /port (\d+)/.exec(out);
      if (match?.[1]) resolve(match[1]);
    });
    child.on('exit', (code) => reject(new Error(`the HTTP MCP server exited with ${String(code)}`)));
  });
  return { url: `http://127.0.0.1:${port}/mcp`, child };
}

/** The scripted model, with the tool specs of every request kept (what the model is shown). */
function recording(agents: Record<string, Script>): { provider: Provider; scripted: ScriptedProvider; specs: Map<string, readonly ToolSpec[]> } {
  const scripted = new ScriptedProvider({ agents });
  const specs = new Map<string, readonly ToolSpec[]>();
  const provider: Provider = {
    name: 'recording',
    stream(request: ModelRequest, sink: StreamSink) {
      specs.set(request.agent.id, request.tools);
      return scripted.stream(request, sink);
    },
  };
  return { provider, scripted, specs };
}

const results = (messages: readonly Message[]) => toolResults(messages).map((r) => ({ content: r.content, is_error: r.is_error === true }));

describe('MCP tools over stdio', () => {
  it('offers the server’s tools to every agent of the tree, renders each kind of result, and reaps the server when the run ends', async () => {
    const { provider, specs } = recording({
      root: [
        {
          calls: [
            { name: 'mcp__test_server__echo', input: { text: 'hi' } },
            { name: 'mcp__test_server__add', input: { a: 2, b: 3 } },
            { name: 'mcp__test_server__media', input: {} },
            { name: 'mcp__test_server__fail', input: {} },
            { name: 'mcp__test_server__big', input: {} },
            { name: 'mcp__test_server__pid', input: {} },
            { name: 'mcp__test_server__echo', input: { text: 42 } },
            { name: 'mcp__test_server__echo', input: ['not', 'an', 'object'] as unknown as Record<string, unknown> },
            { name: 'agent', input: { name: 'helper', task: 'echo something' } },
          ],
        },
        { text: 'waiting' },
        { text: 'done' },
      ],
      helper: (request, index) =>
        index === 0
          ? { calls: [{ name: 'mcp__test_server__echo', input: { text: 'from the helper' } }] }
          : { calls: [{ name: 'reply', input: { result: JSON.stringify(toolResults(request.messages)) } }] },
    });
    const run = await runAgent('use the tools', { provider, toolOutputCap: 1_000, mcp: [stdio()] });
    expect(run.state).toBe('readyForUser');
    const [echo, add, media, fail, big, pid, echoNumber, notObject] = results(run.snapshot.context.messages);
    expect(echo).toEqual({ content: 'echo: hi', is_error: false });
    // structuredContent alone is rendered as JSON by the shared renderer.
    expect(add).toEqual({ content: '{\n  "sum": 5\n}', is_error: false });
    expect(media?.content).toBe(
      [
        '[image: image/png, 3000 bytes, not shown]',
        '[audio: audio/wav, 30 bytes, not shown]',
        '[resource file:///notes.txt]\nthe notes',
        '[resource file:///blob.bin: application/octet-stream, 10 bytes, not shown]',
        '[resource link: elsewhere file:///elsewhere.md]',
      ].join('\n\n'),
    );
    // The server's own error, lines kept.
    expect(fail).toEqual({ content: 'quota exceeded\nline two of the report', is_error: true });
    expect(big?.content.length).toBeLessThanOrEqual(1_000);
    expect(big?.content).toMatch(/^B+\n\n\[… 199\d{3} characters elided by exarch …\]\n\nE+$/);
    // The server takes what its schema does not say (its input is passed through), an array is refused before it.
    expect(echoNumber).toEqual({ content: 'echo: 42', is_error: false });
    expect(notObject).toEqual({ content: "invalid input for tool 'mcp__test_server__echo': (input): expected an object", is_error: true });
    // The sub-agent was offered the same tools, and its call reached the same server.
    expect(specs.get('root/helper')?.map((s) => s.name)).toContain('mcp__test_server__echo');
    expect(run.text).toBe('done');
    const inbox = run.snapshot.context.messages.at(-2);
    expect(JSON.stringify(inbox)).toContain('echo: from the helper');
    // The schema the model is shown is the server's.
    expect(specs.get('root')?.find((s) => s.name === 'mcp__test_server__add')).toEqual({
      name: 'mcp__test_server__add',
      description: "Adds two numbers; answers with structured content only.\n\n(Tool 'add' of the MCP server 'test_server'.)",
      input_schema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
    });
    const serverPid = Number(pid?.content);
    expect(serverPid).toBeGreaterThan(0);
    expect(serverPid).not.toBe(process.pid);
    expect(alive(serverPid)).toBe(false);
  });

  it('names every tool within ^[a-zA-Z0-9_-]{1,64}$, tells apart names that clean up alike, and bounds a deep schema', async () => {
    const toolset = await connectMcpServers([stdio(), stdio()]);
    try {
      const names = toolset.tools.map((tool) => tool.name);
      expect(new Set(names).size).toBe(names.length);
      for (const name of names) expect(name).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
      // Two servers that call themselves the same are told apart.
      expect(toolset.servers.map((s) => s.name)).toEqual(['test_server', 'test_server_2']);
      const first = toolset.servers[0]?.tools ?? [];
      expect(first).toContain('mcp__test_server__a_b');
      expect(first.filter((n) => n.startsWith('mcp__test_server__a_b'))).toHaveLength(2);
      expect(first.filter((n) => n.startsWith('mcp__test_server__long_xxx'))).toHaveLength(1);
      expect(first.find((n) => n.startsWith('mcp__test_server__long_'))).toHaveLength(64);
      const deep = toolset.tools.find((t) => t.name === 'mcp__test_server__deep');
      expect(deep?.spec.input_schema).toEqual({ type: 'object', additionalProperties: true });
      expect(toolset.warnings).toContain('MCP tool mcp__test_server__deep: its input schema nests deeper than 32 levels; it is offered as taking any object');
      // The same servers give the same names on every run: a durable resume depends on it.
      const again = await connectMcpServers([stdio()]);
      expect(again.servers[0]?.tools).toEqual(first);
      await again.close();
    } finally {
      await toolset.close();
    }
    for (const server of toolset.servers) expect(alive(server.pid ?? 0)).toBe(false);
  });

  it('a host tool of the same name keeps it; the server’s tool gets another', async () => {
    const toolset = await connectMcpServers([stdio()], { takenNames: ['mcp__test_server__echo'] });
    await toolset.close();
    const echo = toolset.servers[0]?.tools.find((n) => n.startsWith('mcp__test_server__echo'));
    expect(echo).toMatch(/^mcp__test_server__echo_[0-9a-f]{8}$/);
  });

  it('a server that crashes mid-call gives an is_error result naming it, later calls too, and the run carries on', async () => {
    const { provider } = recording({
      root: [
        { calls: [{ name: 'mcp__flaky__crash', input: {} }] },
        { calls: [{ name: 'mcp__flaky__echo', input: { text: 'anyone?' } }] },
        { text: 'carried on' },
      ],
    });
    const run = await runAgent('crash it', { provider, mcp: [stdio('normal', { name: 'flaky' })] });
    expect(run.text).toBe('carried on');
    expect(results(run.snapshot.context.messages)).toEqual([
      {
        content: "tool 'mcp__flaky__crash' failed: MCP server 'flaky' stopped during the call: the process exited (its last words: boom: crashing on purpose)",
        is_error: true,
      },
      {
        content: "tool 'mcp__flaky__echo' failed: MCP server 'flaky' is not running: the process exited (its last words: boom: crashing on purpose)",
        is_error: true,
      },
    ]);
  });

  it('a server that hangs: the call times out as an is_error result, the run ends and the server is gone', async () => {
    const { provider } = recording({
      root: [
        {
          calls: [
            { name: 'mcp__test_server__pid', input: {} },
            { name: 'mcp__test_server__hang', input: {} },
          ],
        },
        { text: 'gave up waiting' },
      ],
    });
    const run = await runAgent('wait for it', { provider, mcp: [stdio('normal', { timeoutMs: 300 })] });
    expect(run.text).toBe('gave up waiting');
    const [pid, hang] = results(run.snapshot.context.messages);
    expect(hang).toEqual({ content: "tool 'mcp__test_server__hang' timed out after 300 ms", is_error: true });
    expect(alive(Number(pid?.content))).toBe(false);
  });

  it('cancelling the run while a call hangs ends it, and the server with it', async () => {
    const abort = new AbortController();
    const { provider } = recording({
      root: [{ calls: [{ name: 'mcp__test_server__pid', input: {} }] }, { calls: [{ name: 'mcp__test_server__hang', input: {} }] }, { text: 'never' }],
    });
    const marker = `cancel-${process.pid}-${Date.now()}`;
    let started = false;
    const run = runAgent(
      'wait forever',
      { provider, mcp: [{ command: process.execPath, args: [SERVER, 'stdio', 'normal', marker] }] },
      {
        signal: abort.signal,
        inspect: (event) => {
          // The second batch (the hang) has started: cancel from outside, as Ctrl-C would.
          if (event.type === '@xstate.snapshot' && 'value' in event.snapshot && event.snapshot.value === 'dispatchingBatch' && !started) {
            const messages = (event.snapshot as { context?: { messages?: readonly Message[] } }).context?.messages ?? [];
            if (messages.length >= 3) {
              started = true;
              setTimeout(() => abort.abort(), 50);
            }
          }
        },
      },
    );
    const result = await run;
    expect(result.state).toBe('cancelled');
    expect(processesWith(marker)).toEqual([]);
  });
});

describe('MCP servers that do not start', () => {
  it('a server that exits at start fails the run with one line naming it and quoting its last words', async () => {
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'never asked' }] } });
    const error = await runAgent('x', { provider, mcp: [stdio('crash-at-start', { name: 'cfg' })] }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(McpServerError);
    expect((error as McpServerError).kind).toBe('start');
    expect((error as Error).message).toMatch(/^MCP server 'cfg' could not start: .*Connection closed \(its last words: fatal: no configuration found\)$/);
    expect(provider.requests).toEqual([]);
  });

  it('a command that does not exist fails the run with one line', async () => {
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'never asked' }] } });
    await expect(runAgent('x', { provider, mcp: [{ command: 'exarch-no-such-mcp-server' }] })).rejects.toThrow(
      /^MCP server 'exarch-no-such-mcp-server' could not start: spawn exarch-no-such-mcp-server ENOENT$/,
    );
  });

  it('a server that never answers the handshake fails once its start time is up, and is ended; a server started beside it is closed too', async () => {
    const marker = `hang-start-${process.pid}-${Date.now()}`;
    const error = await connectMcpServers(
      [
        { command: process.execPath, args: [SERVER, 'stdio', 'normal', marker] },
        { command: process.execPath, args: [SERVER, 'stdio', 'hang-at-start', marker], name: 'mute' },
      ],
      // Long enough for the well-behaved server to start on a busy machine.
      { startTimeoutMs: 10_000 },
    ).catch((e: unknown) => e);
    expect((error as Error).message).toMatch(/^MCP server 'mute' could not start: MCP error -32001: Request timed out/);
    expect(processesWith(marker)).toEqual([]);
  }, 60_000);

  it('a bad entry is one line before anything starts', async () => {
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'x' }] } });
    await expect(runAgent('x', { provider, mcp: [{ url: 'ftp://example.com' }] })).rejects.toThrow(
      'mcp server url "ftp://example.com" must be http:// or https://',
    );
    await expect(runAgent('x', { provider, mcp: [{ command: '' }] })).rejects.toThrow(
      'an mcp server needs a non-empty `command` (stdio) or a `url` (streamable HTTP)',
    );
  });
});

describe('MCP tools over streamable HTTP (127.0.0.1)', () => {
  it('calls the server’s tools; when the server dies, calls are is_error results naming it and the run ends', async () => {
    const server = await httpServer();
    const { provider } = recording({
      root: (_request, index) => {
        if (index === 0)
          return {
            calls: [
              { name: 'mcp__web__echo', input: { text: 'over http' } },
              { name: 'mcp__web__add', input: { a: 1, b: 1 } },
              { name: 'mcp__web__fail', input: {} },
            ],
          };
        if (index > 1) return { text: 'done' };
        server.child.kill('SIGKILL');
        return { delayMs: 100, calls: [{ name: 'mcp__web__echo', input: { text: 'still there?' } }] };
      },
    });
    const run = await runAgent('use http', { provider, mcp: [{ url: server.url, name: 'web', headers: { 'x-test': '1' } }] });
    expect(run.text).toBe('done');
    const [echo, add, fail, dead] = results(run.snapshot.context.messages);
    expect(echo).toEqual({ content: 'echo: over http', is_error: false });
    expect(add).toEqual({ content: '{\n  "sum": 2\n}', is_error: false });
    expect(fail).toEqual({ content: 'quota exceeded\nline two of the report', is_error: true });
    expect(dead?.is_error).toBe(true);
    expect(dead?.content).toMatch(/^tool 'mcp__web__echo' failed: MCP server 'web': .*(ECONNREFUSED|fetch failed)/);
  });

  it('takes the name the server reports when none is given', async () => {
    const server = await httpServer();
    const toolset = await connectMcpServers([{ url: server.url }]);
    await toolset.close();
    expect(toolset.servers[0]?.name).toBe('test_server');
    expect(toolset.servers[0]?.pid).toBeUndefined();
  });

  it('a URL where nothing listens fails the run with one line', async () => {
    const server = await httpServer();
    server.child.kill('SIGKILL');
    await new Promise((resolve) => server.child.once('exit', resolve));
    const provider = new ScriptedProvider({ agents: { root: [{ text: 'x' }] } });
    await expect(runAgent('x', { provider, mcp: [{ url: server.url }] })).rejects.toThrow(
      /^MCP server '127\.0\.0\.1:\d+' could not start: .*(ECONNREFUSED|fetch failed)/,
    );
  });
});

describe('MCP tools in a durable run', () => {
  it('records the offered names; a resume reconnects the servers and refuses to go on without them', async () => {
    const store = new MemoryRunStore();
    const script: Script = (request) => {
      const results = toolResults(request.messages);
      // Ids of their own: the resumed run's provider starts counting afresh.
      if (results.length === 0) return { calls: [{ id: 'toolu_hang', name: 'mcp__test_server__hang', input: {} }] };
      if (!results.some((r) => r.content.includes('echo: again')))
        return { calls: [{ id: 'toolu_again', name: 'mcp__test_server__echo', input: { text: 'again' } }] };
      return { text: 'done' };
    };
    let run: DurableRun | undefined;
    let interrupted = false;
    run = await startRun(
      'task',
      { provider: new ScriptedProvider({ agents: { root: script } }), mcp: [stdio()] },
      {
        store,
        actor: {
          inspect: (event) => {
            if (!interrupted && event.type === '@xstate.snapshot' && 'value' in event.snapshot && event.snapshot.value === 'dispatchingBatch') {
              interrupted = true;
              setTimeout(() => run?.interrupt(), 50);
            }
          },
        },
      },
    );
    expect((await run.result).status).toBe('interrupted');
    const recorded = store.getRun(run.id)?.options.tools ?? [];
    expect(recorded).toContain('mcp__test_server__echo');
    expect(recorded).toContain('mcp__test_server__hang');
    await expect(resumeRun(run.id, { provider: new ScriptedProvider({ agents: { root: script } }) }, { store })).rejects.toBeInstanceOf(RunError);
    const resumed = await resumeRun(run.id, { provider: new ScriptedProvider({ agents: { root: script } }), mcp: [stdio()] }, { store });
    if ('finished' in resumed) throw new Error('the interrupted run was not resumed');
    const result = await resumed.result;
    expect(result.reason).toBeUndefined();
    expect(result.status).toBe('done');
    expect(results(result.snapshot.context.messages).at(-1)).toEqual({ content: 'echo: again', is_error: false });
  });
});

describe('hostile servers', () => {
  it('a message past 4 MiB is refused, over stdio and over HTTP, as an is_error result naming the server', async () => {
    const server = await httpServer();
    // The echo comes in a later step: over HTTP the cap fails every call in flight on that
    // server at that moment, so in the same batch it raced the huge one.
    const { provider } = recording({
      root: [
        {
          calls: [
            { name: 'mcp__pipe__huge', input: {} },
            { name: 'mcp__web__huge', input: {} },
          ],
        },
        { calls: [{ name: 'mcp__web__echo', input: { text: 'still fine' } }] },
        { text: 'survived' },
      ],
    });
    const run = await runAgent('flood', { provider, toolTimeoutMs: 20_000, mcp: [stdio('normal', { name: 'pipe' }), { url: server.url, name: 'web' }] });
    expect(run.text).toBe('survived');
    const [pipe, web, echo] = results(run.snapshot.context.messages);
    expect(pipe?.is_error).toBe(true);
    expect(pipe?.content).toMatch(/^tool 'mcp__pipe__huge' failed: MCP server 'pipe' sent a message over the 4 MiB cap \(4194304 bytes\)/);
    expect(web?.is_error).toBe(true);
    expect(web?.content).toMatch(/^tool 'mcp__web__huge' failed: MCP server 'web' sent a message over the 4 MiB cap \(4194304 bytes\)/);
    expect(echo).toEqual({ content: 'echo: still fine', is_error: false });
  });
});

describe('--mcp values', () => {
  it('splits a command line as a shell would, without expanding anything', () => {
    expect(parseMcpFlag(`node "my server.js" --root 'a b' c\\ d $HOME *`)).toEqual({
      command: 'node',
      args: ['my server.js', '--root', 'a b', 'c d', '$HOME', '*'],
    });
    expect(parseMcpFlag(`prog "say \\"hi\\"" ''`)).toEqual({ command: 'prog', args: ['say "hi"', ''] });
    expect(parseMcpFlag(' https://example.com/mcp ')).toEqual({ url: 'https://example.com/mcp' });
    expect(() => parseMcpFlag('node "unclosed')).toThrow('--mcp value has an unclosed " quote: node "unclosed');
    expect(() => parseMcpFlag('http://')).toThrow('mcp server url "http://" is not a URL');
  });
});
