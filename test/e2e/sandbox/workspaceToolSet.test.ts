import { existsSync, readFileSync } from 'node:fs';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';
import { callTool, makeWorkspace, type Workspace } from '../../support/workspaceFixture.js';

/** Which workspace tools an agent is given, and the working directories refused before any is made. */

let ws: Workspace;
beforeEach(async () => {
  ws = await makeWorkspace();
  // Run as root (CI), exarch runs sandboxed commands as the working directory's owner; nobody may
  // reach `outside` too, so that only the sandbox keeps a command from writing there.
  if (canSwitchUser) await giveToNobody(ws.base, ws.root, ws.outside);
});
afterEach(async () => {
  await ws.remove();
});

const names = (options: Parameters<typeof workspaceTools>[0]): string[] => workspaceTools(options).map((tool) => tool.name);

describe('the tools offered', () => {
  it('write_file and run_shell only when asked for with true (or unsandboxed for the shell)', () => {
    expect(names({ root: ws.root, allowWrite: false, allowShell: false })).toEqual(['read_file', 'list_dir', 'search_files']);
    expect(names({ root: ws.root, allowShell: 'unsandboxed' })).toEqual(['read_file', 'list_dir', 'search_files', 'run_shell']);
    expect(names({ root: ws.root, allowWrite: true, allowShell: 'unsandboxed' })).toEqual(['read_file', 'list_dir', 'search_files', 'write_file', 'run_shell']);
  });

  it('unsandboxed commands reach outside the working directory; sandboxed ones do not', async () => {
    const outsideFile = path.join(ws.outside, 'touched');
    await callTool(workspaceTools({ root: ws.root, allowShell: 'unsandboxed' }), 'run_shell', { command: `touch '${outsideFile}'` });
    expect(existsSync(outsideFile)).toBe(true);
    await rm(outsideFile);
    await callTool(workspaceTools({ root: ws.root, allowShell: true }), 'run_shell', { command: `touch '${outsideFile}'` }).catch(() => undefined);
    expect(existsSync(outsideFile)).toBe(false);
  });

  it('a sandboxed command sees the host network only with allowNetwork', async () => {
    const interfaces = async (allowNetwork: boolean): Promise<string> =>
      callTool(workspaceTools({ root: ws.root, allowShell: true, allowNetwork }), 'run_shell', {
        command: "awk 'NR>2{print $1}' /proc/net/dev | sort | tr -d '\\n'",
      });
    const host = readFileSync('/proc/net/dev', 'utf8')
      .split('\n')
      .slice(2)
      .map((line) => line.trim().split(':')[0])
      .filter((name) => name !== undefined && name !== '');
    expect(await interfaces(false)).toContain('lo:');
    expect(await interfaces(false)).not.toContain('eth0:');
    if (host.includes('eth0')) expect(await interfaces(true)).toContain('eth0:');
  });

  it('a relative working directory is taken from the current directory', async () => {
    await writeFile(path.join(ws.root, 'here.txt'), 'here\n');
    const tools = workspaceTools({ root: path.relative(process.cwd(), ws.root) });
    expect(await callTool(tools, 'read_file', { path: 'here.txt' })).toBe('here\n');
  });
});

describe('working directories refused', () => {
  it('a file, named by its absolute path', async () => {
    const file = path.join(ws.root, 'plain.txt');
    await writeFile(file, '');
    expect(() => workspaceTools({ root: file })).toThrow(`exarch: the working directory ${file} does not exist or is not a directory`);
  });

  it('a missing directory given relative is named by its absolute path', () => {
    const relative = path.relative(process.cwd(), path.join(ws.base, 'missing'));
    expect(() => workspaceTools({ root: relative })).toThrow(
      `exarch: the working directory ${path.join(ws.base, 'missing')} does not exist or is not a directory`,
    );
  });
});
