import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, serve, stream, workdir } from '../../support/cliHarness.js';
import { sleep, startInTerminal, tmux, tmuxForFile, waitFor } from '../../support/terminal.js';

/** `exarch run` in a real terminal, read as a person sees it (see support/terminal.ts). */

const terminalTests = tmuxForFile('test/e2e/cli/cli.terminal.test.ts');

describe.skipIf(!terminalTests)('exarch run in a terminal', () => {
  it('redraws the tree as it works, with ticking times and what each agent does, then leaves it and the summary', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'notes.md'), 'hello\n');
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'reader', task: 'read the notes' })] }),
        stream({ text: 'waiting' }),
        stream({ text: 'The notes say hello.' }),
      ],
      reader: [
        stream({ toolCalls: [call('read_file', { path: 'notes.md' })] }),
        // 250 characters at 8 per delta, one delta every 100 ms: three seconds of streaming.
        stream({ text: `${'x'.repeat(242)} read it` }, { chunkDelayMs: 100 }),
        stream({ toolCalls: [call('reply', { result: 'hello' })] }),
      ],
    });
    const session = startInTerminal('test', cwd, server.url, "run --no-store 'read the notes'");

    // While the reader streams: its line says so, with a count, and times tick past a second.
    const live = await waitFor(session, /reader\s+streaming\s+step 2\s+\S+ tok\s+[1-9]\d*s\s+streaming, \d+ chars/, 'the reader streaming with a ticking time');
    expect(live).toMatch(/^root\s+readyForUser\s+.*waiting for 1 sub-agent$/m);

    const final = await waitFor(session, /^EXIT=\d+$/m, 'the end of the run');
    expect(final).toMatch(/^EXIT=0$/m);
    const lines = final.split('\n').map((l) => l.trimEnd());
    // The tree is on the screen once (earlier drawings were erased), then the answer and the summary.
    const rootLines = lines.filter((l) => /^root\s+(streaming|dispatchingBatch|readyForUser|replied)\s/.test(l));
    expect(rootLines).toHaveLength(1);
    expect(rootLines[0]).toMatch(/^root\s+readyForUser\s+step 3\s/);
    expect(lines.filter((l) => /^ {2}reader\s/.test(l))).toEqual([expect.stringMatching(/^ {2}reader\s+replied\s+step 3\s/)]);
    const tree = lines.indexOf(rootLines[0] ?? '');
    const answer = lines.indexOf('The notes say hello.');
    const summary = lines.findIndex((l) => l.startsWith('exarch: 2 agents (sub-agents: 1 replied), 6 model requests'));
    expect(tree).toBeGreaterThanOrEqual(0);
    expect(answer).toBeGreaterThan(tree);
    expect(summary).toBeGreaterThan(answer);
  });

  it('asks about each call that waits for approval inline, one at a time, then draws the tree again', async () => {
    const cwd = workdir();
    const server = await serve({
      root: [
        stream({ toolCalls: [call('write_file', { path: 'a.md', content: 'A' }), call('write_file', { path: 'b.md', content: 'B' })] }),
        stream({ text: 'One written, one refused.' }),
      ],
    });
    const session = startInTerminal('approve', cwd, server.url, "run --allow-write --approve write_file 'write two files'");
    // The first question alone (the second waits its turn), with the tree cleared away.
    const first = await waitFor(session, /Approve\? \[y\]es, \[n\]o, \[a\]lways for write_file: $/m, 'the first question');
    expect(first).toMatch(/^exarch: root wants to run write_file \(toolu_\S+\)$/m);
    expect(first).toContain('  input: {"path":"a.md","content":"A"}');
    expect(first).not.toContain('b.md');
    expect(first).not.toMatch(/^root\s+awaitingApproval/m);
    tmux('send-keys', '-t', session, 'y', 'Enter');
    await waitFor(session, /input: \{"path":"b\.md","content":"B"\}\n.*Approve\?/, 'the second question');
    tmux('send-keys', '-t', session, 'n', 'Enter');
    await waitFor(session, /Reason, for the agent \(optional\): $/m, 'the reason question');
    tmux('send-keys', '-t', session, 'not b', 'Enter');
    const final = await waitFor(session, /^EXIT=\d+$/m, 'the end of the run');
    expect(final).toMatch(/^EXIT=0$/m);
    expect(final).toContain('One written, one refused.');
    expect(existsSync(join(cwd, 'a.md'))).toBe(true);
    expect(existsSync(join(cwd, 'b.md'))).toBe(false);
    const answered = server.requests[1]?.body.messages.at(-1);
    expect(JSON.stringify(answered)).toContain("tool 'write_file' was not run: a person denied this call: not b");
    // The tree is drawn again after the questions, once, and stays with the summary.
    expect(final.split('\n').filter((l) => /^root\s+readyForUser\s/.test(l))).toHaveLength(1);
  });

  it('steers from the terminal: a key opens a command line over the cleared tree; /help, /cancel a sub-agent; the tree comes back whole', async () => {
    const cwd = workdir();
    const server = await serve({
      root: [
        stream({ toolCalls: [call('agent', { name: 'slow', task: 'Take forever.' }), call('wait_for_agents', {})] }),
        (r) =>
          stream({ text: JSON.stringify(r.body.messages.at(-1)).includes("[agent 'slow' was cancelled]") ? 'slow was cancelled' : 'slow was not cancelled' }),
      ],
      slow: [stream({ text: 'thinking' }, { stallAfter: 1 })],
    });
    const session = startInTerminal('steer', cwd, server.url, "run --no-store 'delegate'");
    await waitFor(session, /^ {2}slow\s+streaming\s/m, 'the slow sub-agent streaming');
    // Typed slowly, key by key, while the tree would redraw (every 100 ms, and each second).
    for (const key of ['/', 'h', 'e', 'l', 'p']) {
      tmux('send-keys', '-t', session, '-l', key);
      await sleep(150);
    }
    const typing = await waitFor(session, /^exarch> \/help$/m, 'the command line as typed');
    // The tree was cleared for it: no agent line under the command line.
    expect(typing.slice(typing.lastIndexOf('exarch> /help'))).not.toMatch(/^ {2}slow\s+streaming/m);
    tmux('send-keys', '-t', session, 'Enter');
    await waitFor(session, /^exarch: running: root, root\/slow$/m, 'the help with the agents running');
    // The tree is drawn again below the help.
    const after = await waitFor(
      session,
      /exarch: running: root, root\/slow\nroot\s+waitingForAgents\s.*\n {2}slow\s+streaming\s/,
      'the tree again after the help',
    );
    expect(after).toContain('  /cancel PATH      cancel a sub-agent and everything it started');
    tmux('send-keys', '-t', session, '-l', '/cancel slow');
    await waitFor(session, /^exarch> \/cancel slow$/m, 'the cancel command as typed');
    tmux('send-keys', '-t', session, 'Enter');
    const final = await waitFor(session, /^EXIT=\d+$/m, 'the end of the run');
    expect(final).toMatch(/^exarch: cancelling root\/slow and everything it started$/m);
    expect(final).toMatch(/^EXIT=0$/m);
    expect(final).toContain('slow was cancelled');
    const lines = final.split('\n').map((l) => l.trimEnd());
    // Not garbled: the final tree is on the screen once, each line whole.
    expect(lines.filter((l) => /^root\s+(streaming|dispatchingBatch|readyForUser|waitingForAgents)\s/.test(l))).toEqual([
      expect.stringMatching(/^root\s+readyForUser\s+step 2\s/),
    ]);
    expect(lines.filter((l) => /^ {2}slow\s/.test(l))).toEqual([expect.stringMatching(/^ {2}slow\s+cancelled\s+step 1\s/)]);
    expect(lines.filter((l) => l.includes('exarch> '))).toEqual(['exarch> /help', 'exarch> /cancel slow']);
  });

  it('Ctrl-C still interrupts while the terminal is read for commands (raw mode), and the terminal is given back', async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ text: 'thinking' }, { stallAfter: 1 })] });
    // Cooked again: stty prints its settings (icanon, echo on) for the test to read.
    const session = startInTerminal('ctrlc', cwd, server.url, "run --no-store 'think'", [
      'stty -a | tr " " "\\n" | grep -x -e icanon -e echo -e -icanon -e -echo | tr "\\n" " "; echo',
    ]);
    await waitFor(session, /^root\s+streaming\s/m, 'the root streaming');
    tmux('send-keys', '-t', session, 'C-c');
    const final = await waitFor(session, /^EXIT=\d+$/m, 'the end of the run');
    expect(final).toMatch(/^EXIT=130$/m);
    expect(final).toMatch(/^exarch: interrupted: the agents were cancelled/m);
    await waitFor(session, /^icanon echo\s*$/m, 'the terminal in cooked mode again');
  });
});
