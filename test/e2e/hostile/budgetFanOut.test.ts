import { describe, expect, it } from 'vitest';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, exarch, readJsonl, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 37, hole 2, end to end: `exarch run --max-tokens N` and a root that starts many sub-agents
 * in one response (each request reporting 100 input / 50 output tokens). On 270ed4d, with 1,000
 * sub-agents and `--max-tokens 1000`, the server served 897 requests (≥ 89,700 input tokens) while
 * exarch said "3 model requests, 300 input tokens … about $0.003", and `exarch runs` showed $0.003;
 * with 200, 127 requests and a summary of 2.
 *
 * The oracle is the loopback server's own bill (the tokens its streams reported in the events it
 * wrote, the streams it began, the most open at once): what the provider served, never what exarch
 * says of itself.
 */

const WIDE = 200;
const PER_REQUEST = 150;

/** The root starts WIDE sub-agents and waits; each sub-agent replies (usage 100/50), some slower than others. */
function wideTree() {
  const children: Record<string, ReturnType<typeof stream>[]> = {};
  for (let i = 0; i < WIDE; i++) {
    children[`w${i}`] = [
      stream(
        { toolCalls: [call('reply', { result: `package ${i} is fine` })], usage: { input_tokens: 100, output_tokens: 50 } },
        { chunkDelayMs: 1 + (i % 7) },
      ),
    ];
  }
  return {
    root: [
      stream({
        toolCalls: [...Array.from({ length: WIDE }, (_, i) => call('agent', { name: `w${i}`, task: `check package ${i}` })), call('wait_for_agents', {})],
        usage: { input_tokens: 100, output_tokens: 50 },
      }),
      stream({ text: 'Summary from what came back.', usage: { input_tokens: 100, output_tokens: 50 } }),
    ],
    ...children,
  };
}

/** The summary line's `N model requests`. */
function requestsInSummary(stderr: string): number {
  const match = /, (\d[\d,]*) model requests?, /.exec(stderr);
  expect(match, `a summary line in:\n${stderr}`).not.toBeNull();
  return Number((match?.[1] ?? '').replaceAll(',', ''));
}

/** Every token and request the run's JSONL logs record, read from the files as a user would: committed responses (`usage`, with their retries' `lost`) and requests not kept (`lost`). */
function loggedSpend(logDir: string): { requests: number; tokens: number; aborted: number } {
  let requests = 0;
  let tokens = 0;
  let aborted = 0;
  const sum = (usage: unknown): number => Object.values((usage ?? {}) as Record<string, number>).reduce((a, b) => a + b, 0);
  for (const file of readdirSync(logDir)) {
    for (const record of readJsonl(join(logDir, file))) {
      if (record['type'] === 'usage') {
        requests += typeof record['requests'] === 'number' ? record['requests'] : 1;
        tokens += sum(record['request']) + sum(record['lost']);
      } else if (record['type'] === 'lost') {
        requests += Number(record['requests']);
        aborted += Number(record['requests']);
        tokens += sum(record['usage']);
      }
    }
  }
  return { requests, tokens, aborted };
}

describe('a budget over a wide fan-out, through the CLI', () => {
  it(`${WIDE} sub-agents under --max-tokens 5000: the server serves within the budget and one request per stream open; the summary and exarch runs say what it served`, async () => {
    const cwd = workdir();
    const server = await serve(wideTree());
    const logDir = join(cwd, 'logs');
    const run = await exarch(['run', '--max-tokens', '5000', '--log-dir', logDir, 'check every package'], { server, cwd });
    const { billed } = server;
    console.info(
      `${WIDE}-wide fan-out under --max-tokens 5000: ${server.requests.length} requests, ${billed.tokens} tokens billed, at most ${billed.mostOpen} streams open`,
    );
    // Before: every sub-agent asked at once (127 of 200 requests served before the budget stopped them).
    expect(billed.tokens).toBeLessThanOrEqual(5_000 + billed.mostOpen * PER_REQUEST);
    expect(server.requests.length).toBeLessThan(WIDE / 2);
    // What exarch reports is what the server served: every request, and every token its streams
    // reported before exarch stopped reading. A stream aborted when the budget was reached may have
    // had its last events (at most its 50 output tokens) written by the server after exarch closed
    // it: no client can count those.
    expect(requestsInSummary(run.stderr)).toBe(server.requests.length);
    const logged = loggedSpend(logDir);
    expect(logged.requests).toBe(server.requests.length);
    expect(logged.tokens).toBeLessThanOrEqual(billed.tokens);
    expect(billed.tokens - logged.tokens).toBeLessThanOrEqual(logged.aborted * 50);
    expect(run.stderr).toContain('exarch: the budget stopped the run');
    // `exarch runs` counts the same requests for the run.
    const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';
    const runs = await exarch(['runs'], { cwd });
    const row = runs.stdout.split('\n').find((line) => line.startsWith(id));
    expect(row, runs.stdout).toBeDefined();
    expect(row?.split(/\s{2,}/)).toContain(String(server.requests.length));
    // The root answered from what came back: the budget kept room for its final request.
    expect(server.requests.filter((r) => r.agent === 'root')).toHaveLength(2);
    expect(run.code).toBe(0);
  });

  it('--max-cost with a declared agent on a model exarch has no prices for is one usage line, and nothing is asked', async () => {
    // On 270ed4d such an agent's spend was priced at the run's model: a workspace config could pick a dearer one unseen.
    const cwd = workdir();
    writeFileSync(join(cwd, 'exarch.config.json'), JSON.stringify({ agents: { scout: { description: 'scouts', model: 'mystery-model-9' } } }));
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarch(['run', '--max-cost', '1', 'go'], { server, cwd });
    expect(run.code).toBe(2);
    const lines = run.stderr.split('\n');
    expect(lines[0]).toBe("exarch: --max-cost: no prices are known for the model 'mystery-model-9' of the declared agent 'scout'; use --max-tokens");
    // The rest is the usage text every usage error is followed by.
    expect(lines.filter((line) => line.startsWith('exarch:'))).toHaveLength(1);
    expect(server.requests).toEqual([]);
  });
});
