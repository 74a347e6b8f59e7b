import { describe, expect, it } from 'vitest';
import { call, lastUserText, serve, startExarch, stream, workdir } from '../../support/cliHarness.js';
import type { ReceivedRequest, ServerPlan } from '../../support/anthropicServer.js';

/**
 * Issue 17, steering from the command line: `exarch run --steer` reads command lines from stdin
 * (on a terminal they are read without the flag: test/e2e/cli/cli.terminal.test.ts). Through the real
 * command against the loopback SSE server: `/cancel PATH` cancels one sub-agent's subtree (its
 * parent is told), `/msg PATH TEXT` reaches a running sub-agent's next request once, after the
 * results of the batch it was in; a line that is no command is one line saying so.
 */

describe('exarch run --steer', () => {
  it('/cancel a sub-agent by path, /msg another mid-batch, /help lists who runs; bad lines are one line each', async () => {
    let messageSent: () => void = () => undefined;
    const sent = new Promise<void>((resolve) => (messageSent = resolve));
    const server = await serve({
      root: [
        stream({
          toolCalls: [
            call('agent', { name: 'slow', task: 'Take forever.' }),
            call('agent', { name: 'worker', task: 'List the files.' }),
            call('wait_for_agents', {}),
          ],
        }),
        (r: ReceivedRequest): ServerPlan => stream({ text: `Root heard:\n${lastUserText(r)}` }),
      ],
      // message_start, then silence until it is cancelled.
      slow: [stream({ text: 'thinking about it' }, { stallAfter: 1 })],
      // The worker's first response is held until the message was given, so the message waits for its batch.
      worker: [
        () => sent.then(() => stream({ toolCalls: [call('list_dir', { path: '.' })] })) as unknown as ServerPlan,
        (r: ReceivedRequest): ServerPlan => stream({ toolCalls: [call('reply', { result: `worker heard: ${lastUserText(r)}` })] }),
      ],
    });
    const run = startExarch(['run', '--no-store', '--steer', 'Delegate'], server, workdir());
    await run.until('both sub-agents streaming', () => server.requests.some((r) => r.agent === 'slow') && server.requests.some((r) => r.agent === 'worker'));
    run.send('/help');
    await run.until('the help', () => /^exarch: running: /m.test(run.stderr()));
    run.send('hello');
    run.send('/cancel root');
    run.send('/msg root/nobody hi');
    run.send('/frobnicate');
    run.send('/cancel root/slow');
    run.send('/msg worker Focus on the tests.');
    await run.until('the message given', () => /gets the message at its next boundary$/m.test(run.stderr()));
    messageSent();
    expect(await run.exit, run.stderr()).toBe(0);
    const stderr = run.stderr();
    expect(stderr).toMatch(/^exarch: running: root, root\/slow, root\/worker$/m);
    expect(stderr).toContain('  /cancel PATH      cancel a sub-agent and everything it started');
    // One line for each line that is no (good) command; the run went on.
    expect(stderr).toMatch(/^exarch: commands start with \/; type \/help$/m);
    expect(stderr).toMatch(/^exarch: \/cancel takes a sub-agent; Ctrl-C stops the whole run$/m);
    expect(stderr).toMatch(/^exarch: no agent root\/nobody is running \(running: root, root\/slow, root\/worker\)$/m);
    expect(stderr).toMatch(/^exarch: unknown command \/frobnicate; type \/help$/m);
    expect(stderr).toMatch(/^exarch: cancelling root\/slow and everything it started$/m);
    expect(stderr).toMatch(/^exarch: root\/worker gets the message at its next boundary$/m);
    // The cancelled sub-agent's parent was told; the other went on.
    expect(run.stdout()).toContain("[agent 'slow' was cancelled]");
    expect(server.requests.filter((r) => r.agent === 'slow')).toHaveLength(1);
    // The message reached the worker's next request after its batch's result, once.
    const worker = server.requests.filter((r) => r.agent === 'worker');
    expect(worker).toHaveLength(2);
    const last = worker[1]?.body.messages.at(-1);
    const blocks = Array.isArray(last?.content) ? last.content : [];
    expect(blocks.map((b) => b.type)).toEqual(['tool_result', 'text']);
    expect(blocks[1]?.['text']).toBe('Focus on the tests.');
    expect(JSON.stringify(worker[1]?.body.messages).split('Focus on the tests.')).toHaveLength(2);
    expect(run.stdout()).toContain("[agent 'worker' replied]\nworker heard:");
    expect(server.pairingViolations).toEqual([]);
  });

  it('--steer with --db --detach is refused in one line', async () => {
    const server = await serve({ root: [] });
    const run = startExarch(['run', '--steer', '--detach', '--db', 'postgres://nobody@127.0.0.1:1/none', 'x'], server, workdir());
    expect(await run.exit).toBe(2);
    expect(run.stderr().split('\n')[0]).toBe('exarch: --steer with --detach: nothing here reads the lines; follow the run to steer it');
  });
});
