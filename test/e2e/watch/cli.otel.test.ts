import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, exarch, freePort, serve, stream, workdir } from '../../support/cliHarness.js';
import { CLIENT, collector, INTERNAL, STATUS_ERROR, type Received } from '../../support/otlpCollector.js';

/**
 * Issue 19.2: `exarch run --otel` as a black box. The compiled command sends its spans with the real
 * OTLP/HTTP exporter to a collector the test runs (support/otlpCollector.ts).
 */

const threeLevels = {
  root: [
    stream({
      toolCalls: [
        { id: 'toolu_root_spawn', name: 'agent', input: { name: 'researcher', task: 'Find the cause.' } },
        { id: 'toolu_root_wait', name: 'wait_for_agents', input: {} },
      ],
      usage: { input_tokens: 100, output_tokens: 30, cache_read_input_tokens: 400, cache_creation_input_tokens: 20 },
    }),
    stream({ text: 'The cause is the cookie.' }),
  ],
  researcher: [
    stream({
      toolCalls: [
        { id: 'toolu_res_spawn', name: 'agent', input: { name: 'reader', task: 'Read notes.md' } },
        { id: 'toolu_res_wait', name: 'wait_for_agents', input: {} },
      ],
    }),
    stream({ toolCalls: [{ id: 'toolu_res_reply', name: 'reply', input: { result: 'the cookie' } }] }),
  ],
  reader: [
    stream({
      toolCalls: [
        { id: 'toolu_read_ok', name: 'read_file', input: { path: 'notes.md' } },
        { id: 'toolu_read_missing', name: 'read_file', input: { path: 'missing.md' } },
      ],
    }),
    stream({ toolCalls: [call('reply', { result: 'notes.md: cookie' })] }),
  ],
};

describe('exarch run --otel', () => {
  it('sends the three-level run to the collector: the span tree, names, kinds and gen_ai attributes', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'notes.md'), 'the session cookie is not renewed\n');
    const server = await serve(threeLevels);
    const otlp = await collector();
    const run = await exarch(['run', '--otel', 'Why do logins fail?'], {
      server,
      cwd,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SERVICE_NAME: 'login-triage' },
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('The cause is the cookie.\n');
    expect(otlp.posts.every((p) => p.path === '/v1/traces' && p.contentType === 'application/json')).toBe(true);
    expect(otlp.serviceNames[0]).toBe('login-triage');
    const { spans } = otlp;
    expect(run.stderr).toContain(`exarch: --otel: ${spans.length} spans sent to ${otlp.url}/v1/traces`);

    const byId = new Map(spans.map((s) => [s.id, s]));
    const parentName = (s: Received): string | undefined => (s.parent === undefined ? undefined : byId.get(s.parent)?.name);
    const root = spans.find((s) => s.name === 'invoke_agent root');
    const researcher = spans.find((s) => s.name === 'invoke_agent researcher');
    const reader = spans.find((s) => s.name === 'invoke_agent reader');
    expect(root?.parent).toBeUndefined();
    expect(parentName(researcher as Received)).toBe('invoke_agent root');
    expect(parentName(reader as Received)).toBe('invoke_agent researcher');
    expect(new Set(spans.map((s) => s.trace)).size).toBe(1);
    for (const agent of [root, researcher, reader]) {
      expect(agent?.kind).toBe(INTERNAL);
      expect(agent?.attributes).toMatchObject({ 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.provider.name': 'anthropic' });
    }
    expect(reader?.attributes['gen_ai.agent.name']).toBe('reader');

    const chats = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    expect(chats).toHaveLength(6);
    for (const chat of chats) {
      expect(chat.name).toBe('chat claude-sonnet-5-5');
      expect(chat.kind).toBe(CLIENT);
      expect(chat.attributes).toMatchObject({ 'gen_ai.provider.name': 'anthropic', 'gen_ai.request.model': 'claude-sonnet-5-5' });
    }
    expect(chats.filter((c) => c.parent === root?.id)).toHaveLength(2);
    expect(chats.filter((c) => c.parent === reader?.id)).toHaveLength(2);
    // The server's usage: 100 fresh + 400 cache reads + 20 cache writes = 520 input tokens in the conventions' sense.
    const first = chats.find((c) => c.parent === root?.id && c.attributes['gen_ai.usage.output_tokens'] === 30);
    expect(first?.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 520,
      'gen_ai.usage.cache_read.input_tokens': 400,
      'gen_ai.usage.cache_creation.input_tokens': 20,
      'gen_ai.response.finish_reasons': ['tool_use'],
    });

    const tools = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool');
    expect(Object.fromEntries(tools.map((t) => [t.attributes['gen_ai.tool.call.id'], `${t.name} under ${parentName(t) ?? '?'}`]))).toMatchObject({
      toolu_root_spawn: 'execute_tool agent under invoke_agent root',
      toolu_root_wait: 'execute_tool wait_for_agents under invoke_agent root',
      toolu_res_spawn: 'execute_tool agent under invoke_agent researcher',
      toolu_res_reply: 'execute_tool reply under invoke_agent researcher',
      toolu_read_ok: 'execute_tool read_file under invoke_agent reader',
      toolu_read_missing: 'execute_tool read_file under invoke_agent reader',
    });
    expect(tools.every((t) => t.kind === INTERNAL && t.attributes['gen_ai.tool.name'] === t.name.slice('execute_tool '.length))).toBe(true);
    expect(tools.find((t) => t.attributes['gen_ai.tool.call.id'] === 'toolu_read_missing')?.status).toBe(STATUS_ERROR);
    expect(tools.find((t) => t.attributes['gen_ai.tool.call.id'] === 'toolu_read_ok')?.status).not.toBe(STATUS_ERROR);
    // No content without asking for it: neither the task nor the file's text left.
    expect(JSON.stringify(spans)).not.toMatch(/Why do logins fail|session cookie is not renewed/);
  });

  it('with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true the content goes too, the key never', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'notes.md'), 'the session cookie is not renewed\n');
    const server = await serve(threeLevels);
    const otlp = await collector();
    const run = await exarch(['run', '--otel', 'Why do logins fail? The key is test-key-0123456789'], {
      server,
      cwd,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true', ANTHROPIC_API_KEY: 'test-key-0123456789' },
    });
    expect(run.code).toBe(0);
    const read = otlp.spans.find((s) => s.attributes['gen_ai.tool.call.id'] === 'toolu_read_ok');
    expect(String(read?.attributes['gen_ai.tool.call.result'])).toContain('the session cookie is not renewed');
    expect(JSON.stringify(otlp.spans)).toContain('Why do logins fail?');
    expect(JSON.stringify(otlp.spans)).not.toContain('test-key-0123456789');
  });

  it('no endpoint: one line and exit 1 before any model request', async () => {
    const server = await serve(threeLevels);
    const run = await exarch(['run', '--otel', 'go'], { server });
    expect(run.code).toBe(1);
    expect(run.stderr).toBe('exarch: --otel needs OTEL_EXPORTER_OTLP_ENDPOINT: the OTLP/HTTP collector to send spans to (e.g. http://localhost:4318)\n');
    expect(run.stdout).toBe('');
    expect(server.requests).toHaveLength(0);
  });

  it('an endpoint that is not a URL, or a gRPC protocol: one line and exit 1', async () => {
    const server = await serve(threeLevels);
    const bad = await exarch(['run', '--otel', 'go'], { server, env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'localhost 4318' } });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toBe("exarch: OTEL_EXPORTER_OTLP_ENDPOINT is not a URL: 'localhost 4318' (e.g. http://localhost:4318)\n");
    const grpc = await exarch(['run', '--otel', 'go'], {
      server,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4317', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' },
    });
    expect(grpc.code).toBe(1);
    expect(grpc.stderr).toMatch(/^exarch: --otel sends OTLP over HTTP; OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not supported/);
    expect(server.requests).toHaveLength(0);
  });

  it('a collector that cannot be reached: the answer still comes, one line says the spans were not sent, and the command exits', async () => {
    const server = await serve(threeLevels);
    const cwd = workdir();
    writeFileSync(join(cwd, 'notes.md'), 'x\n');
    const port = await freePort();
    const run = await exarch(['run', '--otel', 'go'], {
      server,
      cwd,
      env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`, OTEL_EXPORTER_OTLP_TIMEOUT: '1000' },
    });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('The cause is the cookie.\n');
    const lines = run.stderr.split('\n').filter((l) => l.includes('--otel'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(new RegExp(`^exarch: --otel: \\d+ of \\d+ spans could not be sent to http://127\\.0\\.0\\.1:${port}/v1/traces: .*ECONNREFUSED`));
  });
});
