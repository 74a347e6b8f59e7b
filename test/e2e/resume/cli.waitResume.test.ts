import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer } from '../../support/anthropicServer.js';
import { call, exarch, lastUserText, MAIN, onCleanup, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 15, point 4: a durable run killed while its root waits in `waitingForAgents` (SIGKILL, no
 * chance to write anything more) is resumed waiting: no request is made for the wait, and the
 * sub-agent's result reaches the root once, with the wait's answer.
 */

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('a run killed while its root waits for sub-agents', () => {
  it('resumes waiting, and the root hears the result once, with the wait answered', async () => {
    const cwd = workdir();
    const server: AnthropicTestServer = await startAnthropicServer(
      historyHandler({
        root: [
          stream({ toolCalls: [call('agent', { name: 'worker', task: 'List the files.' }), call('wait_for_agents', {})] }),
          (r) => stream({ text: `Heard:\n${lastUserText(r)}` }),
        ],
        // Slow enough that the first process is killed while the worker streams.
        worker: [
          stream({ toolCalls: [call('list_dir', { path: '.' })] }, { chunkDelayMs: 300 }),
          stream({ toolCalls: [call('reply', { result: 'two files' })] }),
        ],
      }),
    );
    onCleanup(() => server.close());
    const first = spawn(process.execPath, [MAIN, 'run', 'Survey'], {
      cwd,
      env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    first.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise((resolve) => first.on('close', resolve));
    await until(() => server.requests.some((r) => r.agent === 'worker'), 'the worker to start');
    first.kill('SIGKILL');
    await closed;
    const id = /^exarch: run (\S+) started$/m.exec(stderr)?.[1] ?? '';
    expect(server.requests.filter((r) => r.agent === 'root')).toHaveLength(1);

    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    // One request for the whole run after the delegation: the wait itself asked for none.
    expect(server.requests.filter((r) => r.agent === 'root')).toHaveLength(2);
    expect(resumed.stdout.match(/\[agent 'worker' replied\]\ntwo files/g)).toHaveLength(1);
    expect(resumed.stdout).toContain('[result ok: "1 sub-agent finished; their results follow."]');
    expect(server.pairingViolations).toEqual([]);
  });
});
