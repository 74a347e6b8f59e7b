import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionActor, defineTool, waitForSettled } from '../../../src/index.js';
import { RunObserver } from '../../../src/watch/observe/runObserver.js';
import { Redactor } from '../../../src/engine/redact.js';
import { scriptedProvider } from '../../../src/testing/index.js';
import type { TraceRecord } from '../../../src/watch/trace/format.js';
import { parseTrace } from '../../../src/watch/trace/readTrace.js';
import { TraceRecorder } from '../../../src/watch/trace/recorder.js';
import { serveViewer, startLiveViewer, type LiveViewer } from '../../../src/watch/viewer/liveServer.js';

/**
 * The live viewer's server (src/watch/viewer/liveServer.ts), over real HTTP on 127.0.0.1: what it
 * streams and serves while a scripted run goes and after it ended. The page itself, in a browser,
 * is test/e2e/watch/viewerLive.browser.test.ts.
 */

const SECRET = 'sk-live-viewer-secret-0123456789';
const closers: (() => Promise<void>)[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
}

/** A GET with these headers; for an event stream, the body until `until` says it has enough (then the connection is dropped). */
function get(url: string, headers: Record<string, string> = {}, until?: (body: string) => boolean): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
        if (until?.(body)) {
          req.destroy();
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body });
        }
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
    });
    req.on('error', (error) => (until ? undefined : reject(error)));
    req.end();
  });
}

/** `path` (with its own query) on the viewer at `url`, with the token `url` carries. */
function at(url: string, path: string): string {
  const page = new URL(url);
  const target = new URL(path, page);
  target.searchParams.set('token', page.searchParams.get('token') ?? '');
  return target.href;
}

/** Server-sent events of a body: `id`, `event` (default `message`) and `data` of each. */
function events(body: string): { id?: number; event: string; data: string }[] {
  return body
    .split('\n\n')
    .filter((block) => block.trim() !== '')
    .map((block) => {
      const fields = new Map(block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trimStart()] as const));
      const id = fields.get('id');
      return { ...(id === undefined ? {} : { id: Number(id) }), event: fields.get('event') ?? 'message', data: fields.get('data') ?? '' };
    });
}

/** A root that spawns `worker`, whose `hold` call waits until the test lets it go. */
function heldRun() {
  let release = (): void => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  let entered = (): void => undefined;
  const holding = new Promise<void>((resolve) => (entered = resolve));
  const hold = defineTool({
    name: 'hold',
    description: 'Waits for the test',
    input: z.object({}),
    run: async () => {
      entered();
      await gate;
      return 'let go';
    },
  });
  const provider = scriptedProvider({
    agents: {
      root: [
        {
          calls: [
            { name: 'agent', input: { name: 'worker', task: `Work (the key is ${SECRET})` } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { text: 'all done' },
      ],
      worker: [{ calls: [{ name: 'hold', input: {} }] }, { calls: [{ name: 'reply', input: { result: 'worked' } }] }],
    },
  });
  const actor = createSessionActor({ provider, tools: [hold], task: 'Get it done' });
  return { actor, release, holding };
}

async function started(options: Parameters<typeof startLiveViewer>[0] = {}): Promise<LiveViewer> {
  const viewer = await startLiveViewer({ redactor: new Redactor([SECRET]), ...options });
  closers.push(() => viewer.close());
  return viewer;
}

describe('the live viewer server', () => {
  it('streams each record as it happens, resumes after the last id a browser got, and says when the run ended', async () => {
    const { actor, release, holding } = heldRun();
    const viewer = await started({ title: 'held' });
    const observer = new RunObserver();
    observer.subscribe(viewer.onEvent);
    observer.attach(actor);
    expect(viewer.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{43}$/);
    actor.start();
    await holding;

    // The run so far: the worker is in its batch, held.
    const first = await get(at(viewer.url, 'events?from=0'), {}, (body) =>
      events(body).some((e) => e.data.includes('"state":"dispatchingBatch"') && e.data.includes('root/worker')),
    );
    expect(first.status).toBe(200);
    expect(first.headers['content-type']).toBe('text/event-stream; charset=utf-8');
    const seen = events(first.body);
    expect(seen.map((e) => e.id)).toEqual(seen.map((_, i) => i));
    const records = seen.map((e) => JSON.parse(e.data) as TraceRecord);
    expect(records[0]).toMatchObject({ kind: 'trace.start', title: 'held' });
    expect(records.filter((r) => r.kind === 'agent.start').map((r) => r.kind === 'agent.start' && r.agent)).toEqual(['root', 'root/worker']);
    expect(records.some((r) => r.kind === 'agent.end')).toBe(false);
    // Redacted as it is streamed.
    expect(first.body).not.toContain(SECRET);
    expect(first.body).toContain('[redacted]');

    // A browser that reconnects says the last id it got: it is sent what came after, nothing twice.
    const last = seen.length - 1;
    const rest = get(at(viewer.url, 'events?from=0'), { 'last-event-id': String(last - 2) }, (body) => events(body).some((e) => e.event === 'end'));
    release();
    await waitForSettled(actor);
    actor.stop();
    await new Promise((resolve) => setImmediate(resolve));
    viewer.end();
    const resumed = events((await rest).body);
    expect(resumed[0]?.id).toBe(last - 1);
    expect(resumed.at(-1)).toEqual({ event: 'end', data: '' });
    const all = [...records.slice(0, last - 1), ...resumed.slice(0, -1).map((e) => JSON.parse(e.data) as TraceRecord)];
    expect(all.at(-1)?.kind).toBe('trace.end');
    expect(all.filter((r) => r.kind === 'agent.end').map((r) => r.kind === 'agent.end' && [r.agent, r.outcome ?? r.status])).toEqual([
      ['root/worker', 'replied'],
      ['root', 'stopped'],
    ]);

    // Once ended: the trace as exarch view reads it, a page made from it that follows nothing, and the whole stream, then its end.
    const trace = await get(at(viewer.url, 'trace.jsonl'));
    expect(parseTrace(trace.body)).toEqual(all);
    const page = await get(viewer.url);
    expect(page.status).toBe(200);
    expect(page.body).toContain('img-src data:">');
    expect(page.body).not.toContain('connect-src');
    expect(page.body).not.toContain('"live":');
    const again = events((await get(at(viewer.url, 'events'))).body);
    expect(again.length).toBe(all.length + 1);
  });

  it('serves a live page while the run goes: the run so far, and where the rest streams from', async () => {
    const { actor, release, holding } = heldRun();
    const served = await serveViewer(actor, { redactor: new Redactor([SECRET]) });
    closers.push(() => served.close());
    actor.start();
    await holding;
    const page = await get(served.url);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.body).toContain(`connect-src 'self'`);
    expect(page.body).toContain(`"live":{"events":"events?token=${new URL(served.url).searchParams.get('token')}"}`);
    expect(page.body).toContain('"agent":"root/worker"');
    expect(page.body).not.toContain(SECRET);
    release();
    await waitForSettled(actor);
    actor.stop();
    // The root's end ends the page's run, after the sub-agents' ends its stop reported.
    await served.ended;
    const records = parseTrace((await get(at(served.url, 'trace.jsonl'))).body);
    expect(records.at(-1)?.kind).toBe('trace.end');
    expect(records.filter((r) => r.kind === 'agent.end')).toHaveLength(2);
  });

  it('records a run as the trace recorder does', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-live-'));
    dirs.push(dir);
    const file = join(dir, 'trace.jsonl');
    const { actor, release, holding } = heldRun();
    const viewer = await started({ title: 'same' });
    const recorder = new TraceRecorder({ file, title: 'same', redactor: new Redactor([SECRET]) });
    const observer = new RunObserver();
    observer.subscribe(viewer.onEvent);
    observer.subscribe(recorder.onEvent);
    observer.attach(actor);
    actor.start();
    await holding;
    release();
    await waitForSettled(actor);
    actor.stop();
    await new Promise((resolve) => setImmediate(resolve));
    viewer.end();
    recorder.close();
    const untimed = (records: TraceRecord[]) => records.map(({ t: _t, ...rest }) => (rest.kind === 'trace.start' ? { ...rest, startedAt: '' } : rest));
    expect(untimed(parseTrace((await get(at(viewer.url, 'trace.jsonl'))).body))).toEqual(untimed(parseTrace(readFileSync(file, 'utf8'))));
  });

  it('answers pages of this machine only, and only GET', async () => {
    const viewer = await started();
    const port = new URL(viewer.url).port;
    // A DNS-rebinding page reaches 127.0.0.1 under its own name.
    expect((await get(viewer.url, { host: `evil.example:${port}` })).status).toBe(403);
    expect((await get(viewer.url, { host: `localhost:${port}` })).status).toBe(200);
    expect((await get(at(viewer.url, 'nothing'))).status).toBe(404);
    const post = await new Promise<number>((resolve, reject) => {
      const req = request(viewer.url, { method: 'POST' }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });
    expect(post).toBe(405);
  });

  it('says in one line when its port is taken', async () => {
    const first = await started();
    const port = Number(new URL(first.url).port);
    await expect(startLiveViewer({ port })).rejects.toThrow(`the live viewer cannot listen on 127.0.0.1:${port}: the port is in use; choose another`);
  });
});
