import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { request, type IncomingMessage } from 'node:http';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { STALL_LIMIT_BYTES } from '../../../src/watch/viewer/stallWatch.js';

/**
 * Issue 37: the live viewer grew without bound for clients that do not read. 60 of them grew the
 * process by 1.35 GB and held a reading client up 15 s, because each event stream, page and
 * trace download was written whole into its socket's buffer, whatever the socket took, and each
 * page load rendered the run again. Now every body is written with backpressure, and an event
 * stream that took nothing while the run went on is dropped, its browser reconnecting where it
 * left off.
 *
 * The server runs alone in a child process (test/fixtures/liveViewerChild.ts), so what its
 * clients cost it can be weighed (after full collections): the oracle is the process's live
 * memory, not anything the server reports.
 */

const CHILD = fileURLToPath(new URL('../../fixtures/liveViewerChild.ts', import.meta.url));
const REPO = fileURLToPath(new URL('../../..', import.meta.url));
const MiB = 1024 * 1024;
/** Record size: 100 KiB each (a long tool result, say). */
const CHARS = 100 * 1024;
/** The run before the slow clients come: more than a loopback socket's kernel buffers take (about 4 MiB), so they stall at once. */
const BEFORE = 120;
/** What the run adds while they stall, in rounds: far more than the 4 MiB after which a stream that takes nothing is dropped. */
const ROUNDS = 20;
const PER_ROUND = 10;
/** Clients that stop reading after the response's headers, per address. */
const STALLED = 4;

const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const cleanup of cleanups.splice(0)) cleanup();
});

interface Memory {
  readonly rss: number;
  readonly heapUsed: number;
  readonly external: number;
}

/** The server's process: a command, its one-line answer. */
async function serverProcess(): Promise<{ url: string; ask: (command: object) => Promise<Record<string, unknown>> }> {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, ['--expose-gc', '--import', 'jiti/register', CHILD], {
    cwd: REPO,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  cleanups.push(() => child.kill('SIGKILL'));
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const lines = createInterface({ input: child.stdout })[Symbol.asyncIterator]();
  const next = async (): Promise<Record<string, unknown>> => {
    const line = await lines.next();
    if (line.done === true) throw new Error(`the server's process ended: ${stderr}`);
    return JSON.parse(line.value) as Record<string, unknown>;
  };
  const { url } = (await next()) as { url: string };
  return {
    url,
    ask: async (command) => {
      child.stdin.write(`${JSON.stringify(command)}\n`);
      return next();
    },
  };
}

/** `path` on the viewer at `url`, with the token `url` carries. */
function at(url: string, path: string, headers: Record<string, string> = {}): Promise<IncomingMessage> {
  const page = new URL(url);
  const target = new URL(path, page);
  target.searchParams.set('token', page.searchParams.get('token') ?? '');
  return new Promise((resolve, reject) => {
    // A connection of its own each, as separate browsers have.
    const req = request(target, { agent: false, headers }, resolve);
    req.on('error', reject);
    req.end();
  });
}

/** The rest of a response's body, and whether it came whole (`complete`) or the server cut the connection. */
function rest(response: IncomingMessage): Promise<{ body: Buffer; complete: boolean }> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.on('error', () => undefined);
    response.on('close', () => resolve({ body: Buffer.concat(chunks), complete: response.complete }));
  });
}

/** The whole server-sent events of a body: ids and record texts of the records, and whether `end` came. */
function eventsOf(text: string): { ids: number[]; texts: string[]; ended: boolean } {
  const ids: number[] = [];
  const texts: string[] = [];
  let ended = false;
  // Only whole events: a cut connection can leave half of one, which a browser drops too.
  for (const block of text.split('\n\n').slice(0, -1)) {
    if (block === 'event: end\ndata: ') ended = true;
    const match = /^id: (\d+)\ndata: (.*)$/s.exec(block);
    if (match === null) continue;
    ids.push(Number(match[1]));
    const record = JSON.parse(match[2] ?? '') as { message?: { content?: { text?: string }[] } };
    texts.push(record.message?.content?.[0]?.text?.slice(0, 40) ?? '');
  }
  return { ids, texts, ended };
}

/** A page that reads: every event as it comes, and a wait for the n-th. */
function follower(response: IncomingMessage): { text: () => string; has: (records: number) => Promise<void>; closed: Promise<void> } {
  const chunks: string[] = [];
  /** Events so far: each ends in a blank line, which a JSON line never holds. */
  let count = 0;
  let last = '';
  const waits: { records: number; resolve: () => void }[] = [];
  response.setEncoding('utf8');
  response.on('data', (chunk: string) => {
    chunks.push(chunk);
    // Counted in the new chunk only (and the character before it): the body is tens of MB.
    const text = last + chunk;
    last = chunk.slice(-1);
    for (let at = text.indexOf('\n\n'); at !== -1; at = text.indexOf('\n\n', at + 2)) count++;
    for (const wait of waits.splice(0)) {
      if (count >= wait.records) wait.resolve();
      else waits.push(wait);
    }
  });
  const closed = new Promise<void>((resolve) => response.on('close', () => resolve()));
  return {
    text: () => chunks.join(''),
    has: (records) => new Promise<void>((resolve) => (count >= records ? resolve() : waits.push({ records, resolve }))),
    closed,
  };
}

/**
 * The run so far (`BEFORE` records), a page that reads it all, `STALLED` clients each of the
 * event stream, the page and the trace that stop reading after the headers, then `ROUNDS` more
 * rounds of records, each read by the reading page before the next: the server weighed before
 * the stalled clients came and after the rounds.
 */
async function stalledWhileTheRunGoesOn() {
  // The scenario is sized to the limit: the run grows by several times what a stalled client may miss.
  expect(ROUNDS * PER_ROUND * CHARS).toBeGreaterThan(4 * STALL_LIMIT_BYTES);
  const server = await serverProcess();
  await server.ask({ push: BEFORE, chars: CHARS });
  const reading = follower(await at(server.url, 'events?from=0'));
  await reading.has(1 + BEFORE);
  // The page once, so it is rendered before the weighing starts.
  const page = await at(server.url, '');
  const pageBytes = (await rest(page)).body.length;
  expect(page.statusCode).toBe(200);
  const before = (await server.ask({ memory: true })) as unknown as Memory;

  // Responses left paused: their clients read nothing more than the headers (and what a socket's read brings with them).
  const stalled = { events: [] as IncomingMessage[], page: [] as IncomingMessage[], trace: [] as IncomingMessage[] };
  for (let i = 0; i < STALLED; i++) {
    stalled.events.push(await at(server.url, 'events?from=0'));
    stalled.page.push(await at(server.url, ''));
    stalled.trace.push(await at(server.url, 'trace.jsonl'));
  }
  const traceBytes = Number(stalled.trace[0]?.headers['content-length']);

  for (let round = 0; round < ROUNDS; round++) {
    await server.ask({ push: PER_ROUND, chars: CHARS });
    await reading.has(1 + BEFORE + (round + 1) * PER_ROUND);
  }
  const after = (await server.ask({ memory: true })) as unknown as Memory;
  return { server, reading, stalled, before, after, pageBytes, traceBytes, total: 1 + BEFORE + ROUNDS * PER_ROUND };
}

describe('the live viewer with clients that stop reading', () => {
  it('holds at most a little for each (before: the rest of what each asked for, about 270 MB here)', async () => {
    const { before, after } = await stalledWhileTheRunGoesOn();
    const grown = ROUNDS * PER_ROUND * CHARS;
    const clients = 3 * STALLED;
    // Live memory beyond the records the server was given (which it keeps): at most 1 MiB a
    // stalled client, for a chunk of 64 KiB and the socket's high-water mark, with room to spare.
    const held = after.heapUsed + after.external - (before.heapUsed + before.external) - grown;
    expect(held, `held ${(held / MiB).toFixed(1)} MiB for ${clients} clients that do not read`).toBeLessThan(clients * MiB);
    const resident = after.rss - before.rss - grown;
    expect(resident, `resident ${(resident / MiB).toFixed(1)} MiB more`).toBeLessThan(clients * 2 * MiB);
  });

  it('drops each client that took nothing while the run went on; the reading page gets every record; a dropped page resumes where it was', async () => {
    const { server, reading, stalled, pageBytes, traceBytes, total } = await stalledWhileTheRunGoesOn();
    await server.ask({ end: true });
    await reading.closed;
    const seen = eventsOf(reading.text());
    expect(seen.ids).toEqual([...Array(total).keys()]);
    expect(seen.texts.slice(1)).toEqual([...Array(total - 1).keys()].map((i) => `record ${i + 1} `.padEnd(40, 'x')));
    expect(seen.ended).toBe(true);

    for (const response of stalled.events) {
      // Cut by the server before the run ended (before, each was sent every record and the end).
      const got = await rest(response);
      const cut = eventsOf(got.body.toString('utf8'));
      expect(got.complete, 'the stalled event stream was cut by the server').toBe(false);
      expect(cut.ended).toBe(false);
      expect(cut.ids.length).toBeLessThan(total);
      expect(cut.ids).toEqual([...Array(cut.ids.length).keys()]);
      // Its browser reconnects with the last id it got and is sent the rest: it loses nothing.
      const resumed = eventsOf((await rest(await at(server.url, 'events?from=0', { 'last-event-id': String(cut.ids.length - 1) }))).body.toString('utf8'));
      expect([...cut.ids, ...resumed.ids]).toEqual([...Array(total).keys()]);
      expect(resumed.ended).toBe(true);
    }
    // The page and the trace were cut too, short of their length.
    for (const [responses, length] of [
      [stalled.page, pageBytes],
      [stalled.trace, traceBytes],
    ] as const) {
      for (const response of responses) {
        const got = await rest(response);
        expect(got.complete, 'a stalled download was cut by the server').toBe(false);
        expect(got.body.length).toBeLessThan(length);
      }
    }
  });
});
