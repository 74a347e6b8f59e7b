import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { openSqliteStore } from '../../../src/store/sqliteStore.js';
import { waitingCalls } from '../../../src/store/runApprovals.js';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest } from '../../support/anthropicServer.js';
import { call, exarch, lastUserText, MAIN, onCleanup, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 17 through the real command against the loopback SSE server: a grandchild's `write_file`
 * waits for approval while its sibling finishes; with no one to ask, the run stops `waiting`
 * (exit 4) listing the call and the command that answers it; `exarch approve|deny` only record;
 * `exarch resume` continues. A SIGKILL while waiting loses nothing.
 */

const WRITE = call('write_file', { path: 'notes.md', content: 'hello\n' });

/** root → lead → {scribe (writes), sibling}; everyone waits for its sub-agents; answers say what they heard. */
function tree(sibling: { chunkDelayMs?: number } = {}) {
  return historyHandler({
    root: [
      stream({ toolCalls: [call('agent', { name: 'lead', task: 'Lead the notes.' }), call('wait_for_agents', {})] }),
      (r) => stream({ text: `Root heard:\n${lastUserText(r)}` }),
    ],
    lead: [
      stream({
        toolCalls: [
          call('agent', { name: 'scribe', task: 'Write notes.md.' }),
          call('agent', { name: 'sibling', task: 'Say hi.' }),
          call('wait_for_agents', {}),
        ],
      }),
      stream({ toolCalls: [call('reply', { result: 'lead done' })] }),
    ],
    scribe: [stream({ toolCalls: [WRITE] }), (r) => stream({ toolCalls: [call('reply', { result: `scribe saw: ${lastUserText(r)}` })] })],
    sibling: [stream({ toolCalls: [call('reply', { result: 'hi' })] }, sibling)],
  });
}

async function server(handler: Parameters<typeof startAnthropicServer>[0]): Promise<AnthropicTestServer> {
  const s = await startAnthropicServer(handler);
  onCleanup(() => s.close());
  return s;
}

const runIdOf = (stderr: string): string => /^exarch: run (\S+) started$/m.exec(stderr)?.[1] ?? '';
const callIdsOf = (stderr: string): string[] => [...stderr.matchAll(/^ {2}(toolu_\S+) {2}write_file {2}by (\S+)/gm)].map((m) => m[1] ?? '');
const requestsOf = (s: AnthropicTestServer, agent: string): ReceivedRequest[] => s.requests.filter((r) => r.agent === agent);

describe('exarch run --approve', () => {
  it('without a terminal: the sibling finishes, the run stops waiting (exit 4) with the listing; approve, resume → written once', async () => {
    const cwd = workdir();
    const s = await server(tree());
    const first = await exarch(['run', '--allow-write', '--approve', 'write_file', 'Take notes'], { server: s, cwd });
    expect(first.code).toBe(4);
    const id = runIdOf(first.stderr);
    const [callId] = callIdsOf(first.stderr);
    expect(callId).toMatch(/^toolu_/);
    expect(first.stderr).toContain(`  ${callId}  write_file  by root/lead/scribe  {"path":"notes.md","content":"hello\\n"}`);
    expect(first.stderr).toContain(`exarch approve ${id} ${callId}`);
    expect(first.stderr).toContain(`exarch: then continue with: exarch resume ${id}`);
    expect(first.stdout).toBe('');
    // The sibling finished while the scribe waited; nothing was written.
    expect(requestsOf(s, 'sibling')).toHaveLength(1);
    expect(existsSync(join(cwd, 'notes.md'))).toBe(false);
    const runs = await exarch(['runs'], { cwd });
    expect(runs.stdout).toMatch(new RegExp(`^${id} .* waiting `, 'm'));

    const approved = await exarch(['approve', id, callId ?? ''], { cwd });
    expect(approved.code).toBe(0);
    expect(approved.stderr).toContain(`write_file call ${callId} of root/lead/scribe approved`);
    // Recording runs nothing.
    expect(existsSync(join(cwd, 'notes.md'))).toBe(false);
    expect(s.requests.filter((r) => r.agent === 'scribe')).toHaveLength(1);

    const resumed = await exarch(['resume', id], { server: s, cwd });
    expect(resumed.code).toBe(0);
    expect(readFileSync(join(cwd, 'notes.md'), 'utf8')).toBe('hello\n');
    const scribe = requestsOf(s, 'scribe');
    expect(scribe).toHaveLength(2);
    // Exactly one result for the call, the write's own.
    expect(lastUserText(scribe[1] as ReceivedRequest)).toBe('[result ok: "wrote 6 bytes to notes.md"]');
    expect(resumed.stdout).toContain("[agent 'lead' replied]\nlead done");
    // The sibling was not asked again.
    expect(requestsOf(s, 'sibling')).toHaveLength(1);
    expect(s.pairingViolations).toEqual([]);
  });

  it('deny records the reason; on resume the model sees it as an error result and nothing is written', async () => {
    const cwd = workdir();
    const s = await server(tree());
    const first = await exarch(['run', '--allow-write', '--approve', 'all', '--no-wait', 'Take notes'], { server: s, cwd });
    expect(first.code).toBe(4);
    const id = runIdOf(first.stderr);
    const [callId] = callIdsOf(first.stderr);
    expect((await exarch(['deny', id, callId ?? '', 'not in this folder'], { cwd })).code).toBe(0);
    const resumed = await exarch(['resume', id], { server: s, cwd });
    expect(resumed.code).toBe(0);
    expect(existsSync(join(cwd, 'notes.md'))).toBe(false);
    expect(lastUserText(requestsOf(s, 'scribe')[1] as ReceivedRequest)).toBe(
      '[result error: "tool \'write_file\' was not run: a person denied this call: not in this folder"]',
    );
  });

  it('SIGKILL while a call waits: resume, approve, resume → written once', async () => {
    const cwd = workdir();
    // The sibling streams slowly: the process is alive, its scribe waiting, when it is killed.
    const s = await server(tree({ chunkDelayMs: 400 }));
    const child = spawn(process.execPath, [MAIN, 'run', '--allow-write', '--approve', 'write_file', 'Take notes'], {
      cwd,
      env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: s.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const closed = new Promise((resolve) => child.on('close', resolve));
    await until(() => runIdOf(stderr) !== '', 'the run id');
    const id = runIdOf(stderr);
    const store = openSqliteStore(join(cwd, '.exarch', 'exarch.db'));
    onCleanup(() => store.close());
    // Killed once the journal holds the waiting call (the sibling still streaming).
    let waiting: Awaited<ReturnType<typeof waitingCalls>> = [];
    const end = Date.now() + 10_000;
    while (waiting.length === 0 && Date.now() < end) {
      waiting = await waitingCalls(store, id);
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(waiting.map((c) => [c.tool, c.agent])).toEqual([['write_file', 'root/lead/scribe']]);
    child.kill('SIGKILL');
    await closed;
    expect((await exarch(['runs'], { cwd })).stdout).toMatch(new RegExp(`^${id} .* interrupted `, 'm'));

    // Resumed with no one to ask: it waits again (the call was not run, and not lost).
    const again = await exarch(['resume', id], { server: s, cwd });
    expect(again.code).toBe(4);
    expect(callIdsOf(again.stderr)).toEqual([waiting[0]?.callId]);
    expect((await exarch(['approve', id, waiting[0]?.callId ?? ''], { cwd })).code).toBe(0);
    const resumed = await exarch(['resume', id], { server: s, cwd });
    expect(resumed.code).toBe(0);
    expect(readFileSync(join(cwd, 'notes.md'), 'utf8')).toBe('hello\n');
    const results = requestsOf(s, 'scribe').flatMap((r) =>
      r.body.messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'tool_result'))),
    );
    expect(new Set(results.map((b) => JSON.stringify(b)))).toEqual(new Set([JSON.stringify(results[0])]));
    expect(s.pairingViolations).toEqual([]);
  });

  it('approve --always approves the later calls of that tool without asking', async () => {
    const cwd = workdir();
    const s = await server(
      historyHandler({
        root: [
          stream({ toolCalls: [call('write_file', { path: 'a.md', content: 'a' })] }),
          stream({ toolCalls: [call('write_file', { path: 'b.md', content: 'b' })] }),
          stream({ text: 'both written' }),
        ],
      }),
    );
    const first = await exarch(['run', '--allow-write', '--approve', 'write_file', 'Write two files'], { server: s, cwd });
    expect(first.code).toBe(4);
    const id = runIdOf(first.stderr);
    const [callId] = callIdsOf(first.stderr);
    expect((await exarch(['approve', id, callId ?? '', '--always'], { cwd })).code).toBe(0);
    const resumed = await exarch(['resume', id], { server: s, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('both written\n');
    expect(resumed.stderr).not.toContain('wait for approval');
    expect(readFileSync(join(cwd, 'a.md'), 'utf8')).toBe('a');
    expect(readFileSync(join(cwd, 'b.md'), 'utf8')).toBe('b');
  });

  it('bad input is one line: an unknown tool, an unknown call', async () => {
    const cwd = workdir();
    const bad = await exarch(['run', '--approve', 'write_fil', 'x'], { cwd, env: { ANTHROPIC_API_KEY: 'k' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr.split('\n')[0]).toMatch(/^exarch: --approve: no tool named 'write_fil' in this run \(its tools: /);
    const s = await server(tree());
    const first = await exarch(['run', '--allow-write', '--approve', 'write_file', 'Take notes'], { server: s, cwd });
    const id = runIdOf(first.stderr);
    const wrong = await exarch(['approve', id, 'toolu_nope'], { cwd });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toMatch(new RegExp(`^exarch: call toolu_nope of run ${id} does not wait for approval \\(the calls waiting are toolu_\\S+\\)\\n$`));
  });
});

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('exarch run --max-tokens', () => {
  it('a fan-out of 20 stops within one request per running agent of the budget; the root answers on stdout, exit 0', async () => {
    const cwd = workdir();
    const U = 100; // input tokens of every response; output tokens are the server's count of what it streamed
    const worker = (i: number) => [
      ...[0, 1, 2].map((s) =>
        stream({ toolCalls: [call('list_dir', { path: '.' })], usage: { input_tokens: U } }, { chunkDelayMs: 5 + ((i * 7 + s * 3) % 11) }),
      ),
      stream({ toolCalls: [call('reply', { result: `done ${i}` })], usage: { input_tokens: U } }),
    ];
    const scripts: Record<string, ReturnType<typeof worker>> = {
      root: [
        stream({
          toolCalls: [...Array.from({ length: 20 }, (_, i) => call('agent', { name: `w${i}`, task: `work ${i}` })), call('wait_for_agents', {})],
          usage: { input_tokens: U },
        }),
        stream({ text: 'Final answer from what I have.', usage: { input_tokens: U } }),
      ],
    };
    for (let i = 0; i < 20; i++) scripts[`w${i}`] = worker(i);
    const s = await server(historyHandler(scripts));
    const run = await exarch(['run', '--max-tokens', '2500', 'Fan out'], { server: s, cwd });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('Final answer from what I have.\n');
    expect(run.stderr).toMatch(
      /^exarch: the budget stopped the run: the tree spent [\d.,k]+ tokens( \(about \$[\d.]+\))?; running and queued sub-agents were cancelled and the root answered in its final turn$/m,
    );
    // Every response spends at least U tokens, so at most 25 complete before the budget is reached;
    // then at most one request per running sub-agent (20) is in flight, and the root has one final turn.
    expect(s.requests.length).toBeLessThanOrEqual(25 + 20 + 1);
    expect(s.requests.length).toBeLessThan(2 + 20 * 4);
    expect(requestsOf(s, 'root')).toHaveLength(2);
    expect(lastUserText(requestsOf(s, 'root')[1] as ReceivedRequest).match(/^\[agent 'w\d+' [^\]]+\]$/gm)).toHaveLength(20);
    expect(s.pairingViolations).toEqual([]);
  });

  it('a budget a parent gives a sub-agent: the sub-agent stops within it, the parent is told, the summary shows who spent what', async () => {
    const cwd = workdir();
    const U = 100;
    const s = await server(
      historyHandler({
        root: [
          stream({
            toolCalls: [call('agent', { name: 'lead', task: 'List forever.', budget: { tokens: 3 * U } }), call('wait_for_agents', {})],
            usage: { input_tokens: U },
          }),
          (r) =>
            stream({
              text: `Root heard: ${lastUserText(r)
                .split('\n')
                .filter((l) => l.startsWith('[agent'))
                .join(' ')}`,
              usage: { input_tokens: U },
            }),
        ],
        lead: Array.from({ length: 10 }, () => stream({ toolCalls: [call('list_dir', { path: '.' })], usage: { input_tokens: U, output_tokens: 0 } })),
      }),
    );
    const run = await exarch(['run', '--no-store', 'Delegate'], { server: s, cwd });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toContain("Root heard: [agent 'lead' hit the step cap]");
    // ⌈300 ÷ 100⌉ requests reach the budget (the third's message_start does); the lead alone runs in its subtree.
    expect(requestsOf(s, 'lead').length).toBeLessThanOrEqual(3 + 1);
    expect(run.stderr).toMatch(/^ {2}root\/lead\s+\d+ tokens\s+about \$[\d.]+$/m);
    expect(s.pairingViolations).toEqual([]);
  });
});
