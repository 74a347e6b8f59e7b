import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { runCommand } from '../../../src/cli/run.js';
import { createSessionActor, defineTool, waitForSettled } from '../../../src/index.js';
import { scriptedProvider, type ScriptedProviderOptions } from '../../../src/testing/index.js';
import type { ModelRequest, Provider, StreamSink } from '../../../src/engine/types.js';
import { Redactor } from '../../../src/engine/redact.js';
import { serveViewer, startTraceServer } from '../../../src/watch/viewer/liveServer.js';
import { writeViewer } from '../../../src/watch/viewer/write.js';
import { browserForTests } from '../../support/browser.js';

/**
 * The live viewer in a real browser (headless Chromium, found as in test/e2e/watch/viewer.browser.test.ts):
 * a page opened while a scripted run is held at a known point shows the run so far, follows it as
 * it goes on (the same page, never reloaded), and once the run has ended is the page `exarch view`
 * makes from the run's trace. Without a browser a local run skips this file with one line.
 */
const CHROMIUM = browserForTests('test/e2e/watch/viewerLive.browser.test.ts');

interface PageNode {
  readonly innerHTML: string;
  readonly outerHTML: string;
  readonly textContent: string | null;
}
declare const document: { getElementById(id: string): PageNode | null; querySelector(selector: string): PageNode | null };
declare const window: { readonly exarchViewer: { readonly records: number } };

const RESULTS = join(process.cwd(), 'test-results');

let browser: BrowserContext;
let dir: string;

beforeAll(async () => {
  if (CHROMIUM === undefined) return;
  dir = mkdtempSync(join(tmpdir(), 'exarch-live-browser-'));
  browser = await chromium.launchPersistentContext(join(dir, 'profile'), {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1440, height: 960 },
    args: [
      '--no-sandbox',
      '--headless',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A page on `url`; fails the test on any page error or a request to anywhere but `origin`; `requests` are the addresses it asked for. */
async function open(url: string): Promise<{ page: Page; errors: string[]; foreign: string[]; requests: string[] }> {
  const page = await browser.newPage();
  await page.setViewportSize({ width: 1440, height: 960 });
  const errors: string[] = [];
  const foreign: string[] = [];
  const requests: string[] = [];
  const origin = url.startsWith('file:') ? 'file:' : new URL(url).origin;
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('request', (request) => {
    requests.push(request.url());
    if (!request.url().startsWith(origin)) foreign.push(request.url());
  });
  await page.goto(url);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 15_000 });
  return { page, errors, foreign, requests };
}

/** What the page shows: every drawn part of it, as markup (the live badge aside). */
function shown(page: Page): Promise<Record<string, string>> {
  return page.evaluate(() => {
    const html = (id: string): string => document.getElementById(id)?.innerHTML ?? `(no #${id})`;
    return {
      title: html('title'),
      stats: html('stats'),
      legend: html('legend'),
      corner: html('corner'),
      tree: html('tree'),
      axis: html('axis'),
      lanes: html('lanes'),
      range: html('range'),
      details: html('details'),
      chart: html('chart-panel'),
    };
  });
}

/** The tree's rows: agent id and the state or outcome its chip shows. */
function rows(page: Page): Promise<string[][]> {
  return page.$$eval('#tree .row', (nodes) => nodes.map((n) => [n.getAttribute('data-agent') ?? '', n.querySelector('.chip')?.textContent ?? '']));
}

/** Released by the test: the worker's `hold` call waits for it. */
function gate() {
  let release = (): void => undefined;
  const opened = new Promise<void>((resolve) => (release = resolve));
  let entered = (): void => undefined;
  const holding = new Promise<void>((resolve) => (entered = resolve));
  return { release, opened, holding, entered };
}

const usage = { inputTokens: 1000, outputTokens: 200 };
/** The root delegates to `worker` and waits; the worker calls `hold`, then replies. Each request: 1,000 tokens in, 200 out. */
const script: ScriptedProviderOptions['agents'] = {
  root: [
    {
      calls: [
        { name: 'agent', input: { name: 'worker', task: 'Do the work' } },
        { name: 'wait_for_agents', input: {} },
      ],
      usage,
    },
    { text: 'The worker says: **worked**.', usage },
  ],
  worker: [
    { calls: [{ name: 'hold', input: { what: 'the line' } }], usage },
    { calls: [{ name: 'reply', input: { result: '# Worked\n\n- held the line\n- let go' } }], usage },
  ],
};

describe.skipIf(CHROMIUM === undefined)('the live viewer of a run in progress', () => {
  it('shows the run so far, follows it on the same page, and ends as the offline page of its trace', async () => {
    const held = gate();
    const hold = defineTool({
      name: 'hold',
      description: 'Holds until the test lets go',
      input: z.object({ what: z.string() }),
      run: async ({ what }) => {
        held.entered();
        await held.opened;
        return `held ${what}`;
      },
    });
    // The root's first request is held too: the page opens on the root alone.
    const first = gate();
    const actor = createSessionActor({ provider: new HeldProvider(first, 'root', 0), tools: [hold], task: 'Get the work done' });
    const served = await serveViewer(actor, { title: 'live run', model: 'claude-sonnet-4-5' });
    try {
      actor.start();
      await first.holding;
      const live = await open(served.url);
      const { page } = live;
      await page.waitForSelector('body[data-live="open"]');
      expect(await page.locator('#live').innerText()).toBe('live');
      expect(await rows(page)).toEqual([['root', 'streaming']]);
      // The page asks for the rest of the run with the token of the address it was opened at.
      const token = new URL(served.url).searchParams.get('token') ?? '';
      const streams = live.requests.filter((url) => new URL(url).pathname === '/events');
      expect(streams.length).toBeGreaterThan(0);
      for (const url of streams) expect(new URL(url).searchParams.get('token')).toBe(token);
      // The same address without the token: refused, and nothing of the run.
      const stranger = await browser.newPage();
      const refused = await stranger.goto(new URL(served.url).origin);
      expect(refused?.status()).toBe(403);
      expect(await stranger.locator('body').innerText()).not.toContain('root');
      await stranger.close();

      // The root spawns the worker, which is held in its batch: it appears on the page, and nothing has ended.
      first.release();
      await held.holding;
      await expect
        .poll(() => rows(page))
        .toEqual([
          ['root', 'waitingForAgents'],
          ['root/worker', 'dispatchingBatch'],
        ]);
      expect(await page.locator('#lanes .lane[data-agent="root/worker"] .bar[data-state="dispatchingBatch"]').count()).toBe(1);
      expect(await page.locator('#lanes .bar.final').count()).toBe(0);
      // The call it is held in, with its input and no result yet.
      await page.locator('#lanes .lane[data-agent="root/worker"] .bar[data-state="streaming"]').click();
      const call = page.locator('#details .call').filter({ hasText: 'calls hold' });
      expect(await call.innerText()).toContain('"what": "the line"');
      expect(await call.innerText()).toContain('not back yet');

      mkdirSync(RESULTS, { recursive: true });
      await page.mouse.move(1, 1);
      await page.screenshot({ path: join(RESULTS, 'viewer-live.png') });

      // Let go: the same page (not reloaded) shows the worker reply and the root answer.
      const before = await page.evaluate(() => window.exarchViewer.records);
      held.release();
      await expect
        .poll(() => rows(page), { timeout: 15_000 })
        .toEqual([
          ['root', 'readyForUser'],
          ['root/worker', 'replied'],
        ]);
      expect(await page.locator('#lanes [data-kind="delivery"][data-child="root/worker"]').count()).toBe(1);
      await waitForSettled(actor);
      actor.stop();
      await served.ended;
      await page.waitForSelector('body[data-live="ended"]');
      expect(await page.locator('#live').innerText()).toBe('run ended');
      const after = await page.evaluate(() => window.exarchViewer.records);
      expect(after).toBeGreaterThan(before);

      // Costs at list prices (Sonnet: $3 in, $15 out per million): each agent made 2 requests of 1,000 in and 200 out.
      expect(await page.locator('#tree .row[data-agent="root"] .meta').innerText()).toBe('2 req · 2.4k tok · $0.012');
      expect(await page.locator('#stats').innerText()).toContain('$0.024 at list prices');
      await page.locator('#lanes .lane[data-agent="root/worker"] .bar[data-state="streaming"]').first().click();
      expect(await page.locator('#details .sub').innerText()).toContain('step 1 · $0.006');

      // The offline page of the same run's trace (what `exarch view` writes), opened beside it.
      const traceUrl = new URL('trace.jsonl', served.url);
      traceUrl.searchParams.set('token', new URL(served.url).searchParams.get('token') ?? '');
      const response = await page.request.get(traceUrl.href);
      const traceFile = join(dir, 'live.trace.jsonl');
      writeFileSync(traceFile, await response.text());
      const htmlFile = join(dir, 'live.html');
      writeViewer(traceFile, htmlFile);
      const offline = await open(pathToFileURL(htmlFile).href);
      // The same clicks on both: a delivery (the time cursor goes to it), then the root's tree row.
      for (const p of [page, offline.page]) {
        await p.locator('#zoom-fit').click();
        await p.locator('#lanes [data-kind="delivery"][data-child="root/worker"]').click();
        await p.mouse.move(1, 1);
      }
      const [liveDelivery, offlineDelivery] = await Promise.all([shown(page), shown(offline.page)]);
      expect(liveDelivery['details']).toContain('Worked');
      expect(liveDelivery['lanes']?.length).toBeGreaterThan(1000);
      for (const part of Object.keys(offlineDelivery)) expect(liveDelivery[part], part).toBe(offlineDelivery[part]);
      for (const p of [page, offline.page]) {
        await p.locator('#tree .row[data-agent="root"]').click();
        await p.mouse.move(1, 1);
      }
      const [liveRoot, offlineRoot] = await Promise.all([shown(page), shown(offline.page)]);
      expect(liveRoot['details']).toContain('model requests');
      expect(liveRoot).toEqual(offlineRoot);

      expect([...live.errors, ...offline.errors]).toEqual([]);
      expect([...live.foreign, ...offline.foreign]).toEqual([]);
    } finally {
      first.release();
      held.release();
      actor.stop();
      await served.close();
    }
  });
});

describe.skipIf(CHROMIUM === undefined)('a live page that stops reading', () => {
  it('is dropped while the run goes on, reconnects with the last record it got, and ends with every record once', async () => {
    const server = await startTraceServer({ redactor: new Redactor([]) });
    try {
      const statechart = { initial: 'idle', states: [{ id: 'idle', final: false }], transitions: [] };
      server.push({ t: 0, kind: 'trace.start', version: 1, startedAt: new Date().toISOString(), title: 'slow page', statechart });
      server.push({ t: 0, kind: 'agent.start', agent: 'root', name: 'root', depth: 0, parent: null, task: 'read slowly', taskChars: 11 });
      const { page, errors } = await open(server.url);
      const streams: Promise<Record<string, string>>[] = [];
      page.on('request', (request) => {
        if (new URL(request.url()).pathname === '/events') streams.push(request.allHeaders());
      });
      await page.waitForSelector('body[data-live="open"]');
      // The page's script is paused in the debugger: the browser takes what its buffers hold, then nothing.
      const cdp = await page.context().newCDPSession(page);
      await cdp.send('Debugger.enable');
      const paused = new Promise((resolve) => cdp.once('Debugger.paused', resolve));
      await cdp.send('Debugger.pause');
      await paused;
      // Meanwhile the run goes on by 40 MB: far more than a browser's and the kernel's buffers and the 4 MiB a client may miss.
      for (let i = 0; i < 400; i++) {
        server.push({
          t: i,
          kind: 'message',
          agent: 'root',
          index: i,
          message: { role: 'user', content: [{ type: 'text', text: `part ${i} ${'z'.repeat(100_000)}` }] },
        });
        if (i % 10 === 9) await new Promise((resolve) => setImmediate(resolve));
      }
      server.end();
      await cdp.send('Debugger.resume');
      await page.waitForSelector('body[data-live="ended"]', { timeout: 60_000 });
      // It had every record, each once; the second stream began after the last whole record the first brought.
      expect(await page.evaluate(() => window.exarchViewer.records)).toBe(server.records);
      const headers = await Promise.all(streams);
      expect(headers.length).toBeGreaterThanOrEqual(1);
      const resumedAt = Number(headers[0]?.['last-event-id']);
      expect(resumedAt).toBeGreaterThan(1);
      expect(resumedAt).toBeLessThan(server.records - 1);
      // The one error: the browser saw its stream cut (what the server does to a client that stopped reading).
      expect(errors).toEqual(['Failed to load resource: net::ERR_INCOMPLETE_CHUNKED_ENCODING']);
    } finally {
      await server.close();
    }
  });
});

/** The scripted model, held before one agent's n-th request (from 0) until the test lets it go. */
class HeldProvider implements Provider {
  readonly name = 'held';
  private readonly inner = scriptedProvider({ agents: script });
  private readonly counts = new Map<string, number>();
  constructor(
    private readonly held: ReturnType<typeof gate>,
    private readonly agent: string,
    private readonly request: number,
  ) {}

  async stream(request: ModelRequest, sink: StreamSink): Promise<ModelResponse> {
    const n = this.counts.get(request.agent.id) ?? 0;
    this.counts.set(request.agent.id, n + 1);
    if (request.agent.id === this.agent && n === this.request) {
      this.held.entered();
      await this.held.opened;
    }
    return this.inner.stream(request, sink);
  }
}
type ModelResponse = Awaited<ReturnType<Provider['stream']>>;

/** A stream that keeps what is written to it. */
function sink(): Writable & { text(): string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return Object.assign(stream, { text: () => chunks.join('') });
}

describe.skipIf(CHROMIUM === undefined)('exarch run --ui', () => {
  it('prints the page on stderr, serves the run as it goes, prints the answer on stdout and ends with the run', async () => {
    const held = gate();
    const stdout = sink();
    const stderr = sink();
    const cwd = mkdtempSync(join(tmpdir(), 'exarch-run-ui-'));
    try {
      // The CLI has no `hold` tool: its call gets an error result, and the held step is the worker's second request.
      const running = runCommand(
        'Get the work done',
        { ui: true, noStore: true },
        {
          stdout,
          stderr,
          env: { ...process.env, ANTHROPIC_API_KEY: '' },
          cwd,
          interrupt: new AbortController().signal,
          provider: new HeldProvider(held, 'root/worker', 1),
        },
      );
      await held.holding;
      const url = /exarch: live turn flow at (http:\/\/127\.0\.0\.1:\d+\/\?token=[\w-]{43}) \(open it in a browser\)/.exec(stderr.text())?.[1];
      expect(url).toBeDefined();
      const { page, errors, foreign } = await open(url ?? '');
      await page.waitForSelector('body[data-live="open"]');
      expect((await rows(page)).map(([agent]) => agent)).toEqual(['root', 'root/worker']);
      expect(await page.locator('#title').innerText()).toBe('exarch run: Get the work done');
      held.release();
      // Not a terminal: once the run has ended, the command returns and the server is gone.
      expect(await running).toBe(0);
      expect(stdout.text()).toBe('The worker says: **worked**.\n');
      await page.waitForSelector('body[data-live="ended"]');
      expect(await rows(page)).toEqual([
        ['root', 'readyForUser · stopped'],
        ['root/worker', 'replied'],
      ]);
      await expect(fetch(url ?? '')).rejects.toThrow();
      expect(stderr.text()).not.toContain('still serving');
      expect(errors).toEqual([]);
      expect(foreign).toEqual([]);
    } finally {
      held.release();
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
