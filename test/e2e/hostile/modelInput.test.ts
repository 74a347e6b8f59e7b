import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { httpError, responseEvents, type ReceivedRequest, type SseEvent } from '../../support/anthropicServer.js';
import { call, exarch, lastUserText, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 13, holes 4, 10, 11 and 12: what a model (or the server in front of it) sends is hostile.
 * The real CLI and SDK against the loopback SSE server.
 */

/** A response whose one tool call streams `json` verbatim as its input (valid or not). */
function rawToolCall(name: string, json: string): SseEvent[] {
  const events = responseEvents({ toolCalls: [{ id: 'toolu_raw', name, input: {} }] });
  const out: SseEvent[] = [];
  for (const event of events) {
    const data = event.data as { type: string; delta?: { type: string } };
    if (data.type === 'content_block_delta' && data.delta?.type === 'input_json_delta') {
      if (out.some((e) => (e.data as { delta?: { partial_json?: string } }).delta?.partial_json === json)) continue;
      out.push({ event: 'content_block_delta', data: { type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: json } } });
      continue;
    }
    out.push(event);
  }
  return out;
}

/** Every log line of a run parses as JSON; returns the records of the root's log. */
function logRecords(logDir: string): Record<string, unknown>[] {
  let root: Record<string, unknown>[] = [];
  for (const file of readdirSync(logDir)) {
    const lines = readFileSync(join(logDir, file), 'utf8').trim().split('\n');
    const records = lines.map((line) => JSON.parse(line) as Record<string, unknown>);
    if (file === 'root.jsonl') root = records;
  }
  return root;
}

const LONE = /\\ud[89ab][0-9a-f]{2}(?!\\ud[c-f])|(?<!\\ud[89ab][0-9a-f]{2})\\ud[c-f][0-9a-f]{2}/i;
/** The request bodies as sent on the wire hold no lone surrogate, escaped or raw. */
function loneSurrogatesIn(requests: readonly ReceivedRequest[]): string[] {
  return requests
    .map((r) => JSON.stringify(r.body))
    .filter((body) => LONE.test(body) || /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(body));
}

describe('tool inputs the tools cannot take', () => {
  it.each([
    [
      'malformed JSON',
      '{"path": "a.md",,}',
      /^tool call 'read_file' was not executed: its input was not valid JSON \(.+\)\. Send it again with a valid input\.$/,
    ],
    ['a JSON array', '["a.md"]', /^tool call 'read_file' was not executed: its input was not a JSON object\./],
    [
      '20,000 nested arrays',
      `{"path": ${'['.repeat(20_000)}${']'.repeat(20_000)}}`,
      /^tool call 'read_file' was not executed: its input is nested more than 64 levels deep\./,
    ],
  ])('%s: answered with an error naming the problem; the session goes on and every log line is JSON', async (_what, json, message) => {
    const logDir = join(workdir(), 'logs');
    let toldModel = '';
    const server = await serve({
      root: [
        { kind: 'stream', events: rawToolCall('read_file', json) },
        (request) => {
          toldModel = lastUserText(request);
          return stream({ text: 'understood' });
        },
      ],
    });
    const run = await exarch(['run', '--no-store', '--log-dir', logDir, 'go'], { server });
    expect(run.stderr).not.toMatch(/Maximum call stack|RangeError|\n\s+at /);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('understood\n');
    const result = /^\[result error: "(.*)"\]$/.exec(toldModel)?.[1];
    expect(JSON.parse(`"${result ?? ''}"`)).toMatch(message);
    expect(logRecords(logDir).at(-1)).toMatchObject({ type: 'stopped' });
  });

  it('a child sending a 20,000-deep input does not crash the tree', async () => {
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'deep', task: 'x' }), call('wait_for_agents', {})] }),
        (request) => stream({ text: lastUserText(request) }),
      ],
      deep: [
        { kind: 'stream', events: rawToolCall('read_file', `{"path": ${'['.repeat(20_000)}${']'.repeat(20_000)}}`) },
        stream({ toolCalls: [call('reply', { result: 'still here' })] }),
      ],
    });
    const run = await exarch(['run', '--no-store', 'go'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain("[agent 'deep' replied]\nstill here");
  });
});

describe('lone surrogates never reach a request', () => {
  it('a tool result and a sub-agent reply holding \\ud800 go out as U+FFFD', async () => {
    const cwd = workdir();
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'kid', task: 'x' }), call('wait_for_agents', {})] }),
        (request) => stream({ text: `heard: ${lastUserText(request).slice(-40)}` }),
      ],
      // The reply's payload and the text around it carry lone surrogates (JSON escapes, as a model can emit).
      kid: [{ kind: 'stream', events: rawToolCall('reply', '{"result": "half \\ud800 of a pair \\udc00"}') }],
    });
    const run = await exarch(['run', '--no-store', 'go'], { server, cwd });
    expect(run.code).toBe(0);
    expect(loneSurrogatesIn(server.requests)).toEqual([]);
    const rootSecond = server.requests.filter((r) => r.agent === 'root')[1];
    expect(JSON.stringify(rootSecond?.body)).toContain('half \uFFFD of a pair \uFFFD');
  });
});

describe('what the server does wrong, said as it is', () => {
  it('retry-after: 3600 on a 429 ends the request at once with "rate limited: the server asked to wait 3600 s"', async () => {
    const server = await serve({ root: [httpError(429, 'rate_limit_error', 'slow down', { 'retry-after': '3600', 'retry-after-ms': '' })] });
    const started = Date.now();
    const run = await exarch(['run', '--no-store', 'go'], { server });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/rate limited: the server asked to wait 3600 s/);
    // One request: it was not retried (an hour's wait would not end this test at all).
    expect(server.requests).toHaveLength(1);
    expect(Date.now() - started).toBeLessThan(20_000);
  });

  it('a short retry-after is still honoured and the run succeeds', async () => {
    const server = await serve({
      root: [httpError(429, 'rate_limit_error', 'slow down', { 'retry-after': '1', 'retry-after-ms': '' }), stream({ text: 'done after waiting' })],
    });
    const run = await exarch(['run', '--no-store', 'go'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('done after waiting\n');
    expect(server.requests).toHaveLength(2);
  });

  it('--max-retry-wait lowers the cap', async () => {
    const server = await serve({ root: [httpError(429, 'rate_limit_error', 'slow down', { 'retry-after': '5', 'retry-after-ms': '' })] });
    const run = await exarch(['run', '--no-store', '--max-retry-wait', '2', 'go'], { server });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/rate limited: the server asked to wait 5 s/);
  });

  it('a delta for a block that never started is reported as a broken stream, not a lost connection', async () => {
    const events = responseEvents({ text: 'hello' });
    const broken = [
      ...events.slice(0, 1),
      { event: 'content_block_delta', data: { type: 'content_block_delta', index: 7, delta: { type: 'text_delta', text: 'x' } } },
      ...events.slice(1),
    ];
    const server = await serve({ root: Array.from({ length: 6 }, () => ({ kind: 'stream' as const, events: broken })) });
    const run = await exarch(['run', '--no-store', 'go'], { server, env: { EXARCH_STALL_TIMEOUT_MS: '2000' } });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/the server's stream broke the protocol/);
    expect(run.stderr).not.toMatch(/connection lost/);
  });
});
