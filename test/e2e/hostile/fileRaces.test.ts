import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';

/**
 * Issue 13, hole 9 (the race) and hole 3 (a blocking open under a race): a path was checked by
 * name and opened by name later, so something swapped in between was used instead — a symlink to
 * a directory outside, or a FIFO that blocks the open for good. Here another process swaps them
 * in a tight loop while hundreds of calls run.
 */

const SECRET = 'OUTSIDE-SECRET\n';

let base: string;
let root: string;
let outside: string;
let swapper: ChildProcess | undefined;

beforeEach(async () => {
  base = await mkdtemp(path.join(tmpdir(), 'exarch-race-'));
  root = path.join(base, 'work');
  outside = path.join(base, 'outside');
  await mkdir(path.join(root, 'd'), { recursive: true });
  await mkdir(outside);
  await writeFile(path.join(root, 'd', 'f.txt'), 'inside\n');
  await writeFile(path.join(outside, 'f.txt'), SECRET);
});

afterEach(async () => {
  await stopSwapper();
  await rm(base, { recursive: true, force: true });
});

/** Starts a process that runs `body` (CommonJS, sync fs calls) in a loop until it is killed, or for 300 s at most. */
function startSwapper(body: string): void {
  const script = `const fs = require('node:fs'); const end = Date.now() + 300000; while (Date.now() < end) { try { ${body} } catch {} }`;
  swapper = spawn(process.execPath, ['-e', script], { cwd: root, stdio: 'ignore' });
}

async function stopSwapper(): Promise<void> {
  const child = swapper;
  swapper = undefined;
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGKILL');
  await exited;
}

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;

type Outcome = { ok: true; text: string } | { ok: false; error: Error };

async function run(tools: readonly Tool[], name: string, input: unknown): Promise<Outcome> {
  const prepared = tools.find((t) => t.name === name)?.prepare(input);
  if (!prepared?.ok) throw new Error(`cannot prepare ${name}`);
  try {
    return { ok: true, text: String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal })) };
  } catch (error) {
    return { ok: false, error: error as Error };
  }
}

describe('a directory swapped for a symlink to outside while calls run', () => {
  /** d → d.real, a symlink d → outside for a moment, then back. While `d` is missing a write may make a new `d`
   * (write_file makes missing directories): that one is moved aside, so the swapping goes on. */
  function swapDirForSymlink(): void {
    startSwapper(
      [
        `try { fs.renameSync('d', 'd.real'); } catch { try { fs.renameSync('d', 'aside-' + Math.random()); } catch {} }`,
        `try { fs.symlinkSync(${JSON.stringify(outside)}, 'd'); } catch {}`,
        `for (const until = performance.now() + 0.2; performance.now() < until;) {}`,
        `try { fs.unlinkSync('d'); } catch { try { fs.renameSync('d', 'aside-' + Math.random()); } catch {} }`,
        `try { fs.renameSync('d.real', 'd'); } catch {}`,
        `for (const until = performance.now() + 0.2; performance.now() < until;) {}`,
      ].join('\n'),
    );
  }

  /** Resolves once the swapper has swapped at least once (starting node takes seconds on a loaded machine). */
  async function swapping(): Promise<void> {
    for (let tries = 0; !existsSync(path.join(root, 'd.real')); tries += 1) {
      if (tries > 6_000) throw new Error('the swapper never swapped');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  /**
   * At least 1,200 calls, 30 at a time; `input(n)` gives the n-th call. On a loaded machine the
   * swaps may meet few calls: waves go on (up to 12,000 calls) until a call was refused and one
   * got through, so the checks below are about the race, never about the machine's speed.
   */
  async function calls(name: string, input: (n: number) => unknown): Promise<Outcome[]> {
    const tools = workspaceTools({ root, allowWrite: true });
    await swapping();
    const outcomes: Outcome[] = [];
    let refused = false;
    let through = false;
    for (let wave = 0; wave < 400 && (wave < 40 || !refused || !through); wave += 1) {
      const results = await Promise.all(Array.from({ length: 30 }, (_, i) => run(tools, name, input(wave * 30 + i))));
      refused ||= results.some((r) => !r.ok);
      through ||= results.some((r) => r.ok);
      outcomes.push(...results);
    }
    return outcomes;
  }

  /** Every refusal is a one-line WorkspaceError, as the model sees it; the swaps did meet the calls (else the test proves nothing); calls got through between them. */
  function expectRefusedInOneLine(outcomes: readonly Outcome[]): void {
    const failures = outcomes.flatMap((r) => (r.ok ? [] : [r.error]));
    expect(failures.filter((e) => e.name !== 'WorkspaceError' || e.message.includes('\n')).map(String)).toEqual([]);
    expect(failures.length).toBeGreaterThan(0);
    expect(outcomes.some((r) => r.ok)).toBe(true);
  }

  it('no read returns the file outside', async () => {
    swapDirForSymlink();
    const reads = await calls('read_file', () => ({ path: 'd/f.txt' }));
    await stopSwapper();
    expect(reads.filter((r) => r.ok && r.text.includes('OUTSIDE-SECRET')).length).toBe(0);
    expectRefusedInOneLine(reads);
  }, 300_000);

  it('no write lands outside: no file there changes or appears', async () => {
    swapDirForSymlink();
    const writes = await calls(
      'write_file',
      (n) =>
        [
          { path: 'd/f.txt', content: 'written by a call\n' },
          { path: `d/new-${n}.txt`, content: 'new\n' },
          { path: `d/made-${n}/x.txt`, content: 'new\n' },
        ][n % 3],
    );
    await stopSwapper();
    expect(readFileSync(path.join(outside, 'f.txt'), 'utf8')).toBe(SECRET);
    expect(readdirSync(outside)).toEqual(['f.txt']);
    expectRefusedInOneLine(writes);
  }, 300_000);
});

describe('a file swapped for a FIFO while calls run', () => {
  it('no read or write blocks: the process finishes every call and exits on its own', async () => {
    execFileSync('mkfifo', [path.join(root, 'fifo.master')]);
    await writeFile(path.join(root, 'file.master'), 'original\n');
    // f.txt is atomically, in turn, a hard link of the FIFO and of the regular file.
    startSwapper(`fs.linkSync('fifo.master', 'f.new'); fs.renameSync('f.new', 'f.txt'); fs.linkSync('file.master', 'f.new'); fs.renameSync('f.new', 'f.txt');`);
    // The calls run in a process of their own: a call stuck in a blocking open would keep it alive for good.
    // The compiled tools (dist/ is built by test/globalSetup.ts).
    const entry = new URL('../../../dist/src/tools/workspace/index.js', import.meta.url).href;
    const script = `
      const { workspaceTools } = await import(${JSON.stringify(entry)});
      const tools = workspaceTools({ root: process.env.ROOT, allowWrite: true });
      const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' };
      const run = (name, input) => tools.find((t) => t.name === name).prepare(input).value({ agent, toolUseId: 't', signal: new AbortController().signal });
      const tally = { ok: 0, refused: 0, other: [] };
      for (let wave = 0; wave < 20; wave += 1) {
        await Promise.all(Array.from({ length: 20 }, (_, i) =>
          run(i % 2 === 0 ? 'read_file' : 'write_file', i % 2 === 0 ? { path: 'f.txt' } : { path: 'f.txt', content: 'written\\n' }).then(
            () => { tally.ok += 1; },
            (error) => { if (error.name === 'WorkspaceError') tally.refused += 1; else tally.other.push(String(error)); },
          )));
      }
      process.stdout.write(JSON.stringify(tally));`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { env: { ...process.env, ROOT: root }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
    // Generous: 400 calls take about a second; before, the process never ended.
    const killer = setTimeout(() => child.kill('SIGKILL'), 20_000);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
    clearTimeout(killer);
    await stopSwapper();

    expect({ code, signal, stderr }).toEqual({ code: 0, signal: null, stderr: '' });
    const tally = JSON.parse(stdout) as { ok: number; refused: number; other: string[] };
    expect(tally.other).toEqual([]);
    expect(tally.ok + tally.refused).toBe(400);
    // The FIFO was met, and regular files were still read and written in between.
    expect(tally.refused).toBeGreaterThan(0);
    expect(tally.ok).toBeGreaterThan(0);
    // A write through f.txt while it was a link of file.master replaced f.txt, never file.master's content.
    expect(readFileSync(path.join(root, 'file.master'), 'utf8')).toBe('original\n');
  }, 60_000);
});
