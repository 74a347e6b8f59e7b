import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createRunObserver, runAgent, type RunEvent } from '../../../src/index.js';
import { workspaceTools } from '../../../src/workspace.js';
import { AnthropicProvider } from '../../../src/providers/anthropic.js';
import { Redactor } from '../../../src/engine/redact.js';
import { replayProvider, ReplayMismatchError, RecordingError } from '../../../src/testing/index.js';
import {
  responseEvents,
  scriptedHandler,
  startAnthropicServer,
  type AnthropicTestServer,
  type ReceivedRequest,
  type ServerPlan,
} from '../../support/anthropicServer.js';
import { researchScripts } from '../../support/researchTree.js';

/**
 * Issue 19.3, the library half: a run against the loopback Anthropic server recorded by the real
 * provider, then replayed by `replayProvider` with the server gone. The oracle is the first run
 * itself: what every agent saw and did (its run events, times aside) and the final answer.
 */

const dirs: string[] = [];
let server: AnthropicTestServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function workdir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-replay-'));
  dirs.push(dir);
  return dir;
}

const stream = (spec: Parameters<typeof responseEvents>[0], extra: Partial<Extract<ServerPlan, { kind: 'stream' }>> = {}): ServerPlan => ({
  kind: 'stream',
  events: responseEvents(spec),
  ...extra,
});

/** What the root was just told, answered back: the root's requests show which deliveries it had met. */
function lastUserText(request: ReceivedRequest): string {
  const last = request.body.messages.at(-1);
  if (!last || typeof last.content === 'string') return String(last?.content ?? '');
  return last.content
    .map((b) => (b.type === 'text' ? String(b['text']) : b.type === 'tool_result' ? `[result ${JSON.stringify(b['content'])}]` : ''))
    .join('\n');
}
const echo = (request: ReceivedRequest): ServerPlan => stream({ text: `Heard: ${lastUserText(request)}` });

/** root → researcher → reader with a file read, and three children of the root that finish at different speeds. */
const scripts = {
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
  ...researchScripts([{ name: 'read_file', input: { path: 'notes.md' } }]),
  // Finishes last: many slow chunks.
  slow: [stream({ toolCalls: [{ name: 'reply', input: { result: 'slow done' } }], chunkSize: 2 }, { chunkDelayMs: 15 })],
  quick: [stream({ toolCalls: [{ name: 'reply', input: { result: 'quick done' } }] })],
};

/** A run's events as the test compares them: in order, times and snapshots left out. */
function comparable(events: readonly RunEvent[]): string[] {
  return events.filter((e) => e.type !== 'agent.snapshot').map((e) => JSON.stringify({ ...e, time: undefined }));
}

async function runWith(provider: AnthropicProvider | ReturnType<typeof replayProvider>, root: string, task = 'Why do logins fail?') {
  const observer = createRunObserver();
  const events: RunEvent[] = [];
  observer.subscribe((event) => events.push(event));
  const result = await runAgent(
    task,
    { provider, tools: workspaceTools({ root }), retry: { maxRetries: 1, baseDelayMs: 1, maxDelayMs: 1 } },
    { inspect: observer.inspect },
  );
  return { result, events };
}

async function record(root: string, file: string, redactor = new Redactor([])) {
  server = await startAnthropicServer(scriptedHandler(scripts));
  const provider = new AnthropicProvider({
    apiKey: 'test-key-never-recorded',
    baseURL: server.url,
    model: 'claude-test',
    sdkMaxRetries: 0,
    record: { file, redactor },
  });
  const run = await runWith(provider, root);
  const requests = server.requests;
  await server.close();
  server = undefined;
  return { ...run, requests };
}

describe('recorded runs: record against the server, replay without it', () => {
  it('the replay makes the same requests in the same order per agent, meets the same deliveries, and gives the same answer', async () => {
    const root = workdir();
    writeFileSync(join(root, 'notes.md'), 'the session cookie is not renewed\n');
    const file = join(root, 'run.recording.jsonl');
    const recorded = await record(root, file);
    expect(recorded.result.state).toBe('readyForUser');
    // The root met the three deliveries over several turns, in the order the children finished.
    const heard = recorded.requests.filter((r) => r.agent === 'root').map(lastUserText);
    expect(heard.join('\n')).toMatch(/quick[\s\S]*slow|quick[\s\S]*researcher/);

    // Each exchange keeps when it began and ended, in milliseconds from the start of the recording:
    // later positions are never earlier, and the slow sub-agent's stream took its chunks' delays.
    const exchanges = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => JSON.parse(line) as { agent: string; start: number; end: number; startMs: number; endMs: number });
    const byPosition = exchanges.flatMap((e) => [[e.start, e.startMs] as const, [e.end, e.endMs] as const]).sort((a, b) => a[0] - b[0]);
    for (let i = 1; i < byPosition.length; i++) expect(byPosition[i]![1]).toBeGreaterThanOrEqual(byPosition[i - 1]![1]);
    const slow = exchanges.find((e) => e.agent === 'root/slow');
    // (Five chunks 15 ms apart; a timer may fire a millisecond early.)
    expect((slow?.endMs ?? 0) - (slow?.startMs ?? 0)).toBeGreaterThanOrEqual(15 * 4);

    const replay = replayProvider(file);
    const replayed = await runWith(replay, root);
    expect(replay.mismatch).toBeUndefined();
    expect(replayed.result.text).toBe(recorded.result.text);
    expect(comparable(replayed.events)).toEqual(comparable(recorded.events));
  });

  it('a request that differs fails with the first differing field as a JSON path, and the provider keeps it', async () => {
    const root = workdir();
    writeFileSync(join(root, 'notes.md'), 'the session cookie is not renewed\n');
    const file = join(root, 'run.recording.jsonl');
    await record(root, file);

    // Another task: the root's first message.
    const other = replayProvider(file);
    const run = await runWith(other, root, 'Why do logouts fail?');
    expect(other.mismatch).toBeInstanceOf(ReplayMismatchError);
    expect(other.mismatch?.message).toBe('the request differs from the recording at messages[0].content[0].text (agent root, request 1)');
    expect(run.result.state).toBe('failed');

    // The file the reader reads changed: the reader's second request carries another tool result.
    writeFileSync(join(root, 'notes.md'), 'the session cookie is renewed\n');
    const changed = replayProvider(file);
    await runWith(changed, root);
    expect(changed.mismatch?.message).toBe(
      'the request differs from the recording at messages[2].content[0].content (agent root/researcher/reader, request 2)',
    );
  });

  it('a tampered recording: the edited field is named', async () => {
    const root = workdir();
    writeFileSync(join(root, 'notes.md'), 'the session cookie is not renewed\n');
    const file = join(root, 'run.recording.jsonl');
    await record(root, file);
    const lines = readFileSync(file, 'utf8').trim().split('\n');
    const edited = lines.map((line) => {
      const value = JSON.parse(line) as { kind: string; agent?: string; index?: number; fields?: Record<string, unknown> };
      if (value.kind === 'exchange' && value.agent === 'root/quick' && value.index === 0) value.fields = { ...value.fields, max_tokens: 1 };
      return JSON.stringify(value);
    });
    writeFileSync(file, `${edited.join('\n')}\n`);
    const replay = replayProvider(file);
    await runWith(replay, root);
    expect(replay.mismatch?.message).toBe('the request differs from the recording at max_tokens (agent root/quick, request 1)');
  });

  it('the recording holds no key and no value of a *_KEY/*_TOKEN/*_SECRET variable, wherever it appeared', async () => {
    const root = workdir();
    const token = 'tok-5f2e9a81c4d7b3e6';
    writeFileSync(join(root, 'notes.md'), `the deploy token is ${token}\n`);
    const file = join(root, 'run.recording.jsonl');
    const recorded = await record(root, file, Redactor.fromEnv({ DEPLOY_TOKEN: token, ANTHROPIC_API_KEY: 'test-key-never-recorded' }));
    // The token did travel: the reader read it and replied with it.
    expect(JSON.stringify(recorded.requests.map((r) => r.body))).toContain(token);
    const text = readFileSync(file, 'utf8');
    expect(text).not.toContain(token);
    expect(text).not.toContain('test-key-never-recorded');
    expect(text).toContain('[redacted]');
    // Replayed with the same secret in the environment, the redacted requests still match.
    const replay = replayProvider(file, { redactor: Redactor.fromEnv({ DEPLOY_TOKEN: token }) });
    await runWith(replay, root);
    expect(replay.mismatch).toBeUndefined();
  });

  it('a file that is not a recording is one line', () => {
    const root = workdir();
    expect(() => replayProvider(join(root, 'missing.jsonl'))).toThrow(
      new RecordingError('unreadable', `cannot read the recording ${join(root, 'missing.jsonl')}: no such file`),
    );
    writeFileSync(join(root, 'trace.jsonl'), '{"kind":"trace.start"}\n');
    expect(() => replayProvider(join(root, 'trace.jsonl'))).toThrow(/is not an exarch recording \(made by exarch run --record\)$/);
  });

  it('a recording grows with the run, not with the square of it: each exchange keeps what is new', async () => {
    const root = workdir();
    writeFileSync(join(root, 'notes.md'), 'x'.repeat(2000));
    const file = join(root, 'long.recording.jsonl');
    const steps = 40;
    server = await startAnthropicServer(
      scriptedHandler({
        root: [
          ...Array.from({ length: steps }, () => stream({ toolCalls: [{ name: 'read_file', input: { path: 'notes.md' } }] })),
          stream({ text: 'Read it 40 times.' }),
        ],
      }),
    );
    const provider = new AnthropicProvider({
      apiKey: 'test-key',
      baseURL: server.url,
      model: 'claude-test',
      sdkMaxRetries: 0,
      record: { file, redactor: new Redactor([]) },
    });
    await runAgent('Read notes.md over and over.', { provider, tools: workspaceTools({ root }) });
    const sent = server.requests.map((r) => JSON.stringify(r.body.messages).length);
    const lines = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .slice(1)
      .map((line) => line.length);
    expect(lines).toHaveLength(steps + 1);
    // The histories sent grew by some 2 kB a step; the lines recorded after the first did not.
    expect((sent.at(-1) ?? 0) - (sent[1] ?? 0)).toBeGreaterThan(70_000);
    expect(Math.max(...lines.slice(2))).toBeLessThan(2 * (lines[1] ?? 0));
    const replayed = await runAgent('Read notes.md over and over.', { provider: replayProvider(file), tools: workspaceTools({ root }) });
    expect(replayed.text).toBe('Read it 40 times.');
  });
});
