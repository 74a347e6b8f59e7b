import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterEach } from 'vitest';
import { responseEvents, scriptedHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest, type ServerPlan } from './anthropicServer.js';

/**
 * `npx exarch …` as a black box for tests: the compiled command (dist/, built by
 * test/globalSetup.ts) in a child process, against the local SSE server. Temporary directories
 * and servers made here are removed after each test.
 */

export const MAIN = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));
const cleanups: (() => Promise<void> | void)[] = [];

/** Runs `cleanup` after the current test (in reverse order of registration). */
export function onCleanup(cleanup: () => Promise<void> | void): void {
  cleanups.push(cleanup);
}
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

export const stream = (spec: Parameters<typeof responseEvents>[0], extra: Partial<Extract<ServerPlan, { kind: 'stream' }>> = {}): ServerPlan => ({
  kind: 'stream',
  events: responseEvents(spec),
  ...extra,
});
export const call = (name: string, input: unknown) => ({ name, input });

/** The text of the last user message of a request: what the agent was just told. */
export function lastUserText(request: ReceivedRequest): string {
  const last = request.body.messages.at(-1);
  if (last?.role !== 'user') return '';
  if (typeof last.content === 'string') return last.content;
  return last.content
    .map((b) =>
      b.type === 'text'
        ? String(b['text'])
        : b.type === 'tool_result'
          ? `[result ${String(b['is_error'] === true ? 'error' : 'ok')}: ${JSON.stringify(b['content'])}]`
          : '',
    )
    .join('\n');
}

/** A root that spawns, waits, and then answers with exactly what its inbox said. */
export const echoInbox = (request: ReceivedRequest): ServerPlan => stream({ text: `Heard:\n${lastUserText(request)}` });

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export async function exarch(
  args: readonly string[],
  options: {
    server?: AnthropicTestServer;
    env?: Record<string, string>;
    cwd?: string;
    whenRequests?: { count: number; then: (child: ReturnType<typeof spawn>) => void };
  } = {},
): Promise<CliRun> {
  const cwd = options.cwd ?? workdir();
  const env: NodeJS.ProcessEnv = {
    PATH: process.env['PATH'],
    CI: 'true',
    ...(options.server ? { ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: options.server.url } : {}),
    ...options.env,
  };
  const child = spawn(process.execPath, [MAIN, ...args], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  if (options.whenRequests && options.server) {
    const { count, then } = options.whenRequests;
    const server = options.server;
    const poll = setInterval(() => {
      if (server.requests.length >= count) {
        clearInterval(poll);
        setTimeout(() => then(child), 100);
      }
    }, 10);
    child.on('exit', () => clearInterval(poll));
  }
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
  return { code, signal, stdout, stderr };
}

export function workdir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-cli-'));
  cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export async function serve(scripts: Parameters<typeof scriptedHandler>[0]): Promise<AnthropicTestServer> {
  const server = await startAnthropicServer(scriptedHandler(scripts));
  cleanups.push(() => server.close());
  return server;
}

export function readJsonl(file: string): Record<string, unknown>[] {
  return readFileSync(file, 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A port on 127.0.0.1 that was free a moment ago (for a command told to listen on it). */
export function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

export interface Running {
  readonly child: ChildProcessWithoutNullStreams;
  readonly stdout: () => string;
  readonly stderr: () => string;
  send(line: string): void;
  until(what: string, check: () => boolean): Promise<void>;
  /** The exit code (null after a signal). */
  readonly exit: Promise<number | null>;
  /** How it ended, with everything it wrote. */
  readonly closed: Promise<CliRun>;
}

/**
 * `exarch ARGS` in the background, its stdin open (lines are sent as the test goes), its output
 * kept; killed when the test ends if it still runs.
 */
export function startExarch(args: readonly string[], server: { url: string }, cwd: string): Running {
  const child = spawn(process.execPath, [MAIN, ...args], {
    cwd,
    env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: server.url },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<CliRun>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  onCleanup(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  return {
    child,
    stdout: () => stdout,
    stderr: () => stderr,
    send: (line) => child.stdin.write(`${line}\n`),
    async until(what, check) {
      const end = Date.now() + 60_000;
      while (!check()) {
        if (Date.now() > end) {
          child.kill();
          throw new Error(`timed out waiting for ${what}; stderr so far:\n${stderr}`);
        }
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    },
    exit: closed.then((run) => run.code),
    closed,
  };
}
