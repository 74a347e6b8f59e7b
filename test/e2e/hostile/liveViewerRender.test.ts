import { afterEach, describe, expect, it, vi } from 'vitest';
import { Redactor } from '../../../src/engine/redact.js';
import { startTraceServer, type TraceServer } from '../../../src/watch/viewer/liveServer.js';

/**
 * Issue 37: each load of the live viewer's page rendered the whole run again (12 MB for a big
 * one), so a few reloads, or a few tabs, cost the server as much as the run itself. Now the page
 * is rendered once per change of the trace and served from there until the next record.
 *
 * The oracle counts calls of the real renderer (html.ts's `renderViewerHtml`, wrapped here, still
 * doing all its work), not anything the server says about itself.
 */

const renders = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../../src/watch/viewer/html.js', async (importOriginal) => {
  const real = await importOriginal<typeof import('../../../src/watch/viewer/html.js')>();
  return {
    ...real,
    renderViewerHtml: (...args: Parameters<typeof real.renderViewerHtml>) => {
      renders.count++;
      return real.renderViewerHtml(...args);
    },
  };
});

const closers: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
});

/** `path` on the viewer, with its token. */
async function get(server: TraceServer, path: string): Promise<string> {
  const target = new URL(path, server.url);
  target.searchParams.set('token', server.token);
  const response = await fetch(target);
  expect(response.status).toBe(200);
  return response.text();
}

const statechart = { initial: 'idle', states: [{ id: 'idle', final: false }], transitions: [] };

describe('the live viewer page', () => {
  it('is rendered once per change of the run, however many times it is loaded', async () => {
    const server = await startTraceServer({ redactor: new Redactor([]) });
    closers.push(() => server.close());
    server.push({ t: 0, kind: 'trace.start', version: 1, startedAt: new Date(0).toISOString(), title: 'rendered', statechart });
    for (let i = 0; i < 50; i++)
      server.push({
        t: i,
        kind: 'message',
        agent: 'root',
        index: i,
        message: { role: 'user', content: [{ type: 'text', text: `message ${i} ${'y'.repeat(2000)}` }] },
      });
    renders.count = 0;

    // Ten loads at once and five more after: one render, the same page each time.
    const pages = await Promise.all(Array.from({ length: 10 }, () => get(server, '')));
    for (let i = 0; i < 5; i++) pages.push(await get(server, i % 2 === 0 ? '' : 'index.html'));
    expect(renders.count).toBe(1);
    expect(new Set(pages).size).toBe(1);
    expect(pages[0]).toContain('message 49 ');
    expect(pages[0]).not.toContain('message 50 ');

    // The stream and the trace render nothing.
    await get(server, 'trace.jsonl');
    expect(renders.count).toBe(1);

    // A record: the next load renders once more, and shows it.
    server.push({ t: 50, kind: 'message', agent: 'root', index: 50, message: { role: 'user', content: [{ type: 'text', text: 'message 50 arrives' }] } });
    const changed = [await get(server, ''), await get(server, ''), await get(server, '')];
    expect(renders.count).toBe(2);
    expect(changed[0]).toContain('message 50 arrives');
    expect(new Set(changed).size).toBe(1);

    // The run ended: the page is the offline one (it follows nothing), rendered once more.
    server.end();
    const ended = [await get(server, ''), await get(server, '')];
    expect(renders.count).toBe(3);
    expect(ended[0]).not.toContain('"live":');
    expect(ended[1]).toBe(ended[0]);
  });
});
