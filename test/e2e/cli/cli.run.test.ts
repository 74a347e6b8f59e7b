import { existsSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { httpError, responseEvents, type ReceivedRequest, type ServerPlan } from '../../support/anthropicServer.js';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';
import { call, echoInbox, exarch, lastUserText, readJsonl, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * `npx exarch run` as a black box (CONTRACT §2–§7): the compiled command, the real SDK, and a local
 * server speaking the real wire format. dist/ is built by test/globalSetup.ts.
 */

describe('exarch run', () => {
  it('prints only the root’s final answer on stdout, progress and a summary on stderr, and exits 0', async () => {
    const server = await serve({
      root: [stream({ text: 'The answer is 42.', usage: { input_tokens: 1000, output_tokens: 20, cache_read_input_tokens: 800 } })],
    });
    const run = await exarch(['run', 'What is the answer?'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('The answer is 42.\n');
    expect(run.stderr).toMatch(/root\s+streaming/);
    expect(run.stderr).toMatch(/root\s+readyForUser/);
    expect(run.stderr).toMatch(/1 agent, 1 model request, 1\.8k input tokens \(800 cache reads\), 20 output tokens, about \$\d/);
    expect(server.requests[0]?.body.model).toBe('claude-sonnet-5-5');
  });

  it('the reply contract: a sub-agent’s reply reaches the root verbatim, its prose does not', async () => {
    const brief = '# Testing setup\n\n- vitest for unit tests\n- playwright for e2e';
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'explorer', task: 'Map the testing setup.' })] }),
        stream({ text: 'Waiting for explorer.' }),
        echoInbox,
      ],
      explorer: [stream({ text: 'A sign-off nobody should see.', toolCalls: [call('reply', { result: brief })] })],
    });
    const run = await exarch(['run', 'Map it'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(`Heard:\n[agent 'explorer' replied]\n${brief}\n`);
    expect(run.stdout).not.toContain('sign-off');
    expect(server.requests.find((r) => r.agent === 'explorer')?.body.messages[0]).toMatchObject({
      role: 'user',
      content: [{ type: 'text', text: 'Map the testing setup.' }],
    });
  });

  it('the progress lines show each new agent starting at step 0, then streaming step 1: never readyForUser (turn over) before its first turn', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'explorer', task: 'Map it.' })] }), stream({ text: 'Waiting.' }), echoInbox],
      explorer: [stream({ toolCalls: [call('reply', { result: 'mapped' })] })],
    });
    const run = await exarch(['run', 'Map it'], { server });
    expect(run.code).toBe(0);
    for (const id of ['root', 'root/explorer']) {
      // `+0.1s root/explorer   starting   step 0  0 tok  0.0s`: an agent's own lines, state and step.
      const lines = run.stderr.split('\n').flatMap((line) => {
        const match = new RegExp(`^\\+[\\d.]+s ${id.replace('/', '\\/')}\\s+(\\S+)\\s+step (\\d+)`).exec(line);
        return match ? [`${match[1]} step ${match[2]}`] : [];
      });
      expect(lines.slice(0, 2)).toEqual(['starting step 0', 'streaming step 1']);
    }
  });

  it('tags: failed, empty and replied children are delivered with the contract’s tags; parallel children all arrive', async () => {
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'a', task: 'x' }), call('agent', { name: 'b', task: 'y' }), call('agent', { name: 'c', task: 'z' })] }),
        stream({ text: 'Waiting.' }),
        // Results may arrive over several turns; the root waits until all three are in.
        (r) => (/'a'[\s\S]*'b'[\s\S]*'c'|'a'[\s\S]*'c'[\s\S]*'b'/.test(JSON.stringify(r.body.messages)) ? echoAll(r) : stream({ text: 'Still waiting.' })),
        (r) => (/'a'[\s\S]*'b'[\s\S]*'c'|'a'[\s\S]*'c'[\s\S]*'b'/.test(JSON.stringify(r.body.messages)) ? echoAll(r) : stream({ text: 'Still waiting.' })),
        echoAll,
      ],
      a: [stream({ toolCalls: [call('reply', { result: { ok: true } })] })],
      b: [httpError(400, 'invalid_request_error', 'messages: bad')],
      c: [stream({ text: 'no reply' }), stream({ text: 'still no reply' })],
    });
    const run = await exarch(['run', 'fan out'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('[agent \'a\' replied]\n{\n  "ok": true\n}');
    expect(run.stdout).toContain("[agent 'b' failed: invalid_request_error: messages: bad (HTTP 400)]");
    expect(run.stdout).toContain("[agent 'c' finished with no output]");
  });

  it('--reply-cap clips a long reply by middle elision', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'w', task: 'x' })] }), stream({ text: 'Waiting.' }), echoInbox],
      w: [stream({ toolCalls: [call('reply', { result: `START${'x'.repeat(5000)}END` })] })],
    });
    const run = await exarch(['run', '--reply-cap', '300', 'go'], { server });
    const payload = run.stdout.slice(run.stdout.indexOf('replied]\n') + 9).trimEnd();
    expect(payload.length).toBeLessThanOrEqual(300);
    expect(payload).toMatch(/^START/);
    expect(payload).toMatch(/END$/);
    expect(payload).toContain('characters elided by exarch');
  });

  it('truncation: a call cut off at max_tokens is not executed, and the model is told so', async () => {
    const cwd = workdir();
    const server = await serve({
      root: [stream({ toolCalls: [call('write_file', { path: 'out.txt', content: 'a long content that is cut off' })], cutOffLastCall: true }), echoInbox],
    });
    const run = await exarch(['run', '--allow-write', 'write it'], { server, cwd });
    expect(run.code).toBe(0);
    expect(existsSync(join(cwd, 'out.txt'))).toBe(false);
    expect(run.stdout).toMatch(/\[result error: ".*cut off at max_tokens.*not executed/);
    expect(run.stdout).toMatch(/maximum output length/);
  });

  it('overload recovery: 529 before the stream and an SSE error mid-stream are both retried', async () => {
    const server = await serve({
      root: [
        httpError(529),
        { kind: 'sse_error', after: responseEvents({ text: 'lost partial' }).slice(0, 4), errorType: 'overloaded_error', message: 'Overloaded' },
        stream({ text: 'recovered' }),
      ],
    });
    const run = await exarch(['run', 'go'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('recovered\n');
    expect(server.requests).toHaveLength(3);
  });

  it('a connection dropped mid-stream and a stalled stream are both retried', async () => {
    const server = await serve({
      root: [stream({ text: 'dropped halfway' }, { dropAfter: 4 }), stream({ text: 'stalls' }, { stallAfter: 2 }), stream({ text: 'third time lucky' })],
    });
    const run = await exarch(['run', 'go'], { server, env: { EXARCH_STALL_TIMEOUT_MS: '300' } });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('third time lucky\n');
    expect(server.requests).toHaveLength(3);
  });

  it('pause_turn: the paused message goes back unchanged and the answer is the whole message', async () => {
    const server = await serve({ root: [stream({ text: 'Part one. ', stopReason: 'pause_turn' }), stream({ text: 'Part two.' })] });
    const run = await exarch(['run', 'go'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('Part one. Part two.\n');
    expect(server.requests[1]?.body.messages.at(-1)).toMatchObject({ role: 'assistant' });
  });

  it('a refusal or an exceeded context window fails the root: exit 1 with the reason', async () => {
    for (const stopReason of ['refusal', 'model_context_window_exceeded']) {
      const server = await serve({ root: [stream({ text: 'no', stopReason })] });
      const run = await exarch(['run', 'go'], { server });
      expect(run.code).toBe(1);
      expect(run.stderr).toMatch(/exarch: the root agent failed: (the model refused|the conversation exceeded the model context window)/);
    }
  });

  it('the depth gate: with --max-depth 1 a child is not offered agent, and its call is refused', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'c', task: 'x' })] }), stream({ text: 'Waiting.' }), echoInbox],
      c: [stream({ toolCalls: [call('agent', { name: 'g', task: 'y' })] }), (r) => stream({ toolCalls: [call('reply', { result: lastUserText(r) })] })],
    });
    const run = await exarch(['run', '--max-depth', '1', 'go'], { server });
    const childTools = server.requests.find((r) => r.agent === 'c')?.body.tools?.map((t) => t.name);
    expect(childTools).toEqual(expect.arrayContaining(['reply', 'read_file']));
    expect(childTools).not.toContain('agent');
    expect(run.stdout).toContain("tool 'agent' is not available to this agent");
  });

  it('invalid input and duplicate names get error results the model can read', async () => {
    const server = await serve({
      root: [
        stream({
          toolCalls: [call('agent', { name: 'bad name', task: 'x' }), call('agent', { name: 'dup', task: 'x' }), call('agent', { name: 'dup', task: 'y' })],
        }),
        echoInbox,
        stream({ text: 'done' }),
      ],
      dup: [stream({ toolCalls: [call('reply', { result: 'ok' })] })],
    });
    const run = await exarch(['run', 'go'], { server });
    const second = server.requests.filter((r) => r.agent === 'root')[1];
    const told = second ? lastUserText(second) : '';
    expect(told).toMatch(/invalid input for tool 'agent': name: must be 1–64 characters/);
    expect(told).toContain("a sub-agent named 'dup' is still running");
    expect(run.code).toBe(0);
  });

  it('authentication failure: exit 1 with one line on stderr and no stack trace', async () => {
    const server = await serve({ root: [httpError(401, 'authentication_error', 'invalid x-api-key')] });
    const run = await exarch(['run', 'go'], { server });
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain('exarch: the root agent failed: authentication_error: invalid x-api-key (HTTP 401)');
    expect(run.stderr).not.toMatch(/\n\s+at /);
  });

  it('without ANTHROPIC_API_KEY: exit 1 with a one-line error that points to exarch demo', async () => {
    const run = await exarch(['run', 'go']);
    expect(run.code).toBe(1);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(run.stderr).toMatch(/ANTHROPIC_API_KEY is not set.*exarch demo/);
  });

  it("bad usage exits 2 with one line and a pointer to run's help, not the help itself", async () => {
    for (const args of [
      ['run'],
      ['run', '--max-steps', '0', 'go'],
      ['run', '--max-depth', 'x', 'go'],
      ['run', 'two', 'tasks'],
      ['run', '--no-such-flag', 'go'],
    ]) {
      const run = await exarch(args, { env: { ANTHROPIC_API_KEY: 'k' } });
      expect(run.code, args.join(' ')).toBe(2);
      const lines = run.stderr.split('\n');
      expect(lines, args.join(' ')).toEqual([expect.stringMatching(/^exarch: /), "run 'exarch help run' for the options", '']);
    }
  });

  it('the root at its step cap: exit 3, its last text on stdout, a notice on stderr', async () => {
    const loop = (i: number) => stream({ text: `step ${i}`, toolCalls: [call('list_dir', {})] });
    const server = await serve({ root: [loop(1), loop(2)] });
    const run = await exarch(['run', '--max-steps', '2', 'go'], { server });
    expect(run.code).toBe(3);
    expect(run.stdout).toBe('step 2\n');
    expect(run.stderr).toContain('exarch: the root agent stopped at its step cap (2 model requests in one turn)');
  });

  it('agents can read files of the working directory but nothing outside it', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'notes.md'), 'the secret word is tangerine');
    const server = await serve({
      root: [stream({ toolCalls: [call('read_file', { path: 'notes.md' }), call('read_file', { path: '../../etc/passwd' })] }), echoInbox],
    });
    const run = await exarch(['run', 'read'], { server, cwd });
    expect(run.stdout).toContain('tangerine');
    expect(run.stdout).toMatch(/\[result error: .*outside/);
    const tools = server.requests[0]?.body.tools?.map((t) => t.name);
    expect(tools).not.toContain('write_file');
    expect(tools).not.toContain('run_shell');
  });

  it('writes one JSONL log per agent into --log-dir', async () => {
    const logDir = join(workdir(), 'logs');
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'c', task: 'x' })] }), stream({ text: 'Waiting.' }), echoInbox],
      c: [stream({ toolCalls: [call('reply', { result: 'r' })], usage: { input_tokens: 50, output_tokens: 5 } })],
    });
    const run = await exarch(['run', '--log-dir', logDir, 'go'], { server });
    expect(run.code).toBe(0);
    expect(readdirSync(logDir).sort()).toEqual(['root.c.jsonl', 'root.jsonl']);
    expect(readJsonl(join(logDir, 'root.c.jsonl')).at(-1)).toMatchObject({ type: 'outcome', outcome: 'replied', usage: { inputTokens: 50, outputTokens: 5 } });
    expect(run.stderr).toContain(`logs: ${logDir}`);
  });

  it('SIGINT cancels the tree, answers pending calls, flushes the logs and exits 130', async () => {
    const cwd = workdir();
    // Run as root (CI), exarch runs sandboxed commands as the working directory's owner: make it a user's.
    if (canSwitchUser) await giveToNobody(cwd);
    const logDir = join(workdir(), 'logs');
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'slow', task: 'x' }), call('run_shell', { command: 'sleep 30' })] })],
      slow: [stream({ text: 'thinking forever' }, { stallAfter: 1 })],
    });
    const run = await exarch(['run', '--allow-shell', '--log-dir', logDir, 'go'], {
      server,
      cwd,
      whenRequests: { count: 2, then: (child) => child.kill('SIGINT') },
    });
    expect(run.code).toBe(130);
    expect(run.stderr).toContain('exarch: interrupted');
    const root = readJsonl(join(logDir, 'root.jsonl'));
    const lastMessage = root.filter((r) => r.type === 'message').at(-1) as { content: { type: string; content: string; is_error?: boolean }[] };
    expect(lastMessage.content.map((b) => [b.type, b.content, b.is_error])).toEqual([
      ['tool_result', expect.stringMatching(/^Sub-agent 'slow' started/), undefined],
      ['tool_result', 'cancelled', true],
    ]);
    expect(root.at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled', reason: 'interrupted' });
    expect(readJsonl(join(logDir, 'root.slow.jsonl')).at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled' });
  });
});

function echoAll(request: ReceivedRequest): ServerPlan {
  const heard = request.body.messages
    .filter((m) => m.role === 'user')
    .map((m) => (typeof m.content === 'string' ? m.content : m.content.map((b) => (b.type === 'text' ? String(b['text']) : '')).join('\n')))
    .join('\n');
  return stream({ text: `Heard:\n${heard}` });
}

describe('exarch run: the summary', () => {
  it('shows each agent’s spend: its tokens of every kind and the estimated cost at the model’s list prices', async () => {
    // What each response reports (message_delta totals), in the test's own numbers.
    const usage = {
      root1: { input_tokens: 1200, output_tokens: 30, cache_read_input_tokens: 400, cache_creation_input_tokens: 0 },
      root2: { input_tokens: 1500, output_tokens: 12, cache_read_input_tokens: 0, cache_creation_input_tokens: 100 },
      reader: { input_tokens: 800, output_tokens: 50, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 },
    };
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'reader', task: 'Read it.' }), call('wait_for_agents', {})], usage: usage.root1 }),
        stream({ text: 'Read.', usage: usage.root2 }),
      ],
      reader: [stream({ toolCalls: [call('reply', { result: 'it says hi' })], usage: usage.reader })],
    });
    const run = await exarch(['run', '--no-store', 'Read it'], { server });
    expect(run.code, run.stderr).toBe(0);
    // claude-sonnet list prices, US$ per million tokens: input 3, output 15, cache writes 3.75, cache reads 0.30.
    type U = (typeof usage)['root1'];
    const tokens = (...us: U[]): number =>
      us.reduce((n, u) => n + u.input_tokens + u.output_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens, 0);
    const dollars = (...us: U[]): string =>
      us
        .reduce((d, u) => d + (u.input_tokens * 3 + u.output_tokens * 15 + u.cache_creation_input_tokens * 3.75 + u.cache_read_input_tokens * 0.3) / 1e6, 0)
        .toFixed(4);
    const lines = run.stderr.split('\n');
    const at = lines.indexOf('exarch: spend per agent:');
    expect(at).toBeGreaterThan(lines.findIndex((l) => /^exarch: 2 agents/.test(l)));
    expect(lines.slice(at + 1, at + 3).map((l) => l.split(/\s+/).filter(Boolean))).toEqual([
      ['root', String(tokens(usage.root1, usage.root2)), 'tokens', 'about', `$${dollars(usage.root1, usage.root2)}`],
      ['root/reader', String(tokens(usage.reader)), 'tokens', 'about', `$${dollars(usage.reader)}`],
    ]);
  });
});
