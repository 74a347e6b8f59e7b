import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exarch, serve, stream, workdir } from '../../support/cliHarness.js';
import { filesUnder } from '../../support/filesUnder.js';

/**
 * Issue 37, hole 5, ANTHROPIC_BASE_URL: a base URL with credentials in it (a proxy's) is refused
 * by fetch with a message that quotes the URL, password and all; exarch printed that message as
 * the root's failure and wrote it to the agent's log, the trace and the run store. The URL's
 * secrets are now among those redacted from everything exarch writes.
 */

const PASSWORD = 'BaseSecret-777-proxy';

describe('ANTHROPIC_BASE_URL with credentials', () => {
  it('the failure is one line without the password, and no file exarch wrote holds it', { timeout: 60_000 }, async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const base = server.url.replace('http://', `http://proxy-user:${PASSWORD}@`);
    const run = await exarch(['run', '--log-dir', join(cwd, 'logs'), '--trace', join(cwd, 'trace.jsonl'), 'Say hi.'], {
      cwd,
      env: { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: base },
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^exarch: the root agent failed: cannot reach the Anthropic API: .+$/m);
    const texts = new Map([['stdout', run.stdout], ['stderr', run.stderr], ...filesUnder(cwd)]);
    expect([...texts].filter(([, text]) => text.includes('BaseSecret') || text.includes('777-proxy')).map(([where]) => where)).toEqual([]);
  });
});
