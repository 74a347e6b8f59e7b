import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { responseEvents, scriptedHandler, startAnthropicServer, type SseEvent } from '../../support/anthropicServer.js';
import { call, exarch, serve, stream, workdir } from '../../support/cliHarness.js';
import { expectOneLine } from '../../support/oneLine.js';

/**
 * Issue 37, "internal error text never reaches a user", recordings and stream events: a recording
 * whose lines are of the wrong shape used to be read as far as its first line's `kind`, and failed
 * the run later with JavaScript's words (`Cannot read properties of undefined (reading 'usage')`,
 * `s.isWellFormed is not a function`, `Invalid typed array length`) or a made-up difference from
 * the recording. Now `exarch run --replay` refuses it before the run starts, in one line naming the
 * line and what is wrong with it. A live server's event of the wrong shape is a broken stream, said
 * as one (it was "connection lost mid-stream: Cannot read properties of undefined").
 */

type Line = Record<string, unknown> & { events: Record<string, unknown>[] };

let recorded: { readonly dir: string; readonly lines: readonly string[] };

beforeAll(async () => {
  // The recording lives across the file's tests (workdir() would remove it after the first).
  const dir = mkdtempSync(join(tmpdir(), 'exarch-recording-'));
  writeFileSync(join(dir, 'notes.md'), 'hello\n');
  const server = await startAnthropicServer(
    scriptedHandler({ root: [stream({ text: 'Reading.', toolCalls: [call('read_file', { path: 'notes.md' })] }), stream({ text: 'It says hello.' })] }),
  );
  try {
    const run = await exarch(['run', '--no-store', '--record', 'run.recording.jsonl', 'Read notes.md'], { server, cwd: dir });
    expect(run.code, run.stderr).toBe(0);
  } finally {
    await server.close();
  }
  recorded = { dir, lines: readFileSync(join(dir, 'run.recording.jsonl'), 'utf8').trim().split('\n') };
  return () => rmSync(dir, { recursive: true, force: true });
});

/** The recording with `change` made to its first exchange (line 2) or, given `line`, another (a string: the line's text); replayed offline. */
async function replayChanged(change: (exchange: Line) => unknown, line = 2) {
  const cwd = workdir();
  writeFileSync(join(cwd, 'notes.md'), 'hello\n');
  const changed = (text: string): string => {
    const value = change(JSON.parse(text) as Line);
    return typeof value === 'string' ? value : JSON.stringify(value);
  };
  const lines = recorded.lines.map((text, i) => (i === line - 1 ? changed(text) : text));
  writeFileSync(join(cwd, 'run.recording.jsonl'), `${lines.join('\n')}\n`);
  return exarch(['run', '--no-store', '--replay', 'run.recording.jsonl', 'Read notes.md'], { cwd, env: { ANTHROPIC_BASE_URL: 'http://127.0.0.1:9' } });
}

/** Each event of the exchange of `type` changed by `change`. */
const eventsOf =
  (type: string, change: (event: Record<string, unknown>) => unknown) =>
  (exchange: Line): Line => ({ ...exchange, events: exchange.events.map((event) => (event['type'] === type ? change(event) : event)) as Line['events'] });

/** `n` nested objects as JSON text: `{"a":{"a":…1…}}` (too deep for JSON.stringify to write). */
const nested = (n: number): string => `${'{"a":'.repeat(n)}1${'}'.repeat(n)}`;

describe('exarch run --replay of a recording of the wrong shape', () => {
  /** What a recorded answer that a replay would fail on is said as. */
  const broke = (what: string): string => `its answer would fail: the server's stream broke the protocol: ${what}`;
  const cases: [string, (exchange: Line) => unknown, string, number?][] = [
    [
      'a message_start without its message',
      eventsOf('message_start', () => ({ type: 'message_start' })),
      broke('a message_start without the usage of a message'),
    ],
    ['a delta that is null', eventsOf('content_block_delta', (e) => ({ ...e, delta: null })), broke('a content_block_delta without a delta')],
    ['a message_delta without its delta', eventsOf('message_delta', () => ({ type: 'message_delta' })), broke('a message_delta without a delta')],
    [
      'a tool call whose id is a number',
      eventsOf('content_block_start', (e) =>
        (e['content_block'] as { type: string }).type === 'tool_use' ? { ...e, content_block: { type: 'tool_use', id: 7, name: null } } : e,
      ),
      broke('a tool_use block 1 without its id and name'),
    ],
    ['events that are not objects', (e) => ({ ...e, events: [null, 5, 'x'] }), broke('an event that is not an object with a type')],
    ['events out of order', (e) => ({ ...e, events: [...e.events].reverse() }), broke('a content_block_stop for block 1, which never started')],
    [
      'a block numbered past the others',
      eventsOf('content_block_start', (e) => ({ ...e, index: 1_000_000_000 })),
      broke('a content_block_start for block 1000000000, past the 1000000 blocks a message may hold'),
    ],
    ['a place in the order past any', (e) => ({ ...e, end: 2 ** 40 }), "its place in the run's order is past its end"],
    ['a negative count of messages kept', (e) => ({ ...e, keep: -1 }), 'the messages it keeps are not a count', 3],
    [
      'a message nested 100,000 levels deep',
      (e) => JSON.stringify({ ...e, messages: ['DEEP'] }).replace('"DEEP"', nested(100_000)),
      'it nests deeper than 256 levels',
    ],
  ];

  it.each(cases)('%s: one line naming the line, before the run starts', async (_what, change, problem, line = 2) => {
    const replayed = await replayChanged(change, line);
    expect(replayed.code).toBe(1);
    expect(replayed.stdout).toBe('');
    expect(expectOneLine(replayed.stderr, /recording|recorded exchange/)).toBe(
      `exarch: run.recording.jsonl: line ${line} is not a recorded exchange (${problem})`,
    );
  });

  it('a header without its model and output cap: one line naming it', async () => {
    const replayed = await replayChanged((header) => ({ ...header, model: 5, maxTokens: 'x' }), 1);
    expect(replayed.code).toBe(1);
    expectOneLine(replayed.stderr, /^exarch: run\.recording\.jsonl: line 1, its header, names no model and output cap$/);
  });
});

describe('a live server’s event of the wrong shape', () => {
  it('is a broken stream, retried, and said as one when the retries are spent', async () => {
    const broken: SseEvent[] = [{ event: 'message_start', data: { type: 'message_start' } }, ...responseEvents({ text: 'fine' }).slice(1)];
    // The first attempt and the session's four retries.
    const server = await serve({ root: Array.from({ length: 5 }, () => ({ kind: 'stream' as const, events: broken })) });
    const run = await exarch(['run', '--no-store', 'go'], { server });
    expect(run.code, run.stderr).toBe(1);
    expect(server.requests).toHaveLength(5);
    expectOneLine(
      run.stderr,
      /^exarch: the root agent failed: the server's stream broke the protocol: a message_start without the usage of a message \(gave up after 5 attempts\)$/,
    );
  });
});
