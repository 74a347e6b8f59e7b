import { spawn } from 'node:child_process';
import { existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer } from '../../support/anthropicServer.js';
import { call, exarch, lastUserText, MAIN, onCleanup, serve, stream, workdir, type CliRun } from '../../support/cliHarness.js';

/** `exarch run` with declared agents: `--agents FILE`, or exarch.config.json in the working directory. */

const researcher = {
  description: 'Finds sources for a topic.',
  system: "You are sub-agent 'scout', a researcher.",
  tools: ['read_file'],
  model: 'claude-research',
  maxSteps: 4,
  reply: { type: 'object', properties: { topic: { type: 'string' }, pages: { type: 'integer', minimum: 1 } }, required: ['topic', 'pages'] },
};

describe('exarch run --agents', () => {
  it('runs declared agents from exarch.config.json: the profile reaches the request, an invalid reply is corrected', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'exarch.config.json'), JSON.stringify({ agents: { researcher } }));
    writeFileSync(join(cwd, 'notes.md'), 'hello\n');
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'scout', task: 'read notes.md', type: 'researcher' })] }),
        stream({ text: 'waiting' }),
        stream({ text: 'The scout read 1 page.' }),
      ],
      scout: [
        stream({ toolCalls: [call('read_file', { path: 'notes.md' })] }),
        stream({ toolCalls: [call('reply', { topic: 'notes', pages: 0 })] }),
        stream({ toolCalls: [call('reply', { topic: 'notes', pages: 1 })] }),
      ],
    });
    const run = await exarch(['run', '--no-store', 'Summarise notes.md'], { server, cwd });
    expect(run.stderr).not.toMatch(/failed/);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('The scout read 1 page.\n');
    const scout = server.requests.filter((r) => r.agent === 'scout').map((r) => r.body);
    expect(scout.map((b) => b.model)).toEqual(['claude-research', 'claude-research', 'claude-research']);
    expect(scout[0]?.tools?.map((t) => t.name)).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply', 'read_file']);
    expect(scout[0]?.tools?.find((t) => t.name === 'reply')?.input_schema).toMatchObject({
      type: 'object',
      properties: { topic: { type: 'string' }, pages: { type: 'integer', minimum: 1 } },
      required: ['topic', 'pages'],
    });
    const refused = scout[2]?.messages.at(-1)?.content;
    expect(JSON.stringify(refused)).toMatch(/invalid input for tool 'reply': pages: /);
    const rootLast = server.requests
      .filter((r) => r.agent === 'root')
      .at(-1)
      ?.body.messages.at(-1)?.content;
    expect(JSON.stringify(rootLast)).toContain(String.raw`[agent 'scout' replied]\n{\n  \"topic\": \"notes\",\n  \"pages\": 1\n}`);
  });

  const bad: [string, string, string, RegExp][] = [
    ['a missing file', '--agents=missing.json', '', /^exarch: cannot read missing\.json: no such file$/],
    [
      'a TypeScript config',
      '--agents=exarch.config.ts',
      'export default {}',
      /^exarch: exarch\.config\.ts: only a JSON config is supported \(a \.ts or \.js config is not\); write the agents as JSON, e\.g\. exarch\.config\.json$/,
    ],
    ['bad JSON', '--agents=agents.json', '{ "agents": ', /^exarch: agents\.json is not valid JSON: it ends too soon$/],
    [
      'an unknown field',
      '--agents=agents.json',
      JSON.stringify({ agents: { r: { description: 'd', prompt: 'x' } } }),
      /^exarch: agents\.json: agents\.r has a field it may not: "prompt" \(expected /,
    ],
    [
      'a tool the run does not allow',
      '--agents=agents.json',
      JSON.stringify({ agents: { w: { description: 'd', tools: ['write_file'] } } }),
      /^exarch: agents\.json: agents\.w\.tools lists 'write_file', which is not one of the run's tools \(.*read_file.*\); --allow-write, --allow-shell and --mcp offer more$/,
    ],
    [
      'a reply schema that is not an object',
      '--agents=agents.json',
      JSON.stringify({ agents: { r: { description: 'd', reply: { type: 'string' } } } }),
      /^exarch: agents\.json: agents\.r\.reply must be a JSON Schema of type "object"$/,
    ],
  ];
  for (const [what, flag, content, line] of bad) {
    it(`${what}: one line, exit 1, no request made and no run recorded`, async () => {
      const cwd = workdir();
      const file = flag.slice('--agents='.length);
      if (content !== '') writeFileSync(join(cwd, file), content);
      const server = await serve({});
      const run = await exarch(['run', '--agents', file, 'task'], { server, cwd });
      expect(run.code).toBe(1);
      expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(run.stderr.trimEnd()).toMatch(line);
      expect(run.stdout).toBe('');
      expect(server.requests).toHaveLength(0);
      expect(existsSync(join(cwd, '.exarch', 'exarch.db'))).toBe(false);
    });
  }

  it('--agents is refused by commands that do not run agents', async () => {
    const run = await exarch(['runs', '--agents', 'a.json']);
    expect(run.code).toBe(2);
    expect(run.stderr.split('\n')[0]).toBe('exarch: --agents is not an option of runs');
  });

  it('a durable run records the agents it was started with: resume rebuilds them without the file', async () => {
    const cwd = workdir();
    writeFileSync(
      join(cwd, 'agents.json'),
      JSON.stringify({ agents: { lister: { description: 'Lists files.', tools: ['list_dir'], model: 'claude-lister' } } }),
    );
    const server = await startAnthropicServer(
      historyHandler({
        root: [
          stream({ toolCalls: [call('agent', { name: 'worker', task: 'List the files.', type: 'lister' })] }),
          stream({ text: 'Waiting.' }),
          (r) => stream({ text: `Heard:\n${lastUserText(r)}` }),
        ],
        worker: [
          stream({ toolCalls: [call('list_dir', { path: '.' })] }, { chunkDelayMs: 300 }),
          stream({ toolCalls: [call('reply', { result: 'one file' })] }),
        ],
      }),
    );
    onCleanup(() => server.close());
    const child = spawn(process.execPath, [MAIN, 'run', '--agents', 'agents.json', 'go'], {
      cwd,
      env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise<CliRun>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout: '', stderr })));
    // Ctrl-C while the worker's first (slow) response streams.
    while (!server.requests.some((r) => r.agent === 'worker')) await new Promise((resolve) => setTimeout(resolve, 10));
    child.kill('SIGINT');
    const first = await closed;
    expect(first.code).toBe(130);
    const id = /^exarch: run (\S+) started$/m.exec(first.stderr)?.[1] ?? '';
    rmSync(join(cwd, 'agents.json'));
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toBe("Heard:\n[agent 'worker' replied]\none file\n");
    const worker = server.requests.filter((r) => r.agent === 'worker').map((r) => r.body);
    expect(worker.length).toBeGreaterThanOrEqual(2);
    for (const body of worker) {
      expect(body.model).toBe('claude-lister');
      expect(body.tools?.map((t) => t.name)).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply', 'list_dir']);
    }
  });
});
