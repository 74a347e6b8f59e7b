import { spawn, execFileSync } from 'node:child_process';
import { closeSync, constants, lstatSync, openSync, readSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { call, lastUserText, MAIN, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * Issue 13, hole 3: `write_file` to a FIFO in the workspace opened it for writing, blocking, with
 * no reader: a thread of the pool waited for good, and the process could never exit. Now the
 * target is checked without ever waiting on it, and anything but a regular file is refused.
 */

/** Generous: the run takes well under a second; before, it never ended. */
const EXIT_LIMIT_MS = 20_000;

describe('write_file to a FIFO, through the real CLI', () => {
  it('is answered with an error naming the path, and the process exits on its own', async () => {
    const cwd = workdir();
    execFileSync('mkfifo', [path.join(cwd, 'pipe')]);
    let toldModel = '';
    const server = await serve({
      root: [
        stream({ toolCalls: [call('write_file', { path: 'pipe', content: 'hello' }), call('read_file', { path: 'pipe' })] }),
        (request) => {
          toldModel = lastUserText(request);
          return stream({ text: 'done' });
        },
      ],
    });
    const child = spawn(process.execPath, [MAIN, 'run', '--no-store', '--allow-write', 'write it'], {
      cwd,
      env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: server.url },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    const killer = setTimeout(() => child.kill('SIGKILL'), EXIT_LIMIT_MS);
    const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.on('close', (c, s) => resolve([c, s])));
    clearTimeout(killer);

    expect(signal).toBeNull();
    expect(code).toBe(0);
    expect(stdout).toBe('done\n');
    expect(toldModel).toContain(
      `[result error: ${JSON.stringify("tool 'write_file' failed: refused: 'pipe' is a FIFO, not a regular file; write_file only writes regular files")}]`,
    );
    expect(toldModel).toContain(
      `[result error: ${JSON.stringify("tool 'read_file' failed: 'pipe' is not a regular file (it is a FIFO); read_file only reads regular files")}]`,
    );
    expect(lstatSync(path.join(cwd, 'pipe')).isFIFO()).toBe(true);
  }, 30_000);
});

describe('write_file to other files that are not regular', () => {
  let root: string;
  beforeEach(async () => {
    root = await mkdtemp(path.join(tmpdir(), 'exarch-fifo-'));
  });
  afterEach(async () => {
    await rm(root, { recursive: true, force: true });
  });

  const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
  async function writeFile(file: string, content: string): Promise<string> {
    const tool = workspaceTools({ root, allowWrite: true }).find((t: Tool) => t.name === 'write_file');
    const prepared = tool?.prepare({ path: file, content });
    if (!prepared?.ok) throw new Error('cannot prepare write_file');
    return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
  }

  it('a FIFO with a reader is refused and gets nothing; it stays a FIFO', async () => {
    const fifo = path.join(root, 'pipe');
    execFileSync('mkfifo', [fifo]);
    // A reader that never waits: with it, a write open of the FIFO would succeed at once.
    const reader = openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK);
    try {
      await expect(writeFile('pipe', 'payload')).rejects.toThrow(/^refused: 'pipe' is a FIFO, not a regular file; write_file only writes regular files$/);
      const buffer = Buffer.alloc(64);
      let got = 0;
      try {
        got = readSync(reader, buffer, 0, buffer.length, null);
      } catch (error) {
        // EAGAIN: the pipe is empty, which is what is expected.
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      }
      expect(buffer.subarray(0, got).toString()).toBe('');
    } finally {
      closeSync(reader);
    }
    expect(lstatSync(fifo).isFIFO()).toBe(true);
  });

  it('a socket is refused by name in one line', async () => {
    const server: Server = createServer();
    await new Promise<void>((resolve) => server.listen(path.join(root, 'sock'), resolve));
    try {
      await expect(writeFile('sock', 'x')).rejects.toThrow(/^refused: 'sock' is a socket, not a regular file; write_file only writes regular files$/);
      expect(lstatSync(path.join(root, 'sock')).isSocket()).toBe(true);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
