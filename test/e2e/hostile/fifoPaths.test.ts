import { execFileSync, spawn } from 'node:child_process';
import {
  closeSync,
  constants,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  truncateSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer } from '../../support/anthropicServer.js';
import { call, exarch, MAIN, onCleanup, serve, stream, workdir, type CliRun } from '../../support/cliHarness.js';

/**
 * Issue 37, hole 4: files exarch opens by name blocked on FIFOs and devices. `--replay FIFO`,
 * `--record FIFO`, `--trace FIFO`, `--agents FIFO`, a FIFO named `exarch.config.json` in the
 * workspace (which a sandboxed command can make, hanging every later run there) and `view --out
 * FIFO` ignored Ctrl-C and SIGTERM and needed SIGKILL; `--replay /dev/zero` grew past 5 GB. Now
 * every such path is opened without waiting and refused in one line unless it is a regular file,
 * and what is read is bounded by size.
 *
 * Each FIFO is tried alone and with a process holding its other end (which a blocking open would
 * have waited for): neither may make exarch wait.
 */

/** A hang guard, not a speed check: a refusal takes well under a second; before, the process never ended. */
const HANG_GUARD_MS = 30_000;

interface Guarded extends CliRun {
  /** The guard had to SIGKILL it: it hung. */
  readonly hung: boolean;
}

/**
 * `exarch ARGS`, SIGKILLed if it has not ended within the guard; `prefix` runs it through a shell
 * first (`ulimit -v …`); `signal` is sent as soon as it has started.
 */
async function exarchGuarded(args: readonly string[], options: { cwd: string; serverUrl?: string; shell?: string; signal?: NodeJS.Signals }): Promise<Guarded> {
  const command =
    options.shell === undefined ? [process.execPath, MAIN, ...args] : ['sh', '-c', `${options.shell} && exec "$@"`, 'sh', process.execPath, MAIN, ...args];
  const child = spawn(command[0] as string, command.slice(1), {
    cwd: options.cwd,
    env: {
      PATH: process.env['PATH'],
      CI: 'true',
      ...(options.serverUrl === undefined ? {} : { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: options.serverUrl }),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  let hung = false;
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  if (options.signal) {
    const signal = options.signal;
    child.once('spawn', () => child.kill(signal));
  }
  const guard = setTimeout(() => {
    hung = true;
    child.kill('SIGKILL');
  }, HANG_GUARD_MS);
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
  clearTimeout(guard);
  return { code, signal, stdout, stderr, hung };
}

/** A FIFO at `path`; with `peer`, this process holds it open for reading and writing (a reader and a writer that never act). */
function fifo(path: string, peer: boolean): void {
  execFileSync('mkfifo', [path]);
  if (!peer) return;
  // O_RDWR on a FIFO never waits, and counts as both ends.
  const fd = openSync(path, constants.O_RDWR);
  onCleanup(() => closeSync(fd));
}

/** Refused in exactly `line` (exit 1), without hanging; the FIFO is still a FIFO. */
function expectRefused(run: Guarded, line: string): void {
  expect(run.hung).toBe(false);
  expect(run.stderr).toBe(`${line}\n`);
  expect(run.code).toBe(1);
}

/** A trace the viewer can read, made by the demo. */
async function aTrace(cwd: string): Promise<string> {
  const demo = await exarch(['demo', '--speed', '1000', '--trace', 'trace.jsonl'], { cwd });
  expect(demo.code).toBe(0);
  return 'trace.jsonl';
}

const NOT_REGULAR = 'it is a FIFO, not a regular file';

describe.each([
  ['alone', false],
  ['with its other end held open', true],
])('a FIFO %s, for every path option', (_how, peer) => {
  it('run --replay FIFO', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'fifo'), peer);
    expectRefused(await exarchGuarded(['run', '--no-store', '--replay', 'fifo', 'go'], { cwd }), `exarch: cannot read the recording fifo: ${NOT_REGULAR}`);
  });

  it('run --record FIFO', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'fifo'), peer);
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarchGuarded(['run', '--no-store', '--record', 'fifo', 'go'], { cwd, serverUrl: server.url });
    expectRefused(run, `exarch: cannot write the recording to fifo: ${NOT_REGULAR}`);
    expect(server.requests).toHaveLength(0);
  });

  it('run --trace FIFO', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'fifo'), peer);
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarchGuarded(['run', '--no-store', '--trace', 'fifo', 'go'], { cwd, serverUrl: server.url });
    expectRefused(run, `exarch: cannot write the trace to fifo: ${NOT_REGULAR}`);
    expect(server.requests).toHaveLength(0);
  });

  it('demo --trace FIFO', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'fifo'), peer);
    const run = await exarchGuarded(['demo', '--speed', '1000', '--trace', 'fifo'], { cwd });
    expectRefused(run, `exarch: cannot write the trace to fifo: ${NOT_REGULAR}`);
    expect(run.stdout).toBe('');
  });

  it('run --agents FIFO', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'fifo'), peer);
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    expectRefused(
      await exarchGuarded(['run', '--no-store', '--agents', 'fifo', 'go'], { cwd, serverUrl: server.url }),
      `exarch: cannot read fifo: ${NOT_REGULAR}`,
    );
  });

  it('a FIFO named exarch.config.json in the working directory (a sandboxed command can make one)', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'exarch.config.json'), peer);
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarchGuarded(['run', '--no-store', 'go'], { cwd, serverUrl: server.url });
    expectRefused(run, `exarch: cannot read exarch.config.json: ${NOT_REGULAR}`);
    expect(lstatSync(join(cwd, 'exarch.config.json')).isFIFO()).toBe(true);
  });

  it('view FIFO', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'fifo'), peer);
    expectRefused(await exarchGuarded(['view', 'fifo'], { cwd }), `exarch: cannot read the trace fifo: ${NOT_REGULAR}`);
  });

  it('view TRACE --out FIFO', async () => {
    const cwd = workdir();
    const trace = await aTrace(cwd);
    fifo(join(cwd, 'fifo'), peer);
    expectRefused(await exarchGuarded(['view', trace, '--out', 'fifo'], { cwd }), `exarch: cannot write the viewer page fifo: ${NOT_REGULAR}`);
    expect(lstatSync(join(cwd, 'fifo')).isFIFO()).toBe(true);
  });

  it('view RUN --out FIFO, and a FIFO where view RUN writes by default', async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ text: 'done' })] });
    const run = await exarch(['run', 'go'], { server, cwd });
    const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';
    fifo(join(cwd, 'fifo'), peer);
    expectRefused(await exarchGuarded(['view', id, '--out', 'fifo'], { cwd }), `exarch: cannot write the viewer page fifo: ${NOT_REGULAR}`);
    mkdirSync(join(cwd, '.exarch', 'view'), { recursive: true });
    fifo(join(cwd, '.exarch', 'view', `${id}.html`), peer);
    expectRefused(await exarchGuarded(['view', id], { cwd }), `exarch: cannot write the viewer page ${join('.exarch', 'view', `${id}.html`)}: ${NOT_REGULAR}`);
  });

  it('--store FIFO, for run, runs and view', async () => {
    const cwd = workdir();
    fifo(join(cwd, 'fifo'), peer);
    const line = `exarch: the run store ${join(cwd, 'fifo')} cannot be opened (${NOT_REGULAR})`;
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    expectRefused(await exarchGuarded(['run', '--store', 'fifo', 'go'], { cwd, serverUrl: server.url }), line);
    expectRefused(await exarchGuarded(['runs', '--store', 'fifo'], { cwd }), line);
    expectRefused(await exarchGuarded(['view', '01J0000000000000000000000A', '--store', 'fifo'], { cwd }), line);
    expect(server.requests).toHaveLength(0);
  });

  it('a FIFO where the run store keeps its WAL', async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ text: 'first' })] });
    expect((await exarch(['run', 'go'], { server, cwd })).code).toBe(0);
    // (SQLite removes the WAL when the last connection closes; a leftover one goes too.)
    rmSync(join(cwd, '.exarch', 'exarch.db-wal'), { force: true });
    fifo(join(cwd, '.exarch', 'exarch.db-wal'), peer);
    const run = await exarchGuarded(['runs'], { cwd });
    expectRefused(
      run,
      `exarch: the run store ${join(cwd, '.exarch', 'exarch.db')} cannot be opened (${join(cwd, '.exarch', 'exarch.db-wal')}: ${NOT_REGULAR})`,
    );
  });

  it("--log-dir with a FIFO where a sub-agent's log goes: one line, exit 5, the run resumable once it is gone", async () => {
    const cwd = workdir();
    const logs = join(cwd, 'logs');
    mkdirSync(logs);
    fifo(join(logs, 'root.worker.jsonl'), peer);
    // By history, so that a resume asking again from the same point gets the same answer.
    const server = await startAnthropicServer(
      historyHandler({
        root: [
          stream({ toolCalls: [call('agent', { name: 'worker', task: 'x' })] }),
          stream({ text: 'waiting' }),
          stream({ text: 'done' }),
          stream({ text: 'done' }),
        ],
        worker: [stream({ toolCalls: [call('reply', { result: 'found it' })] })],
      }),
    );
    onCleanup(() => server.close());
    const run = await exarchGuarded(['run', '--log-dir', logs, 'go'], { cwd, serverUrl: server.url });
    expect(run.hung).toBe(false);
    const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';
    expect(run.stderr).not.toContain('    at ');
    expect(run.stderr.split('\n').filter((line) => line.startsWith('exarch: cannot'))).toEqual([
      `exarch: cannot write the session log ${join(logs, 'root.worker.jsonl')}: ${NOT_REGULAR}; the run was stopped; once that is fixed, resume it with: exarch resume ${id}`,
    ]);
    expect(run.code).toBe(5);
    expect(run.stdout).toBe('');
    expect(lstatSync(join(logs, 'root.worker.jsonl')).isFIFO()).toBe(true);

    rmSync(join(logs, 'root.worker.jsonl'));
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.stderr).not.toContain('    at ');
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
  });

  it("--log-dir with a FIFO where the root's log goes: stopped before the first request, one line, exit 5, resumable", async () => {
    const cwd = workdir();
    const logs = join(cwd, 'logs');
    mkdirSync(logs);
    fifo(join(logs, 'root.jsonl'), peer);
    const server = await serve({ root: [stream({ text: 'done' })] });
    const run = await exarchGuarded(['run', '--log-dir', logs, 'go'], { cwd, serverUrl: server.url });
    expect(run.hung).toBe(false);
    const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';
    expect(run.stderr.split('\n').filter((line) => line.startsWith('exarch: cannot'))).toEqual([
      `exarch: cannot write the session log ${join(logs, 'root.jsonl')}: ${NOT_REGULAR}; the run was stopped; once that is fixed, resume it with: exarch resume ${id}`,
    ]);
    expect(run.code).toBe(5);
    expect(server.requests).toHaveLength(0);

    rmSync(join(logs, 'root.jsonl'));
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe('done\n');
  });
});

describe('SIGINT and SIGTERM end exarch where a blocking read would have held it', () => {
  /**
   * Sends `signal` to `pid` once the process holds `file` open (before, a read of a FIFO whose
   * writer never writes waited there for ever, deaf to signals), unless it has ended first.
   */
  async function signalWhileOpen(pid: number, file: string, signal: NodeJS.Signals, ended: () => boolean): Promise<void> {
    while (!ended()) {
      let open = false;
      try {
        open = readdirSync(`/proc/${pid}/fd`).some((fd) => {
          try {
            return readlinkSync(`/proc/${pid}/fd/${fd}`) === file;
          } catch {
            return false;
          }
        });
      } catch {
        return;
      }
      if (open) {
        process.kill(pid, signal);
        return;
      }
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  it.each([
    ['SIGINT', '--agents'],
    ['SIGTERM', '--agents'],
    ['SIGINT', '--replay'],
    ['SIGTERM', '--replay'],
  ] as const)('%s while exarch holds the FIFO it was given as %s', async (signal, flag) => {
    const cwd = workdir();
    const file = join(cwd, 'fifo');
    fifo(file, true);
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const child = spawn(process.execPath, [MAIN, 'run', '--no-store', flag, 'fifo', 'go'], {
      cwd,
      env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    let hung = false;
    const guard = setTimeout(() => {
      hung = true;
      child.kill('SIGKILL');
    }, HANG_GUARD_MS);
    const closed = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await signalWhileOpen(child.pid ?? 0, file, signal, () => child.exitCode !== null || child.signalCode !== null);
    const code = await closed;
    clearTimeout(guard);
    expect(hung).toBe(false);
    // Refused (exit 1, its one line) or, if the signal came first, interrupted (130): never left waiting.
    expect([1, 130]).toContain(code);
    expect(stderr).not.toContain('    at ');
    expect(server.requests).toHaveLength(0);
  });
});

describe('devices and sizes', () => {
  // Under a 2 GB address-space limit: a reader that did not stop at the file's kind fails fast
  // (out of memory) instead of growing the test machine past 5 GB.
  const SMALL_MEMORY = 'ulimit -v 2000000';

  it('run --replay /dev/zero is refused without reading it', async () => {
    const cwd = workdir();
    const run = await exarchGuarded(['run', '--no-store', '--replay', '/dev/zero', 'go'], { cwd, shell: SMALL_MEMORY });
    expectRefused(run, 'exarch: cannot read the recording /dev/zero: it is a character device, not a regular file');
  });

  it('a FIFO named exarch.config.json is refused without being opened: a writer waiting on it is never let through', async () => {
    // Opening some files does something even without a read (a device's driver acts on open). A
    // FIFO makes that visible: a writer blocked in its open goes on once anyone opens the read end.
    const cwd = workdir();
    execFileSync('mkfifo', [join(cwd, 'exarch.config.json')]);
    const writer = spawn('sh', ['-c', 'exec 3> exarch.config.json; echo opened > writer-went-on'], { cwd, stdio: 'ignore' });
    onCleanup(() => {
      if (writer.exitCode === null && writer.signalCode === null) writer.kill('SIGKILL');
    });
    // The kernel says where the writer sleeps: in the FIFO's open, waiting for a reader.
    const waitsForReader = (): boolean => readFileSync(`/proc/${writer.pid}/wchan`, 'utf8') === 'wait_for_partner';
    for (let i = 0; i < 200 && !waitsForReader(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(waitsForReader()).toBe(true);
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarchGuarded(['run', '--no-store', 'go'], { cwd, serverUrl: server.url });
    expectRefused(run, `exarch: cannot read exarch.config.json: ${NOT_REGULAR}`);
    // exarch has gone, and the writer still waits: an open by exarch would have woken it.
    expect(waitsForReader()).toBe(true);
    expect(readdirSync(cwd)).not.toContain('writer-went-on');
  });

  it('an exarch.config.json that links to /dev/zero is refused without reading it', async () => {
    const cwd = workdir();
    symlinkSync('/dev/zero', join(cwd, 'exarch.config.json'));
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarchGuarded(['run', '--no-store', 'go'], { cwd, serverUrl: server.url, shell: SMALL_MEMORY });
    expectRefused(run, 'exarch: cannot read exarch.config.json: it is a character device, not a regular file');
  });

  it('view /dev/zero, and --store /dev/zero', async () => {
    const cwd = workdir();
    expectRefused(
      await exarchGuarded(['view', '/dev/zero'], { cwd, shell: SMALL_MEMORY }),
      'exarch: cannot read the trace /dev/zero: it is a character device, not a regular file',
    );
    expectRefused(
      await exarchGuarded(['runs', '--store', '/dev/zero'], { cwd, shell: SMALL_MEMORY }),
      'exarch: the run store /dev/zero cannot be opened (it is a character device, not a regular file)',
    );
  });

  it('a directory as the recording or the trace', async () => {
    const cwd = workdir();
    mkdirSync(join(cwd, 'dir'));
    expectRefused(
      await exarchGuarded(['run', '--no-store', '--replay', 'dir', 'go'], { cwd }),
      'exarch: cannot read the recording dir: it is a directory, not a regular file',
    );
    expectRefused(await exarchGuarded(['view', 'dir'], { cwd }), 'exarch: cannot read the trace dir: it is a directory, not a regular file');
  });

  it('a recording of 300 MiB is refused by its size, unread', async () => {
    const cwd = workdir();
    // Sparse: 300 MiB by its size, no room on the disk.
    writeFileSync(join(cwd, 'big.jsonl'), '');
    truncateSync(join(cwd, 'big.jsonl'), 300 * 1024 * 1024);
    const run = await exarchGuarded(['run', '--no-store', '--replay', 'big.jsonl', 'go'], { cwd, shell: SMALL_MEMORY });
    expectRefused(run, 'exarch: cannot read the recording big.jsonl: it is 300 MiB, over the limit of 256 MiB');
  });

  it('a trace of 300 MiB is refused by its size, unread', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'big.jsonl'), '');
    truncateSync(join(cwd, 'big.jsonl'), 300 * 1024 * 1024);
    expectRefused(
      await exarchGuarded(['view', 'big.jsonl'], { cwd, shell: SMALL_MEMORY }),
      'exarch: cannot read the trace big.jsonl: it is 300 MiB, over the limit of 256 MiB',
    );
  });

  it('an agents config of 2 MiB is refused by its size', async () => {
    const cwd = workdir();
    const head = '{"agents": {}, "pad": "';
    writeFileSync(join(cwd, 'exarch.config.json'), `${head}${'x'.repeat(2 * 1024 * 1024 - head.length - 2)}"}`);
    const server = await serve({ root: [stream({ text: 'never asked' })] });
    const run = await exarchGuarded(['run', '--no-store', 'go'], { cwd, serverUrl: server.url });
    expectRefused(run, 'exarch: cannot read exarch.config.json: it is 2 MiB, over the limit of 1 MiB');
  });
});
