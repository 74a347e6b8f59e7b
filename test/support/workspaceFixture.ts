import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Tool } from '../../src/tools/defineTool.js';
import { workspaceTools } from '../../src/tools/workspace/index.js';

/** A real temporary working directory (`root`) with a sibling (`outside`) that no workspace tool may reach. */
export interface Workspace {
  readonly base: string;
  readonly root: string;
  readonly outside: string;
  /** Calls a workspace tool the way the session does (validation by `prepare`, then the run) and returns its text. */
  call(name: string, input: unknown, signal?: AbortSignal): Promise<string>;
  remove(): Promise<void>;
}

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;

export async function makeWorkspace(): Promise<Workspace> {
  const base = await mkdtemp(path.join(tmpdir(), 'exarch-ws-'));
  const root = path.join(base, 'work');
  const outside = path.join(base, 'outside');
  await mkdir(root);
  await mkdir(outside);
  return {
    base,
    root,
    outside,
    call: (name, input, signal) => callTool(workspaceTools({ root, allowWrite: true }), name, input, signal),
    remove: () => rm(base, { recursive: true, force: true }),
  };
}

export async function callTool(tools: readonly Tool[], name: string, input: unknown, signal: AbortSignal = new AbortController().signal): Promise<string> {
  const tool = tools.find((t) => t.name === name);
  if (tool === undefined) throw new Error(`no tool named ${name}`);
  const prepared = tool.prepare(input);
  if (!prepared.ok) throw new Error(prepared.error);
  // vitest's rejects.toThrow(pattern) passes on a rejection with undefined: make any non-Error one fail every such check.
  const value = await prepared.value({ agent, toolUseId: 'toolu_1', signal }).catch((error: unknown) => {
    throw error instanceof Error ? error : new Error(`${name} rejected with a non-Error: ${String(error)}`);
  });
  if (typeof value !== 'string') throw new Error(`expected text from ${name}, got ${typeof value}`);
  return value;
}

/** Runs `check` while a Unix socket listens at `file`. */
export async function withSocket(file: string, check: () => Promise<void>): Promise<void> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(file, resolve));
  try {
    await check();
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

/** Makes a character device `chr` (null) and a block device `blk` (loop0) in `dir`; skips the test where mknod is not allowed. */
export function makeDevices(dir: string, context: { skip(note: string): void }): void {
  try {
    execFileSync('mknod', [path.join(dir, 'chr'), 'c', '1', '3']);
    execFileSync('mknod', [path.join(dir, 'blk'), 'b', '7', '0']);
  } catch {
    context.skip('mknod needs privileges this run does not have');
  }
}
