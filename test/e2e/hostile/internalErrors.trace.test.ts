import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startAnthropicServer, scriptedHandler } from '../../support/anthropicServer.js';
import { browserForTests } from '../../support/browser.js';
import { call, exarch, stream, workdir } from '../../support/cliHarness.js';
import { expectOneLine } from '../../support/oneLine.js';

/**
 * Issue 37, "internal error text never reaches a user", traces: `exarch view TRACE` of a trace
 * whose records lack fields or have the wrong types printed `Cannot read properties of undefined
 * (reading 'states')` or `text.replace is not a function`, or wrote a page that stopped in the
 * browser without a word (a record without its agent, a message that is null). Now a damaged
 * record is left out of the page, said in one line naming its line and what is wrong, and the rest
 * is shown; a first record that is no trace's start is one line and no page.
 */

const CHROMIUM = browserForTests('test/e2e/hostile/internalErrors.trace.test.ts');

let trace: readonly Record<string, unknown>[];
let dir: string;
let browser: BrowserContext | undefined;

beforeAll(async () => {
  // Lives across the file's tests (workdir() would remove it after the first).
  dir = mkdtempSync(join(tmpdir(), 'exarch-trace-'));
  writeFileSync(join(dir, 'notes.md'), 'hello\n');
  const server = await startAnthropicServer(
    scriptedHandler({ root: [stream({ text: 'Reading.', toolCalls: [call('read_file', { path: 'notes.md' })] }), stream({ text: 'It says hello.' })] }),
  );
  try {
    const run = await exarch(['run', '--no-store', '--trace', 'trace.jsonl', 'Read notes.md'], { server, cwd: dir });
    expect(run.code, run.stderr).toBe(0);
  } finally {
    await server.close();
  }
  trace = readFileSync(join(dir, 'trace.jsonl'), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  if (CHROMIUM !== undefined)
    browser = await chromium.launchPersistentContext(join(dir, 'profile'), { executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--headless'] });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The trace with the first record of `kind` changed by `change`; viewed with the CLI. */
async function viewChanged(kind: string, change: (record: Record<string, unknown>) => unknown) {
  const cwd = workdir();
  const at = trace.findIndex((record) => record['kind'] === kind);
  const lines = trace.map((record, i) => JSON.stringify(i === at ? change({ ...record }) : record));
  writeFileSync(join(cwd, 'damaged.jsonl'), `${lines.join('\n')}\n`);
  const view = await exarch(['view', 'damaged.jsonl', '--out', 'damaged.html'], { cwd });
  return { view, line: at + 1, page: join(cwd, 'damaged.html') };
}

/** What a browser shows of the page: the lanes it drew, and the errors it met. */
async function inBrowser(page: string): Promise<{ lanes: string[]; errors: string[] }> {
  if (!browser) throw new Error('no browser');
  const tab = await browser.newPage();
  const errors: string[] = [];
  tab.on('pageerror', (error) => errors.push(error.message));
  try {
    await tab.goto(pathToFileURL(page).href);
    await tab.waitForSelector('body[data-ready="true"]', { timeout: 15_000 }).catch(() => undefined);
    const lanes = await tab.$$eval('#lanes .lane[data-agent]', (nodes) => nodes.map((n) => n.getAttribute('data-agent') ?? ''));
    return { lanes, errors };
  } finally {
    await tab.close();
  }
}

const without =
  (...keys: string[]) =>
  (record: Record<string, unknown>): Record<string, unknown> =>
    Object.fromEntries(Object.entries(record).filter(([key]) => !keys.includes(key)));

describe('exarch view of a trace with damaged records', () => {
  it.each([
    ['an agent.start without its agent', 'agent.start', without('agent'), 'agent is missing'],
    ['a state without its usage', 'state', without('usage'), 'usage is missing'],
    ['a message that is null', 'message', (r: Record<string, unknown>) => ({ ...r, message: null }), 'message is not an object'],
    ['a response whose tool calls are text', 'response', (r: Record<string, unknown>) => ({ ...r, toolCalls: 'read_file' }), 'toolCalls is not an array'],
    ['a time that is text', 'tool.result', (r: Record<string, unknown>) => ({ ...r, t: 'later' }), 't is not a number'],
  ])('%s: left out and said in one line; the page shows the rest', async (_what, kind, change, problem) => {
    const { view, line, page } = await viewChanged(kind, change);
    expect(view.code, view.stderr).toBe(0);
    expect(view.stdout).toBe('damaged.html\n');
    expectOneLine(view.stderr, new RegExp(`^exarch: damaged\\.jsonl: left out a line that is not a trace record \\(line ${line}: ${problem}\\)$`));
    if (browser) {
      const shown = await inBrowser(page);
      expect(shown.errors).toEqual([]);
      expect(shown.lanes).toEqual(['root']);
    }
  });

  it.each([
    ['without its statechart', without('statechart'), 'statechart is missing'],
    [
      'whose states are null',
      (r: Record<string, unknown>) => ({ ...r, statechart: { ...(r['statechart'] as object), states: null } }),
      'statechart.states is not an array',
    ],
    ['whose title is a number', (r: Record<string, unknown>) => ({ ...r, title: 5 }), 'title is not a string'],
  ])('a trace.start %s: one line, no page', async (_what, change, problem) => {
    const { view } = await viewChanged('trace.start', change);
    expect(view.code).toBe(1);
    expect(view.stdout).toBe('');
    expectOneLine(
      view.stderr,
      new RegExp(`^exarch: damaged\\.jsonl: not an exarch trace: its trace\\.start record is not one \\(${problem.replace('.', '\\.')}\\)$`),
    );
  });
});
