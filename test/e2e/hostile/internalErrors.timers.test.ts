import { describe, expect, it } from 'vitest';
import { DeadlineQueue } from '../../../src/engine/deadlines.js';
import { connectMcpServers, runAgent } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';
import { httpError } from '../../support/anthropicServer.js';
import { exarch, serve, stream } from '../../support/cliHarness.js';
import { expectOneLine } from '../../support/oneLine.js';

/**
 * Issue 37, "internal error text never reaches a user", durations past what a timer holds: a Node
 * timer longer than 2^31 − 1 ms does not wait, it prints a TimeoutOverflowWarning and fires after
 * 1 ms. Every duration a person gives (a flag in seconds, EXARCH_STALL_TIMEOUT_MS, the demo's
 * speed) is refused past it as a usage error naming the largest value allowed: a value that large
 * is a mistake, and a wait cut short without a word is not the one asked for. A host's option is a
 * RangeError saying the same; a tool's own time limit (not checked: a tool may wait long) is
 * waited out in steps.
 */

/** 2^31 − 1 ms, in whole seconds: the largest a flag in seconds may be. */
const MAX_SECONDS = 2_147_483;

describe('flags and variables that become timers', () => {
  it('--max-retry-wait past a timer is a usage error naming the largest; at the largest the run goes as usual', async () => {
    // A server that asks for 35 days: with the flag's promise of up to 46 days, the SDK (which does
    // not sleep past a timer either) retried within seconds instead.
    const server = await serve({ root: [httpError(429, 'rate_limit_error', 'slow down', { 'retry-after': '3000000' }), stream({ text: 'done' })] });
    const refused = await exarch(['run', '--no-store', '--max-retry-wait', '4000000', 'go'], { server });
    expect(refused.code).toBe(2);
    expectOneLine(refused.stderr, /^exarch: --max-retry-wait must be at most 2147483 seconds \(the longest a timer can wait\), got '4000000'$/);
    expect(server.requests).toHaveLength(0);
    const largest = await exarch(['run', '--no-store', '--max-retry-wait', String(MAX_SECONDS), 'go'], {
      server: await serve({ root: [stream({ text: 'done' })] }),
    });
    expect(largest.code, largest.stderr).toBe(0);
  });

  it('EXARCH_STALL_TIMEOUT_MS past a timer is one line, and no request is made', async () => {
    const server = await serve({ root: [stream({ text: 'done' })] });
    const run = await exarch(['run', '--no-store', 'go'], { server, env: { EXARCH_STALL_TIMEOUT_MS: '2147483648' } });
    expect(run.code).toBe(1);
    expectOneLine(run.stderr, /^exarch: EXARCH_STALL_TIMEOUT_MS must be a positive integer \(milliseconds\) of at most 2147483647 .*got '2147483648'$/);
    expect(server.requests).toHaveLength(0);
  });

  it('worker --drain-timeout past a timer, and --job-expiry past the queue’s day, are usage errors naming the largest', async () => {
    // Refused before anything is reached: no server listens at this URL.
    const db = 'postgres://nobody@127.0.0.1:1/none';
    const drain = await exarch(['worker', '--db', db, '--drain-timeout', String(MAX_SECONDS + 1)], { env: { ANTHROPIC_API_KEY: 'k' } });
    expect(drain.code).toBe(2);
    expectOneLine(drain.stderr, /^exarch: --drain-timeout must be at most 2147483 seconds/);
    const expiry = await exarch(['worker', '--db', db, '--job-expiry', '86400'], { env: { ANTHROPIC_API_KEY: 'k' } });
    expect(expiry.code).toBe(2);
    expectOneLine(expiry.stderr, /^exarch: --job-expiry must be at most 86399 seconds/);
  });

  it('demo --speed so slow its waits pass a timer is a usage error naming the slowest', async () => {
    const demo = await exarch(['demo', '--speed', '0.00001']);
    expect(demo.code).toBe(2);
    expectOneLine(demo.stderr, /^exarch: --speed must be at least 0\.001/);
    expect(demo.stderr).not.toMatch(/TimeoutOverflowWarning|did not finish/);
  });
});

describe('durations a host gives', () => {
  it('an MCP server’s time limit, or the time to start one, past a timer is one line naming the largest', async () => {
    await expect(connectMcpServers([{ command: 'node', timeoutMs: 2 ** 31 }])).rejects.toThrow(
      'mcp server timeoutMs must be at most 2147483647 (the longest a timer can wait), got 2147483648',
    );
    await expect(connectMcpServers([], { startTimeoutMs: 2 ** 31 })).rejects.toThrow(/^startTimeoutMs must be an integer from 1 to 2147483647/);
  });

  it('a session option past a timer is a RangeError naming the largest', async () => {
    const provider = scriptedProvider({ agents: { root: [{ text: 'done' }] } });
    for (const option of [{ stallTimeoutMs: 2 ** 31 }, { toolTimeoutMs: 2 ** 40 }, { retry: { maxDelayMs: 2 ** 31 } }])
      await expect(runAgent('go', { provider, ...option })).rejects.toThrow(/must be an integer from \d to 2147483647 \(the longest a timer can wait, in ms\)/);
  });

  it('a deadline past a timer (a tool’s own time limit) is waited out in steps: no overflow, and it does not fire early', async () => {
    const warnings: string[] = [];
    const onWarning = (warning: Error): void => void warnings.push(warning.name);
    process.on('warning', onWarning);
    const queue = new DeadlineQueue();
    let fired = false;
    const deadline = queue.add(2 ** 40, () => (fired = true));
    try {
      // Overflowed, the timer fired after 1 ms, found nothing due, and was set again: a warning and a wake-up every millisecond.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(fired).toBe(false);
      expect(warnings).not.toContain('TimeoutOverflowWarning');
    } finally {
      deadline.cancel();
      process.off('warning', onWarning);
    }
  });
});
