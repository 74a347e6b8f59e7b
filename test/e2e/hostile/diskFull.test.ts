import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { startAnthropicServer, type AnthropicTestServer } from '../../support/anthropicServer.js';
import { call, exarch, MAIN, onCleanup, stream, workdir, type CliRun } from '../../support/cliHarness.js';
import { fillDisk, remountDisk, requireMounts, resizeDisk, smallDisk } from '../../support/smallDisk.js';

/**
 * Issue 37, hole 3: a full disk ended a run with a stack trace (`Error: cannot write session log
 * …: ENOSPC` and its frames), and the log it was writing ended in half a line. Now a file a run
 * cannot write (its session logs, its trace, its recording, its store; the viewer's page) is one
 * line naming the file and the cause, the run is stopped as Ctrl-C stops it (exit 5) and a resume
 * finishes it once there is room; every file written so far holds whole lines, the store is sound.
 *
 * Two ways to run out: a small tmpfs that is filled (root only: skipped with a line elsewhere,
 * required under CI), and a file-size limit (`ulimit -f`: EFBIG, for anyone).
 */

const MOUNTS = requireMounts('test/e2e/hostile/diskFull.test.ts');

/** Each response's text: big enough that a few of them fill what is left of a disk. */
const BIG = 'x'.repeat(24_000);

/**
 * A model that keeps working (a big text and a `list_dir` call per step) until `finish()`, then
 * answers `done`: the first run can only end by running out of room, and a resume after that
 * finishes wherever the run had got to.
 */
async function busyModel(): Promise<AnthropicTestServer & { finish(): void }> {
  let finished = false;
  const server = await startAnthropicServer(() => (finished ? stream({ text: 'done' }) : stream({ text: BIG, toolCalls: [call('list_dir', { path: '.' })] })));
  onCleanup(() => server.close());
  return Object.assign(server, { finish: () => void (finished = true) });
}

/** `exarch ARGS` with its file-size limit at `blocks` × 512 bytes (`ulimit -f`), as a shell starts it. */
async function exarchLimited(blocks: number, args: readonly string[], options: { server?: AnthropicTestServer; cwd: string }): Promise<CliRun> {
  const child = spawn('sh', ['-c', 'ulimit -f "$0" && exec "$@"', String(blocks), process.execPath, MAIN, ...args], {
    cwd: options.cwd,
    env: {
      PATH: process.env['PATH'],
      CI: 'true',
      ...(options.server ? { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: options.server.url } : {}),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
  return { code, signal, stdout, stderr };
}

/** The one line that says what could not be written: exactly one, matching `line`; no stack trace anywhere. */
function expectOneFaultLine(run: CliRun, line: RegExp): void {
  expect(run.stderr).not.toContain('    at ');
  expect(run.stderr).not.toMatch(/Error:|Warning:/);
  const said = run.stderr.split('\n').filter((l) => l.startsWith('exarch: cannot'));
  expect(said).toEqual([expect.stringMatching(line)]);
}

/** Every line of a JSONL file parses (none cut in half); returns the records. */
function wholeLines(file: string): Record<string, unknown>[] {
  const text = readFileSync(file, 'utf8');
  expect(text === '' || text.endsWith('\n')).toBe(true);
  return text
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/** SQLite's own check of the whole file. */
function integrity(file: string): string {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return String(db.pragma('integrity_check', { simple: true }));
  } finally {
    db.close();
  }
}

function runId(run: CliRun): string {
  const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1];
  if (id === undefined) throw new Error(`no run id in:\n${run.stderr}`);
  return id;
}

const RESUMABLE = (id: string): string => `; the run was stopped; once that is fixed, resume it with: exarch resume ${id}`;
const literal = (text: string): string => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

describe.skipIf(!MOUNTS)('a full disk (a small tmpfs, filled)', () => {
  it("under .exarch, the store's and the logs' (the issue's case): one line, exit 5, the store sound, a resume finishes", async () => {
    const cwd = workdir();
    const state = join(cwd, '.exarch');
    mkdirSync(state);
    smallDisk('2m', state);
    const server = await busyModel();
    const run = await exarch(['run', '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(
        `^exarch: cannot write the (session log|run store) ${literal(state)}/.*: no space left on the device \\((ENOSPC|SQLITE_FULL)\\)${literal(RESUMABLE(id))}$`,
      ),
    );
    expect(integrity(join(state, 'exarch.db'))).toBe('ok');
    const logs = readdirSync(join(state, 'runs'));
    for (const dir of logs) wholeLines(join(state, 'runs', dir, 'root.jsonl'));

    // Room again: a disk four times the size.
    resizeDisk(state, '8m');
    server.finish();
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.stderr).not.toContain('    at ');
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
    expect(integrity(join(state, 'exarch.db'))).toBe('ok');
  });

  it('under the session logs: one line, exit 5, the logs hold whole lines, and a resume once there is room finishes the run', async () => {
    const cwd = workdir();
    const disk = smallDisk('1m');
    const logs = join(disk, 'logs');
    const free = fillDisk(disk, 96 * 1024);
    const server = await busyModel();
    const run = await exarch(['run', '--log-dir', logs, '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(
        `^exarch: cannot write the session log ${literal(join(logs, 'root.jsonl'))}: no space left on the device \\(ENOSPC\\)${literal(RESUMABLE(id))}$`,
      ),
    );
    expect(run.stdout).toBe('');
    const before = wholeLines(join(logs, 'root.jsonl'));
    expect(before[0]).toMatchObject({ type: 'session' });
    expect((await exarch(['runs'], { cwd })).stdout).toMatch(new RegExp(`${id}.*interrupted`));

    free();
    server.finish();
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.stderr).not.toContain('    at ');
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
    const after = wholeLines(join(logs, 'root.jsonl'));
    expect(after.slice(0, before.length)).toEqual(before);
    expect(after.at(-1)).toMatchObject({ type: 'stopped', state: 'readyForUser' });
  });

  it('under the run store: one line naming it, exit 5, the store sound, and a resume once there is room finishes the run', async () => {
    const cwd = workdir();
    const disk = smallDisk('2m');
    const store = join(disk, 'exarch.db');
    const server = await busyModel();
    const free = fillDisk(disk, 256 * 1024);
    const run = await exarch(['run', '--store', store, '--log-dir', join(cwd, 'logs'), '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(
        `^exarch: cannot write the run store ${literal(store)}: no space left on the device \\(SQLITE_FULL\\)${literal(RESUMABLE(`${id} --store ${store}`))}$`,
      ),
    );
    expect(integrity(store)).toBe('ok');

    free();
    server.finish();
    const resumed = await exarch(['resume', id, '--store', store], { server, cwd });
    expect(resumed.stderr).not.toContain('    at ');
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
    expect(integrity(store)).toBe('ok');
    expect((await exarch(['runs', '--store', store], { cwd })).stdout).toMatch(new RegExp(`${id}.*done`));
  });

  it('under the trace: one line naming it, exit 5, the trace holds whole lines, and a resume finishes the run', async () => {
    const cwd = workdir();
    const disk = smallDisk('1m');
    const trace = join(disk, 'trace.jsonl');
    const server = await busyModel();
    const free = fillDisk(disk, 128 * 1024);
    const run = await exarch(['run', '--trace', trace, '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(`^exarch: cannot write the trace ${literal(trace)}: no space left on the device \\(ENOSPC\\)${literal(RESUMABLE(id))}$`),
    );
    wholeLines(trace);

    free();
    server.finish();
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
  });

  it('under the recording: one line naming it, exit 5, the recording holds whole exchanges, and a resume finishes the run', async () => {
    const cwd = workdir();
    const disk = smallDisk('1m');
    const recording = join(disk, 'run.jsonl');
    const server = await busyModel();
    const free = fillDisk(disk, 128 * 1024);
    const run = await exarch(['run', '--record', recording, '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(`^exarch: cannot write the recording ${literal(recording)}: no space left on the device \\(ENOSPC\\)${literal(RESUMABLE(id))}$`),
    );
    const lines = wholeLines(recording);
    expect(lines[0]).toMatchObject({ kind: 'exarch.recording' });
    expect(lines.slice(1).every((line) => line['kind'] === 'exchange')).toBe(true);

    free();
    server.finish();
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
  });

  it('under the session logs, made read-only mid-run: one line, exit 5, and a resume once it is writable finishes the run', async () => {
    const cwd = workdir();
    const disk = smallDisk('4m');
    const logs = join(disk, 'logs');
    let finished = false;
    const server = await startAnthropicServer((request) => {
      // The logs' disk turns read-only under the run (as a file system does after an error).
      if (request.index === 3) remountDisk(disk, 'ro');
      return finished ? stream({ text: 'done' }) : stream({ text: BIG, toolCalls: [call('list_dir', { path: '.' })] });
    });
    onCleanup(() => server.close());
    const run = await exarch(['run', '--log-dir', logs, '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(
        `^exarch: cannot write the session log ${literal(join(logs, 'root.jsonl'))}: the file system is read-only \\(EROFS\\)${literal(RESUMABLE(id))}$`,
      ),
    );
    wholeLines(join(logs, 'root.jsonl'));

    remountDisk(disk, 'rw');
    finished = true;
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
    expect(wholeLines(join(logs, 'root.jsonl')).at(-1)).toMatchObject({ type: 'stopped' });
  });

  it('under the viewer page: one line naming it, exit 1, and no part of the page left behind', async () => {
    const cwd = workdir();
    const demo = await exarch(['demo', '--speed', '1000', '--trace', 'trace.jsonl'], { cwd });
    expect(demo.code).toBe(0);
    const disk = smallDisk('1m');
    fillDisk(disk, 32 * 1024);
    const page = join(disk, 'view.html');
    const view = await exarch(['view', 'trace.jsonl', '--out', page], { cwd });
    expect(view.code).toBe(1);
    expect(view.stderr).toBe(`exarch: cannot write the viewer page ${page}: no space left on the device (ENOSPC)\n`);
    expect(existsSync(page)).toBe(false);
  });
});

describe('a file-size limit (ulimit -f: EFBIG)', () => {
  it('met by a session log: one line, exit 5, whole lines, and a resume without the limit finishes the run', async () => {
    const cwd = workdir();
    const logs = join(cwd, 'logs');
    // The log the run appends to is already near the limit: it, not the store, is the file that meets it.
    const limit = 2048 * 512;
    const padding = `${JSON.stringify({ pad: 'p'.repeat(1000) })}\n`;
    mkdirSync(logs);
    writeFileSync(join(logs, 'root.jsonl'), padding.repeat(Math.floor((limit - 64 * 1024) / padding.length)));
    const server = await busyModel();
    const run = await exarchLimited(2048, ['run', '--log-dir', logs, '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.signal).toBeNull();
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(
        `^exarch: cannot write the session log ${literal(join(logs, 'root.jsonl'))}: the file-size limit is reached \\(EFBIG; see ulimit -f\\)${literal(RESUMABLE(id))}$`,
      ),
    );
    wholeLines(join(logs, 'root.jsonl'));

    server.finish();
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
    expect(wholeLines(join(logs, 'root.jsonl')).at(-1)).toMatchObject({ type: 'stopped' });
  });

  it('met by the run store: one line naming it, exit 5, the store sound, and a resume without the limit finishes the run', async () => {
    const cwd = workdir();
    const server = await busyModel();
    // The store's WAL grows fastest: each step's records are a commit of whole pages.
    const run = await exarchLimited(1024, ['run', '--log-dir', join(cwd, 'logs'), '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    const store = join(cwd, '.exarch', 'exarch.db');
    expect(run.signal).toBeNull();
    expect(run.code).toBe(5);
    expectOneFaultLine(run, new RegExp(`^exarch: cannot write the run store ${literal(store)}: .*\\(ulimit -f\\)${literal(RESUMABLE(id))}$`));
    expect(integrity(store)).toBe('ok');

    server.finish();
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
    expect(integrity(store)).toBe('ok');
  });

  it('met by the recording: one line naming it, exit 5, whole exchanges, and a resume without the limit finishes the run', async () => {
    const cwd = workdir();
    const server = await busyModel();
    // A recording keeps every stream event: it grows several times faster than the logs and the store.
    const run = await exarchLimited(1024, ['run', '--record', 'run.jsonl', '--max-steps', '1000', 'go'], { server, cwd });
    const id = runId(run);
    expect(run.code).toBe(5);
    expectOneFaultLine(
      run,
      new RegExp(`^exarch: cannot write the recording run\\.jsonl: the file-size limit is reached \\(EFBIG; see ulimit -f\\)${literal(RESUMABLE(id))}$`),
    );
    expect(wholeLines(join(cwd, 'run.jsonl'))[0]).toMatchObject({ kind: 'exarch.recording' });

    server.finish();
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
  });

  it('met by the trace at the end of a run: the answer, then one line naming the trace, exit 5', async () => {
    const cwd = workdir();
    const server = await startAnthropicServer(() => stream({ text: 'done' }));
    onCleanup(() => server.close());
    // The trace opens with the session statechart (6 KiB); the run's other files stay smaller than 4 KiB.
    const run = await exarchLimited(8, ['run', '--no-store', '--trace', 'trace.jsonl', 'go'], { server, cwd });
    expect(run.code).toBe(5);
    expect(run.stdout).toBe('done\n');
    expectOneFaultLine(run, /^exarch: cannot write the trace trace\.jsonl: the file-size limit is reached \(EFBIG; see ulimit -f\); the run had finished$/);
    wholeLines(join(cwd, 'trace.jsonl'));
  });

  it("met by the demo's trace: one line naming it, exit 1, no viewer page", async () => {
    const cwd = workdir();
    const demo = await exarchLimited(16, ['demo', '--speed', '1000', '--trace', 'trace.jsonl'], { cwd });
    expect(demo.code).toBe(1);
    expectOneFaultLine(demo, /^exarch: cannot write the trace trace\.jsonl: the file-size limit is reached \(EFBIG; see ulimit -f\)$/);
    wholeLines(join(cwd, 'trace.jsonl'));
    expect(existsSync(join(cwd, 'trace.html'))).toBe(false);
  });

  it('met by the viewer page: one line naming it, exit 1, and no part of the page left behind', async () => {
    const cwd = workdir();
    expect((await exarch(['demo', '--speed', '1000', '--trace', 'trace.jsonl'], { cwd })).code).toBe(0);
    const view = await exarchLimited(64, ['view', 'trace.jsonl', '--out', 'view.html'], { cwd });
    expect(view.code).toBe(1);
    expect(view.stderr).toBe('exarch: cannot write the viewer page view.html: the file-size limit is reached (EFBIG; see ulimit -f)\n');
    expect(existsSync(join(cwd, 'view.html'))).toBe(false);
  });
});
