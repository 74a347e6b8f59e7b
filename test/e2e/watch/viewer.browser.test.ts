import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Writable } from 'node:stream';
import { runDemo } from '../../../src/cli/demo.js';
import { EXPLORER_BRIEF } from '../../../src/cli/demoScript.js';
import { parseTrace } from '../../../src/watch/trace/readTrace.js';
import { writeViewer } from '../../../src/watch/viewer/index.js';
import { browserForTests } from '../../support/browser.js';
import { z } from 'zod';
import { createSessionActor, defineTool, respond, waitForSettled } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';
import { TraceRecorder } from '../../../src/watch/trace/recorder.js';
import { sessionStatechart } from '../../../src/watch/statechart/extract.js';
import { TRACE_VERSION, type TraceRecord } from '../../../src/watch/trace/format.js';
import { syntheticReply, syntheticTrace, traceText } from '../../support/traceFactory.js';

/**
 * The viewer in a real browser: headless Chromium or Chrome (found by test/support/browser.ts;
 * CI installs the Debian `chromium` package) opens the generated page from a file:// URL — no
 * server, no network. Without a browser a local run skips this file with one line on stderr.
 */
const CHROMIUM = browserForTests('test/e2e/watch/viewer.browser.test.ts');

// The few DOM names the callbacks run in the page use: the project compiles without the DOM lib.
interface PageNode {
  readonly innerText: string;
  readonly textContent: string | null;
  getAttribute(name: string): string | null;
  getBoundingClientRect(): { readonly left: number; readonly height: number };
  dispatchEvent(event: unknown): boolean;
  querySelector(selector: string): PageNode | null;
  click(): void;
}
interface ViewerHandle {
  readonly parseMs: number;
  readonly renderMs: number;
  readonly readyAt: number;
  lastRenderMs(): number;
}
declare const document: { querySelector(selector: string): PageNode | null; getElementById(id: string): PageNode | null };
declare const window: { readonly exarchViewer: ViewerHandle };
declare const MouseEvent: new (type: string, init: { bubbles: boolean; clientX?: number }) => unknown;
declare function getComputedStyle(node: PageNode): { readonly whiteSpace: string };
declare function requestAnimationFrame(callback: () => void): number;
const RESULTS = join(process.cwd(), 'test-results');

let browser: BrowserContext;
let dir: string;

beforeAll(async () => {
  if (CHROMIUM === undefined) return;
  dir = mkdtempSync(join(tmpdir(), 'exarch-viewer-browser-'));
  try {
    // A fresh profile per run (Playwright takes the --user-data-dir as this argument).
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
  } catch (error) {
    throw new Error(
      `Chromium could not be launched from ${CHROMIUM} (set CHROMIUM_PATH to another Chrome/Chromium): ${
        error instanceof Error ? error.message.split('\n')[0] : String(error)
      }`,
    );
  }
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Opens a page on the viewer for these trace lines; fails on any page error or request leaving the file. */
async function open(traceFile: string, name: string, viewport = { width: 1440, height: 960 }): Promise<{ page: Page; errors: string[]; requests: string[] }> {
  const out = join(dir, `${name}.html`);
  writeViewer(traceFile, out);
  const page = await browser.newPage();
  await page.setViewportSize(viewport);
  const errors: string[] = [];
  const requests: string[] = [];
  page.on('pageerror', (error) => errors.push(error.message));
  page.on('console', (message) => {
    if (message.type() === 'error') errors.push(message.text());
  });
  page.on('request', (request) => {
    if (!request.url().startsWith('file://')) requests.push(request.url());
  });
  await page.goto(pathToFileURL(out).href);
  await page.waitForSelector('body[data-ready="true"]', { timeout: 15_000 });
  return { page, errors, requests };
}

/** The offline demo's run (the design record's incident), recorded by `runDemo`'s TraceRecorder. */
async function recordDemo(file: string): Promise<void> {
  const sink = new Writable({ write: (_chunk, _encoding, done) => done() });
  const result = await runDemo({ out: sink, color: false, speed: 50, trace: file });
  expect(result.problems).toEqual([]);
}

describe.skipIf(CHROMIUM === undefined)('the viewer on a recorded demo run', () => {
  let page: Page;
  let errors: string[];
  let requests: string[];

  beforeAll(async () => {
    const file = join(dir, 'demo.trace.jsonl');
    await recordDemo(file);
    expect(parseTrace(readFileSync(file, 'utf8')).length).toBeGreaterThan(20);
    ({ page, errors, requests } = await open(file, 'demo'));
  }, 60_000);

  it('lists the agents as a tree with their outcomes', async () => {
    const rows = await page.$$eval('#tree [data-agent]', (nodes) =>
      nodes.map((n) => [n.getAttribute('data-agent'), (n as unknown as PageNode).innerText.replace(/\s+/g, ' ')]),
    );
    expect(rows.map(([id]) => id)).toEqual(['root', 'root/explorer', 'root/reviewer']);
    expect(rows[1]?.[1]).toContain('replied');
    expect(rows[2]?.[1]).toContain('replied');
  });

  it('draws a lane per agent with bars for the states it went through', async () => {
    const statesOf = (agent: string): Promise<string[]> =>
      page.$$eval(`#lanes .lane[data-agent="${agent}"] [data-state]`, (nodes) => nodes.map((n) => n.getAttribute('data-state') ?? ''));
    expect(await statesOf('root')).toEqual(expect.arrayContaining(['readyForUser', 'streaming', 'dispatchingBatch']));
    const explorer = await statesOf('root/explorer');
    expect(explorer).toEqual(expect.arrayContaining(['streaming', 'dispatchingBatch']));
    expect(explorer.at(-1)).toBe('replied');
    const reviewer = await statesOf('root/reviewer');
    expect(reviewer).toContain('nudged');
    expect(reviewer.at(-1)).toBe('replied');
    expect(await page.locator('#lanes [data-kind="spawn"]').count()).toBe(2);
    expect(await page.locator('#lanes [data-kind="delivery"]').count()).toBe(2);
  });

  it('shows the reply a delivery carried rendered as markdown, and the exact text it was one click away', async () => {
    await page.locator('#lanes [data-kind="delivery"][data-child="root/explorer"]').click();
    const details = page.locator('#details');
    await expect.poll(() => details.innerText()).toContain("[agent 'explorer' replied]");
    // Markdown: the brief's headings and table are elements, not `#` and `|` characters.
    const rendered = details.locator('div.reply.md');
    expect(await rendered.locator('h1').innerText()).toBe('Testing setup: tidepool');
    expect(await rendered.locator('h2').first().innerText()).toBe('Summary');
    expect(await rendered.locator('table').count()).toBeGreaterThan(0);
    // The exact text the parent's model received, with its real newlines.
    await details.getByRole('button', { name: 'show the exact text' }).click();
    const reply = details.locator('pre.reply');
    expect(await reply.isVisible()).toBe(true);
    expect(await rendered.isVisible()).toBe(false);
    expect(await reply.evaluate((n) => getComputedStyle(n as unknown as PageNode).whiteSpace)).toBe('pre-wrap');
    const text = await reply.evaluate((n) => n.textContent ?? '');
    expect(text).toBe(EXPLORER_BRIEF);
    expect(text).toContain('# Testing setup: tidepool\n\n## Summary\n');
    // Rendered as lines, not one run-on paragraph.
    const height = await reply.evaluate((n) => n.getBoundingClientRect().height);
    expect(height).toBeGreaterThan(EXPLORER_BRIEF.split('\n').length * 10);
    // A delivery happens at the parent: the statechart shows the root at that moment.
    await expect.poll(() => page.locator('#chart-caption').innerText()).toContain('root');
  });

  it('shows the messages of a state bar and highlights that state in the statechart', async () => {
    const bar = page.locator('#lanes .lane[data-agent="root/explorer"] [data-state="streaming"]').first();
    await bar.click();
    const details = await page.locator('#details').innerText();
    expect(details).toContain('streaming');
    expect(details).toContain("Map this project's testing setup"); // the task that opened the first request
    expect(details).toContain('Let me look at the layout first.'); // what the model said in it
    expect(details).toContain('list_files'); // the calls it made
    expect(details).toMatch(/stop: tool_use/); // the response summary
    const active = await page.$$eval('[data-statechart-state].active', (nodes) => nodes.map((n) => n.getAttribute('data-statechart-state')));
    expect(active).toEqual(['streaming']);

    await page.locator('#lanes .lane[data-agent="root/explorer"] [data-state="dispatchingBatch"]').first().click();
    const batch = await page.locator('#details').innerText();
    expect(batch).toContain('tool results');
    expect(batch).toMatch(/tool result\s+list_files/);
    expect(await page.$$eval('[data-statechart-state].active', (nodes) => nodes.map((n) => n.getAttribute('data-statechart-state')))).toEqual([
      'dispatchingBatch',
    ]);
    expect(await page.locator('.sc-edge.taken[data-from="streaming"][data-to="dispatchingBatch"]').count()).toBe(1);

    // The nudged state is a moment: its marker is what one clicks.
    await page.locator('#lanes .lane[data-agent="root/reviewer"] [data-kind="nudge"]').click();
    expect(await page.locator('#details').innerText()).toContain('reply');
    expect(await page.$$eval('[data-statechart-state].active', (nodes) => nodes.map((n) => n.getAttribute('data-statechart-state')))).toEqual(['nudged']);
  });

  it('marks the reminder with a marker that shows at any zoom, though the nudged state lasts a moment', async () => {
    const marker = page.locator('#lanes .lane[data-agent="root/reviewer"] [data-kind="nudge"]');
    expect(await marker.count()).toBe(1);
    const check = async (): Promise<void> => {
      const box = await marker.boundingBox();
      expect(box?.width).toBeGreaterThanOrEqual(10);
      expect(box?.height).toBeGreaterThanOrEqual(14);
      // Nothing is drawn over it: the point at its centre is the marker.
      const onTop = await marker.evaluate((node) => {
        const r = node.getBoundingClientRect();
        return (
          (document as unknown as { elementFromPoint(x: number, y: number): unknown }).elementFromPoint(r.left + r.width / 2, r.top + r.height / 2) === node
        );
      });
      expect(onTop).toBe(true);
    };
    // The whole run, then zoomed to the nudged state itself (double-click): the marker keeps its size.
    await check();
    const whole = await page.locator('#range').innerText();
    await marker.dblclick();
    await expect.poll(() => page.locator('#range').innerText()).not.toBe(whole);
    await page.waitForTimeout(50);
    await check();
    await page.locator('#zoom-fit').click();
    await page.waitForTimeout(50);
    await marker.click();
    const details = await page.locator('#details').innerText();
    expect(details).toContain('nudged');
    expect(details).toContain('reply');
    expect(await page.$$eval('[data-statechart-state].active', (nodes) => nodes.map((n) => n.getAttribute('data-statechart-state')))).toEqual(['nudged']);
  });

  it("shows a tool call's input beside its result", async () => {
    await page.locator('#lanes .lane[data-agent="root/explorer"] [data-state="dispatchingBatch"]').first().click();
    const call = page.locator('#details .call').filter({ hasText: 'result of list_files' }).first();
    const parts = await call.evaluate((node) =>
      Array.from((node as unknown as { children: ArrayLike<PageNode> }).children, (child) => child.textContent ?? ''),
    );
    // Which call, its input, its result, in that order.
    expect(parts[0]).toMatch(/^result of list_files {2}toolu_/);
    expect(parts[1]).toBe('input');
    expect(JSON.parse(parts[2] ?? '')).toEqual({ path: '.' });
    expect(parts[3]).toBe('result');
    expect(parts[4]).toContain('.github/workflows/ci.yml');
    // The call in the assistant message shows what came back, too.
    await page.locator('#lanes .lane[data-agent="root/explorer"] [data-state="streaming"]').first().click();
    const asked = page.locator('#details .call').filter({ hasText: 'calls list_files' }).first();
    expect(await asked.innerText()).toContain('.github/workflows/ci.yml');
  });

  it("numbers an agent's steps over its life, as the terminal does", async () => {
    const streaming = page.locator('#lanes .lane[data-agent="root/explorer"] .bar[data-state="streaming"]');
    expect(await streaming.count()).toBe(2);
    await streaming.nth(1).click();
    expect(await page.locator('#chart-caption').innerText()).toMatch(/streaming .*· step 2$/);
    expect(await page.locator('#details .sub').innerText()).toContain('step 2');
  });

  it('filters the lanes by agent, tool or text, keeping the ancestors of what matches', async () => {
    const rows = (): Promise<string[]> => page.$$eval('#tree [data-agent]', (nodes) => nodes.map((n) => n.getAttribute('data-agent') ?? ''));
    const lanes = (): Promise<string[]> => page.$$eval('#lanes .lane', (nodes) => nodes.map((n) => n.getAttribute('data-agent') ?? ''));
    const box = page.locator('#search');
    await box.fill('reviewer');
    await expect.poll(rows).toEqual(['root', 'root/reviewer']);
    expect(await lanes()).toEqual(['root', 'root/reviewer']);
    // A tool only the explorer called: its lane stays, with the bars that hold the calls outlined.
    await box.fill('LIST_FILES');
    await expect.poll(rows).toEqual(['root', 'root/explorer']);
    expect(await page.locator('#lanes .lane[data-agent="root/explorer"] .bar.hit').count()).toBeGreaterThan(0);
    expect(await page.locator('#corner').innerText()).toMatch(/^2 of 3 agents$/i);
    await box.fill('no match for this anywhere');
    await expect.poll(rows).toEqual([]);
    await box.fill('');
    await expect.poll(rows).toEqual(['root', 'root/explorer', 'root/reviewer']);
    expect(await page.locator('#lanes .bar.hit').count()).toBe(0);
  });

  it('shows the task of a spawn and an agent summary from the tree', async () => {
    await page.locator('#lanes [data-kind="spawn"][data-child="root/reviewer"]').click();
    expect(await page.locator('#details').innerText()).toContain('Review .github/workflows/ci.yml against package.json');
    await page.locator('#tree [data-agent="root/reviewer"]').click();
    const summary = await page.locator('#details').innerText();
    expect(summary).toContain('root/reviewer');
    expect(summary).toContain('"verdict"');
    expect(await page.locator('#tree [data-agent="root/reviewer"].sel').count()).toBe(1);
  });

  it('zooms and still finds its bars', async () => {
    await page.locator('#zoom-in').click();
    await page.locator('#zoom-in').click();
    await page.waitForTimeout(50);
    const range = await page.locator('#range').innerText();
    await page.locator('#zoom-fit').click();
    await page.waitForTimeout(50);
    expect(await page.locator('#range').innerText()).not.toBe(range);
    expect(await page.locator('#lanes [data-state="replied"]').count()).toBe(2);
  });

  it('renders legibly (screenshot in test-results/viewer.png) with no errors and no network', async () => {
    await page.locator('#lanes .lane[data-agent="root/explorer"] [data-state="dispatchingBatch"]').last().click();
    mkdirSync(RESULTS, { recursive: true });
    await page.mouse.move(1, 1);
    await page.screenshot({ path: join(RESULTS, 'viewer.png') });
    await page.locator('#lanes [data-kind="delivery"][data-child="root/reviewer"]').click();
    await page.mouse.move(1, 1);
    await page.screenshot({ path: join(RESULTS, 'viewer-delivery.png') });
    expect(errors).toEqual([]);
    expect(requests).toEqual([]);
  });
});

describe.skipIf(CHROMIUM === undefined)('the viewer on a synthetic 200-agent trace', () => {
  it('renders in under 3 s and answers a click at once', async () => {
    const trace = syntheticTrace({ shape: [10, 19], steps: 12 });
    const file = join(dir, 'wide.trace.jsonl');
    writeFileSync(file, traceText(trace.records));
    const started = performance.now();
    const { page, errors, requests } = await open(file, 'wide');
    const loadMs = performance.now() - started;
    const timing = await page.evaluate(() => {
      const viewer = window.exarchViewer;
      return { parseMs: viewer.parseMs, renderMs: viewer.renderMs, readyAt: viewer.readyAt, drawMs: viewer.lastRenderMs() };
    });
    expect(await page.locator('#tree [data-agent]').count()).toBe(201);
    expect(await page.locator('#lanes .lane').count()).toBe(201);

    const target = trace.agents.find((id) => trace.outcomes.get(id) === 'replied' && id.split('/').length === 3) ?? '';
    const click = await page.evaluate((child) => {
      const arrow = document.querySelector(`#lanes [data-kind="delivery"][data-child="${child}"] .hit`);
      if (!arrow) throw new Error(`no delivery arrow for ${child}`);
      const t0 = performance.now();
      arrow.dispatchEvent(new MouseEvent('click', { bubbles: true }));
      const handled = performance.now() - t0;
      return new Promise<{ handled: number; painted: number; text: string }>((resolve) =>
        requestAnimationFrame(() =>
          setTimeout(() => resolve({ handled, painted: performance.now() - t0, text: document.getElementById('details')?.innerText ?? '' }), 0),
        ),
      );
    }, target);
    // The reply's first line is a markdown heading: shown as one.
    expect(click.text).toContain(syntheticReply(target).split('\n')[0]?.replace(/^## /, ''));

    const bar = page.locator(`#lanes .lane[data-agent="${trace.agents[1] ?? ''}"] [data-state="streaming"]`).first();
    const barClick = await bar.evaluate((node) => {
      const t0 = performance.now();
      node.dispatchEvent(new MouseEvent('click', { bubbles: true, clientX: node.getBoundingClientRect().left + 1 }));
      return performance.now() - t0;
    });
    const zoom = await page.evaluate(() => {
      const t0 = performance.now();
      document.getElementById('zoom-in')?.click();
      const viewer = window.exarchViewer;
      return new Promise<{ total: number; draw: number }>((resolve) =>
        requestAnimationFrame(() => setTimeout(() => resolve({ total: performance.now() - t0, draw: viewer.lastRenderMs() }), 0)),
      );
    });
    mkdirSync(RESULTS, { recursive: true });
    await page.mouse.move(1, 1);
    await page.screenshot({ path: join(RESULTS, 'viewer-200.png') });

    console.log(
      `viewer, ${trace.agents.length} agents / ${trace.records.length} records: ready ${timing.readyAt.toFixed(0)} ms after navigation ` +
        `(JSON ${timing.parseMs.toFixed(0)} ms, first render ${timing.renderMs.toFixed(0)} ms, lanes ${timing.drawMs.toFixed(0)} ms; ${loadMs.toFixed(0)} ms wall incl. writing the page), ` +
        `delivery click ${click.handled.toFixed(1)} ms (${click.painted.toFixed(1)} ms to paint), bar click ${barClick.toFixed(1)} ms, ` +
        `zoom ${zoom.total.toFixed(0)} ms (lanes ${zoom.draw.toFixed(0)} ms)`,
    );
    expect(trace.records.length).toBeGreaterThan(15_000);
    expect(timing.readyAt).toBeLessThan(3000);
    expect(click.painted).toBeLessThan(500);
    expect(barClick).toBeLessThan(500);
    expect(errors).toEqual([]);
    expect(requests).toEqual([]);
  }, 60_000);
});

/** Issue 17: a sub-agent whose call waited for a person, recorded live, approved after a pause. */
async function recordApproval(file: string): Promise<void> {
  const recorder = new TraceRecorder({ file, title: 'approval' });
  const note = defineTool({ name: 'write_note', description: 'Write a note', input: z.object({ text: z.string() }), run: async ({ text }) => `wrote ${text}` });
  const provider = scriptedProvider({
    agents: {
      root: [
        {
          calls: [
            { name: 'agent', input: { name: 'scribe', task: 'Write the note.' } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { text: 'noted' },
      ],
      scribe: [{ calls: [{ name: 'write_note', input: { text: 'hello' } }] }, { calls: [{ name: 'reply', input: { result: 'written' } }] }],
    },
  });
  const actor = createSessionActor(
    {
      provider,
      tools: [note],
      task: 'Take a note',
      approve: ['write_note'],
      // Answered a moment later, so the wait is a bar of its own in the lane.
      onApprovalRequest: (request) => setTimeout(() => respond(actor, { callId: request.callId, decision: 'approve' }), 50),
    },
    { inspect: recorder.inspect },
  );
  actor.start();
  await waitForSettled(actor);
  actor.stop();
  recorder.close();
}

describe.skipIf(CHROMIUM === undefined)('the viewer on a run whose call waited for approval', () => {
  it('draws the awaitingApproval bar in the lane and highlights that state in the statechart', async () => {
    const file = join(dir, 'approval.trace.jsonl');
    await recordApproval(file);
    const { page, errors, requests } = await open(file, 'approval');
    const states = await page.$$eval('#lanes .lane[data-agent="root/scribe"] [data-state]', (nodes) => nodes.map((n) => n.getAttribute('data-state') ?? ''));
    expect(states).toEqual(expect.arrayContaining(['streaming', 'awaitingApproval', 'dispatchingBatch']));
    expect(states.indexOf('awaitingApproval')).toBeLessThan(states.lastIndexOf('dispatchingBatch'));
    await page.locator('#lanes .lane[data-agent="root/scribe"] [data-state="awaitingApproval"]').first().click();
    expect(await page.locator('#details').innerText()).toContain('awaitingApproval');
    expect(await page.$$eval('[data-statechart-state].active', (nodes) => nodes.map((n) => n.getAttribute('data-statechart-state')))).toEqual([
      'awaitingApproval',
    ]);
    expect(await page.locator('.sc-edge.taken[data-from="streaming"][data-to="awaitingApproval"]').count()).toBe(1);
    // A wait for a person is marked so that it shows at any zoom, however short.
    expect(await page.locator('#lanes .lane[data-agent="root/scribe"] [data-kind="approval"]').count()).toBe(1);
    // The legend names the state, and says it in words.
    expect(await page.locator('.item[title="waiting for a person to approve a tool call"]').innerText()).toBe('awaitingApproval');
    expect(errors).toEqual([]);
    expect(requests).toEqual([]);
  });
});

/** A root that spawns `writer`, whose reply and prose are hostile markup. */
function hostileTrace(reply: string): TraceRecord[] {
  const usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
  return [
    { t: 0, kind: 'trace.start', version: TRACE_VERSION, startedAt: '2025-01-01T00:00:00.000Z', title: 'hostile', statechart: sessionStatechart() },
    { t: 1, kind: 'agent.start', agent: 'root', name: 'root', depth: 0, parent: null, task: 'go', taskChars: 2 },
    { t: 1, kind: 'state', agent: 'root', state: 'readyForUser', steps: 0, usage },
    { t: 2, kind: 'agent.start', agent: 'root/writer', name: 'writer', depth: 1, parent: 'root', task: 'write', taskChars: 5 },
    { t: 2, kind: 'state', agent: 'root/writer', state: 'streaming', steps: 1, usage },
    { t: 3, kind: 'message', agent: 'root/writer', index: 1, message: { role: 'assistant', content: [{ type: 'text', text: reply }] } },
    { t: 4, kind: 'delivery', parent: 'root', child: 'root/writer', name: 'writer', outcome: 'replied', text: reply },
    { t: 4, kind: 'state', agent: 'root/writer', state: 'replied', steps: 1, usage },
    { t: 4, kind: 'agent.end', agent: 'root/writer', status: 'done', outcome: 'replied' },
    { t: 5, kind: 'agent.end', agent: 'root', status: 'stopped' },
    { t: 5, kind: 'trace.end' },
  ];
}

describe.skipIf(CHROMIUM === undefined)('the viewer on a reply that tries to run script', () => {
  it('renders the markdown and none of the markup: no script runs, no handler is set, no link goes anywhere', async () => {
    const reply = [
      '# Report',
      '',
      '<script>window.pwned = "script"</script>',
      '<img src="x" onerror="window.pwned = \'img\'">',
      '<svg onload="window.pwned = \'svg\'"></svg>',
      '[click me](javascript:window.pwned=%22link%22) and ![x](javascript:window.pwned=1)',
      '',
      '- a list item with `<b onclick="window.pwned=2">code</b>`',
    ].join('\n');
    const file = join(dir, 'hostile.trace.jsonl');
    writeFileSync(file, traceText(hostileTrace(reply)));
    const { page, errors, requests } = await open(file, 'hostile');
    await page.locator('#lanes [data-kind="delivery"][data-child="root/writer"]').click();
    const details = page.locator('#details');
    expect(await details.locator('div.reply.md h1').innerText()).toBe('Report');
    // The markup is there as text to read.
    const text = await details.locator('div.reply.md').innerText();
    expect(text).toContain('<script>window.pwned = "script"</script>');
    expect(text).toContain('<img src="x" onerror=');
    // The assistant's prose (the same text) in its bar, too.
    await page.locator('#lanes .lane[data-agent="root/writer"] .bar[data-state="streaming"]').click();
    expect(await details.locator('.item.assistant .md h1').innerText()).toBe('Report');
    await page.waitForTimeout(100);
    const found = await page.evaluate(() => {
      const doc = document as unknown as { querySelectorAll(selector: string): ArrayLike<PageNode> };
      return {
        pwned: (window as unknown as { pwned?: unknown }).pwned,
        scripts: doc.querySelectorAll('#details script').length,
        handlers: doc.querySelectorAll('#details [onerror], #details [onload], #details [onclick]').length,
        images: doc.querySelectorAll('#details img').length,
        links: Array.from(doc.querySelectorAll('#details a'), (a) => a.getAttribute('href')),
      };
    });
    expect(found).toEqual({ pwned: undefined, scripts: 0, handlers: 0, images: 0, links: [] });
    expect(errors).toEqual([]);
    expect(requests).toEqual([]);
  });
});

describe.skipIf(CHROMIUM === undefined)('the viewer in a 1,000-pixel window', () => {
  it('is no wider than the window, and the whole statechart is in view', async () => {
    const file = join(dir, 'narrow.trace.jsonl');
    await recordDemo(file);
    const { page, errors } = await open(file, 'narrow', { width: 1000, height: 800 });
    const widths = await page.evaluate(() => {
      const body = (document as unknown as { body: { scrollWidth: number; clientWidth: number } }).body;
      return { scroll: body.scrollWidth, client: body.clientWidth };
    });
    expect(widths).toEqual({ scroll: 1000, client: 1000 });
    const chart = await page.locator('svg.statechart').boundingBox();
    const panel = await page.locator('#chart-panel').boundingBox();
    expect(chart && panel).toBeTruthy();
    if (!chart || !panel) return;
    expect(chart.x).toBeGreaterThanOrEqual(panel.x);
    expect(chart.x + chart.width).toBeLessThanOrEqual(panel.x + panel.width);
    expect(chart.x + chart.width).toBeLessThanOrEqual(1000);
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: join(RESULTS, 'viewer-1000.png') });
    expect(errors).toEqual([]);
  });
});

describe.skipIf(CHROMIUM === undefined)('the viewer of a stored run in a 1,400-pixel window', () => {
  /** Boxes that cut their text (an ellipsis, or content wider than the box), and boxes that leave the window. */
  interface Cut {
    readonly what: string;
    readonly scroll: number;
    readonly client: number;
    readonly right: number;
  }

  it('shows its whole header and every tree row, root first, with nothing cut; its statechart enters at starting', async () => {
    // A run as `exarch view RUN_ID` titles it, with a model (so costs show) and a long run's counts.
    const demo = join(dir, 'stored.demo.trace.jsonl');
    await recordDemo(demo);
    const records = parseTrace(readFileSync(demo, 'utf8')).map((record) => {
      if (record.kind === 'trace.start') return { ...record, title: 'exarch run 01KBX3Y7Z8A9B0C1D2E3F4G5H6', model: 'claude-sonnet-4-5' };
      if ('usage' in record && record.usage) {
        const u = record.usage;
        const usage = {
          inputTokens: u.inputTokens * 137,
          outputTokens: u.outputTokens * 137,
          cacheCreationInputTokens: u.cacheCreationInputTokens * 137,
          cacheReadInputTokens: u.cacheReadInputTokens * 137,
        };
        return { ...record, usage } as TraceRecord;
      }
      return record;
    });
    const file = join(dir, 'stored.trace.jsonl');
    writeFileSync(file, traceText(records));
    const { page, errors } = await open(file, 'stored-1400', { width: 1400, height: 900 });
    const cut = await page.evaluate(() => {
      interface Box {
        readonly scrollWidth: number;
        readonly clientWidth: number;
        readonly className: string;
        readonly id: string;
        readonly tagName: string;
        getBoundingClientRect(): { readonly right: number };
      }
      const all = (selector: string): Box[] => Array.from((document as unknown as { querySelectorAll(s: string): ArrayLike<Box> }).querySelectorAll(selector));
      const found: Cut[] = [];
      const check = (box: Box, within: number): void => {
        const right = box.getBoundingClientRect().right;
        if (box.scrollWidth > box.clientWidth || right > within + 0.5) {
          found.push({ what: `${box.tagName.toLowerCase()}#${box.id}.${box.className}`, scroll: box.scrollWidth, client: box.clientWidth, right });
        }
      };
      for (const box of all('#top > *, #top .zoom > *')) check(box, 1400);
      const tree = all('#tree')[0];
      const treeRight = tree ? tree.getBoundingClientRect().right : 0;
      for (const box of all('#tree .row, #tree .row > *')) check(box, treeRight);
      return found;
    });
    expect(cut).toEqual([]);
    // The root's row is there, with its state, its requests, tokens and cost.
    expect(await page.locator('#tree .row[data-agent="root"]').innerText()).toMatch(/^root\s+readyForUser · stopped\s+\d+ req · [\d.]+k tok · \$[\d.]+$/);
    // A fresh run's chart enters at `starting`, as every session does (no run here was resumed).
    const initial = page.locator('svg.statechart path.initial');
    expect(await initial.count()).toBe(1);
    expect(await page.locator('svg.statechart g.sc-state', { has: page.locator('path.initial') }).getAttribute('data-statechart-state')).toBe('starting');
    mkdirSync(RESULTS, { recursive: true });
    await page.screenshot({ path: join(RESULTS, 'viewer-1400.png') });
    expect(errors).toEqual([]);
  });
});
