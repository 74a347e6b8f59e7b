import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exarch, readJsonl, serve, stream, workdir } from '../../support/cliHarness.js';
import { echo, researchScripts } from '../../support/researchTree.js';

/**
 * Issue 19.3 as a user meets it: `exarch run --record FILE` against the loopback Anthropic server,
 * the server stopped, then `exarch run --replay FILE` offline, with no key. The oracle is the
 * recorded run itself: its stdout and its trace (`--trace`), times aside.
 */

/** root → researcher → reader (a file read and a listing), each parent waiting for its child: one order of events only. */
const sequential = {
  root: [
    stream({
      text: 'Delegating.',
      toolCalls: [
        { name: 'agent', input: { name: 'researcher', task: 'Find the cause.' } },
        { name: 'wait_for_agents', input: {} },
      ],
    }),
    echo,
  ],
  ...researchScripts([
    { name: 'read_file', input: { path: 'notes.md' } },
    { name: 'list_dir', input: { path: 'docs' } },
  ]),
};

/** The same tree, and two more children of the root that finish at different speeds while it runs. */
const concurrent = {
  root: [
    stream({
      toolCalls: [
        { name: 'agent', input: { name: 'researcher', task: 'Find the cause.' } },
        { name: 'agent', input: { name: 'slow', task: 's' } },
        { name: 'agent', input: { name: 'quick', task: 'q' } },
      ],
    }),
    stream({ text: 'Waiting.' }),
    echo,
    echo,
    echo,
    echo,
  ],
  ...researchScripts([
    { name: 'read_file', input: { path: 'notes.md' } },
    { name: 'list_dir', input: { path: 'docs' } },
  ]),
  slow: [stream({ toolCalls: [{ name: 'reply', input: { result: 'slow done' } }], chunkSize: 2 }, { chunkDelayMs: 15 })],
  quick: [stream({ toolCalls: [{ name: 'reply', input: { result: 'quick done' } }] })],
};

const KEY = 'sk-ant-test-key-0123456789';
const TOKEN = 'tok-5f2e9a81c4d7b3e6';

/** A trace with its times taken out: `t` of every record, `startedAt` of the first. */
function timeless(file: string): unknown[] {
  return readJsonl(file).map(({ t: _t, startedAt: _startedAt, ...rest }) => rest);
}

/** The trace's records agent by agent (a delivery is its parent's), each agent's in order, times aside. */
function perAgent(file: string): Record<string, unknown[]> {
  const out: Record<string, unknown[]> = {};
  for (const record of timeless(file) as { agent?: string; parent?: string }[]) (out[record.agent ?? record.parent ?? ''] ??= []).push(record);
  // The results of one batch's tools are traced as each ends, which is a matter of time too (two
  // reads of a batch ended in either order on a loaded machine): within a run of them, by call.
  for (const records of Object.values(out))
    for (let i = 0; i < records.length; ) {
      let j = i;
      while (j < records.length && (records[j] as { kind?: string }).kind === 'tool.result') j++;
      const results = records.slice(i, j) as { toolUseId: string }[];
      results.sort((a, b) => a.toolUseId.localeCompare(b.toolUseId));
      records.splice(i, results.length, ...results);
      i = Math.max(j, i + 1);
    }
  return out;
}

/** Records the run in a fresh directory; returns the directory, the run and the server's requests. */
async function recordRun(scripts: Parameters<typeof serve>[0] = concurrent) {
  const cwd = workdir();
  writeFileSync(join(cwd, 'notes.md'), `the session cookie is not renewed; deploy token ${TOKEN}\n`);
  // Listed by the reader: a directory the recording and its replay leave alone.
  mkdirSync(join(cwd, 'docs'));
  writeFileSync(join(cwd, 'docs', 'auth.md'), 'sessions\n');
  const server = await serve(scripts);
  const run = await exarch(['run', '--record', 'run.recording.jsonl', '--trace', 'recorded.jsonl', 'Why do logins fail?'], {
    server,
    cwd,
    env: { ANTHROPIC_API_KEY: KEY, DEPLOY_TOKEN: TOKEN },
  });
  await server.close();
  return { cwd, run, requests: server.requests };
}

/** `exarch run --replay`: no key, and the base URL of a server that is gone. */
function replay(cwd: string, args: readonly string[], task = 'Why do logins fail?') {
  return exarch(['run', '--replay', 'run.recording.jsonl', ...args, task], { cwd, env: { DEPLOY_TOKEN: TOKEN, ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' } });
}

describe('exarch run --record / --replay', () => {
  it('the replay, offline and without a key, prints the same answer and writes the same trace, times aside', async () => {
    const { cwd, run } = await recordRun(sequential);
    expect(run.code).toBe(0);
    expect(run.stdout).toMatch(/^Heard: [\s\S]*\[agent 'researcher' replied\]\nresearcher: [\s\S]*\[agent 'reader' replied\]/);
    const replayed = await replay(cwd, ['--trace', 'replayed.jsonl']);
    expect(replayed.stderr).not.toMatch(/differs|ANTHROPIC_API_KEY/);
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toBe(run.stdout);
    expect(timeless(join(cwd, 'replayed.jsonl'))).toEqual(timeless(join(cwd, 'recorded.jsonl')));
  });

  it('sub-agents that ran concurrently: each agent’s trace is the same, every delivery met at the same point', async () => {
    const { cwd, run, requests } = await recordRun(concurrent);
    expect(run.code).toBe(0);
    // The root woke more than once: the children's results came in over several of its turns.
    expect(requests.filter((r) => r.agent === 'root').length).toBeGreaterThan(3);
    const replayed = await replay(cwd, ['--trace', 'replayed.jsonl']);
    expect(replayed.code).toBe(0);
    expect(replayed.stdout).toBe(run.stdout);
    // Which of two independent agents wrote its line first is a matter of time, like `t`.
    expect(perAgent(join(cwd, 'replayed.jsonl'))).toEqual(perAgent(join(cwd, 'recorded.jsonl')));
  });

  it('the recording holds neither the key nor the value of a *_TOKEN variable, though both travelled', async () => {
    const { cwd, requests } = await recordRun();
    expect(JSON.stringify(requests.map((r) => r.body))).toContain(TOKEN);
    expect(requests[0]?.headers['authorization'] ?? requests[0]?.headers['x-api-key']).toContain(KEY);
    const text = readFileSync(join(cwd, 'run.recording.jsonl'), 'utf8');
    expect(text).not.toContain(TOKEN);
    expect(text).not.toContain(KEY);
    expect(text).toContain('[redacted]');
  });

  it('a tampered recording, or another task: exit 1, nothing on stdout, one line naming the first differing field', async () => {
    const { cwd } = await recordRun();
    const other = await replay(cwd, [], 'Why do logouts fail?');
    expect(other.code).toBe(1);
    expect(other.stdout).toBe('');
    expect(other.stderr.split('\n').filter((line) => line.includes('recording'))).toEqual([
      'exarch: the request differs from the recording at messages[0].content[0].text (agent root, request 1)',
    ]);

    // The reader's first answer, edited in the file: its next request no longer holds what was recorded.
    const file = join(cwd, 'run.recording.jsonl');
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    const edited = lines.map((line) => {
      const value = JSON.parse(line) as { agent?: string; index?: number };
      return value.agent === 'root/researcher/reader' && value.index === 0 ? line.replace('"text":"Reading."', '"text":"Skimming"') : line;
    });
    expect(edited).not.toEqual(lines);
    writeFileSync(file, `${edited.join('\n')}\n`);
    const tampered = await replay(cwd, []);
    expect(tampered.code).toBe(1);
    expect(tampered.stdout).toBe('');
    expect(tampered.stderr.split('\n').filter((line) => line.includes('recording'))).toEqual([
      'exarch: the request differs from the recording at messages[1].content[0].text (agent root/researcher/reader, request 2)',
    ]);
  });

  it('a recorded run names its recording on stderr once it ends', async () => {
    const { run } = await recordRun(sequential);
    expect(run.code).toBe(0);
    expect(run.stderr).toContain('exarch: recorded to run.recording.jsonl; replay it with --replay run.recording.jsonl and the same task and options\n');
  });

  it('a replay spent nothing: its summary says $0 (replayed) beside what the recording cost, and no agent is priced', async () => {
    const { cwd, run } = await recordRun(sequential);
    const recordedCost = /, about (\$\d+\.\d+) · logs:/.exec(run.stderr)?.[1];
    expect(recordedCost).toBeDefined();
    expect(run.stderr).toMatch(/^ {2}root .* tokens {2}about \$/m);
    const replayed = await replay(cwd, []);
    expect(replayed.code).toBe(0);
    expect(replayed.stderr).toContain(`, $0 (replayed; recorded at about ${recordedCost}) · logs:`);
    expect(replayed.stderr).not.toMatch(/, about \$/);
    const spend = replayed.stderr.split('\n').filter((line) => /^ {2}root\S* +\d+ tokens/.test(line));
    expect(spend.length).toBeGreaterThan(0);
    for (const line of spend) expect(line).not.toContain('$');
  });

  it('a replay that differs is listed failed, not interrupted, and resume says in one line why, with no key', async () => {
    const { cwd } = await recordRun();
    const other = await replay(cwd, [], 'Why do logouts fail?');
    expect(other.code).toBe(1);
    const id = /^exarch: run (\w{26}) started$/m.exec(other.stderr)?.[1] ?? '';
    expect(id).not.toBe('');
    const runs = await exarch(['runs'], { cwd });
    const row = runs.stdout.split('\n').find((line) => line.startsWith(id));
    expect(row?.split(/ {2,}/)[2]).toBe('failed');
    const resumed = await exarch(['resume', id], { cwd, env: { ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' } });
    expect(resumed.stderr).toBe(
      `exarch: run ${id} is already finished (failed: the request differs from the recording at messages[0].content[0].text (agent root, request 1)); nothing to resume\n`,
    );
    expect(resumed.code).toBe(0);
  });

  it('bad use: --record with --replay, and a file that is not a recording, are one line each', async () => {
    const cwd = workdir();
    const both = await exarch(['run', '--record', 'a.jsonl', '--replay', 'b.jsonl', 'go'], { cwd });
    expect(both.code).toBe(2);
    expect(both.stderr.split('\n')[0]).toBe('exarch: --record and --replay cannot be used together');
    const missing = await exarch(['run', '--replay', 'nothing.jsonl', 'go'], { cwd });
    expect(missing.code).toBe(1);
    expect(missing.stderr).toBe(`exarch: cannot read the recording nothing.jsonl: no such file\n`);
  });
});
