import { describe, expect, it } from 'vitest';
import type { ReceivedRequest } from '../../support/anthropicServer.js';
import { call, exarch, lastUserText, serve, stream } from '../../support/cliHarness.js';

/**
 * Issue 15 end to end: the real CLI and the real SDK against the loopback SSE server. A three-level
 * tree whose leaves finish about 100 ms and 600 ms apart: with wait_for_agents the root and the lead
 * each make exactly 2 requests (delegate, then answer), as the synchronous designs do.
 */

/** A reply streamed slowly: `ms` of streaming before the reply call is complete. */
const slowReply = (result: string, ms: number) => stream({ toolCalls: [call('reply', { result })], chunkSize: 4 }, { chunkDelayMs: Math.round(ms / 12) });
const requestsOf = (requests: readonly ReceivedRequest[], agent: string) => requests.filter((r) => r.agent === agent);

describe('wait_for_agents through the real CLI', () => {
  it('a three-level fan-out with waits takes 2 requests per waiting agent, each hearing every result once', async () => {
    const server = await serve({
      root: [
        stream({
          toolCalls: [
            call('agent', { name: 'lead', task: 'lead the work' }),
            call('agent', { name: 'solo', task: 'check one thing' }),
            call('wait_for_agents', {}),
          ],
        }),
        (request) => stream({ text: `Final. Heard:\n${lastUserText(request)}` }),
      ],
      lead: [
        stream({
          toolCalls: [call('agent', { name: 'x', task: 'part x' }), call('agent', { name: 'y', task: 'part y' }), call('wait_for_agents', { until: 'all' })],
        }),
        stream({ toolCalls: [call('reply', { result: 'x and y are done' })] }),
      ],
      solo: [slowReply('solo result', 100)],
      x: [slowReply('x result', 100)],
      y: [slowReply('y result', 600)],
    });
    const run = await exarch(['run', '--no-store', 'go'], { server });
    expect(run.stderr).not.toMatch(/failed|error/i);
    expect(run.code).toBe(0);
    expect(requestsOf(server.requests, 'root')).toHaveLength(2);
    expect(requestsOf(server.requests, 'lead')).toHaveLength(2);
    expect(server.pairingViolations).toEqual([]);
    const heard = run.stdout;
    expect(heard).toContain('[result ok: "2 sub-agents finished; their results follow."]');
    // Each result once, in the CONTRACT §4 format.
    expect(heard.match(/\[agent 'lead' replied\]\nx and y are done/g)).toHaveLength(1);
    expect(heard.match(/\[agent 'solo' replied\]\nsolo result/g)).toHaveLength(1);
    const leadSecond = lastUserText(requestsOf(server.requests, 'lead')[1] as ReceivedRequest);
    expect(leadSecond).toContain('[result ok: "2 sub-agents finished; their results follow."]');
    expect(leadSecond.indexOf("[agent 'x' replied]\nx result")).toBeLessThan(leadSecond.indexOf("[agent 'y' replied]\ny result"));
  });

  it('--wake all: a root that ended its turn is woken once, after the last of its sub-agents', async () => {
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'a', task: 'a' }), call('agent', { name: 'b', task: 'b' })] }),
        stream({ text: 'waiting for a and b' }),
        (request) => stream({ text: `Heard:\n${lastUserText(request)}` }),
      ],
      a: [slowReply('from a', 100)],
      b: [slowReply('from b', 600)],
    });
    const run = await exarch(['run', '--no-store', '--wake', 'all', 'go'], { server });
    expect(run.code).toBe(0);
    expect(requestsOf(server.requests, 'root')).toHaveLength(3);
    expect(run.stdout).toBe("Heard:\n[agent 'a' replied]\nfrom a\n\n[agent 'b' replied]\nfrom b\n");
  });

  it('--wake with another value is one line and exit 2', async () => {
    const run = await exarch(['run', '--no-store', '--wake', 'sometimes', 'go'], { server: await serve({}) });
    expect(run.code).toBe(2);
    expect(run.stderr.split('\n')[0]).toBe("exarch: --wake must be each or all, got 'sometimes'");
  });
});
