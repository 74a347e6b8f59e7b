import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tool } from '../../../../src/tools/defineTool.js';
import { runShellTool } from '../../../../src/tools/workspace/runShell.js';

/**
 * How long a run_shell command (unsandboxed) and what it starts live: a timeout ends the whole
 * process group, politely first; an aborted call ends it at once; what the command leaves in the
 * background goes with it, and a process that escaped the group cannot hold the result back.
 */

const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
let root: string;

beforeAll(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'exarch-shell-lifetime-'));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

function start(command: string, tool: Tool = runShellTool(root), signal: AbortSignal = new AbortController().signal): Promise<string> {
  const prepared = tool.prepare({ command });
  if (!prepared.ok) throw new Error(prepared.error);
  return prepared.value({ agent, toolUseId: 'toolu_1', signal }).then(String);
}

/** Alive and not a zombie waiting for its parent (PID 1 of a container may never reap it). */
function alive(pid: number): boolean {
  try {
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

async function until(condition: () => boolean, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  while (!condition()) {
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return true;
}

describe('a command that runs too long', () => {
  it('is sent SIGTERM at its time limit, and the result says it timed out, with what it printed', async () => {
    const text = await start("trap 'echo got TERM; exit 5' TERM; echo started; sleep 30 & wait", runShellTool(root, 300));
    expect(text).toBe('timed out after 300 ms: the command and everything it started were killed\n--- stdout ---\nstarted\ngot TERM');
  });

  it('every process it started is sent SIGTERM, not only the shell', async () => {
    // The inner shell announces its SIGTERM; the outer one waits for it to have done so.
    const command = "trap 'wait' TERM; sh -c 'trap \"echo inner got TERM; exit 0\" TERM; sleep 30 & wait' & wait";
    const text = await start(command, runShellTool(root, 300));
    expect(text).toBe('timed out after 300 ms: the command and everything it started were killed\n--- stdout ---\ninner got TERM');
  });

  it('is sent SIGKILL two seconds later when it ignores SIGTERM', async () => {
    const started = Date.now();
    // An ignored signal stays ignored in the children: sleep ignores SIGTERM too.
    const text = await start("trap '' TERM; echo started; sleep 20", runShellTool(root, 200));
    expect(text).toBe('timed out after 200 ms: the command and everything it started were killed\n--- stdout ---\nstarted');
    expect(Date.now() - started).toBeGreaterThanOrEqual(2_000);
    expect(Date.now() - started).toBeLessThan(15_000);
  });
});

describe('a finished call', () => {
  it('leaves no timer behind: its time limit and output drain are cleared with the result', async () => {
    const timers = (): number => process.getActiveResourcesInfo().filter((resource) => resource === 'Timeout').length;
    const before = timers();
    expect(await start('echo quick', runShellTool(root, 60_000))).toBe('exit code: 0\n--- stdout ---\nquick');
    expect(timers()).toBe(before);
  });
});

describe('an aborted call', () => {
  it('rejects with the reason the session gave and ends the command at once', async () => {
    const controller = new AbortController();
    const pidFile = path.join(root, 'abort-pid');
    const running = start(`echo $$ > '${pidFile}'; exec sleep 30`, runShellTool(root), controller.signal);
    expect(await until(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8').endsWith('\n'), 10_000)).toBe(true);
    const pid = Number(readFileSync(pidFile, 'utf8'));
    const reason = new Error('cancelled by the session');
    controller.abort(reason);
    await expect(running).rejects.toBe(reason);
    expect(await until(() => !alive(pid), 1_500)).toBe(true);
  });

  it('rejects with "run_shell was cancelled" when the reason is not an Error', async () => {
    const controller = new AbortController();
    const running = start('sleep 30', runShellTool(root), controller.signal);
    setTimeout(() => controller.abort('stop'), 50);
    await expect(running).rejects.toThrow(new Error('run_shell was cancelled'));
  });

  it('does not start a command when the call was aborted before it ran', async () => {
    const controller = new AbortController();
    const reason = new Error('too late');
    controller.abort(reason);
    const marker = path.join(root, 'never-made');
    await expect(start(`touch '${marker}'`, runShellTool(root), controller.signal)).rejects.toBe(reason);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(existsSync(marker)).toBe(false);
  });
});

describe('what a command leaves in the background', () => {
  it('is killed when the command exits, so the result comes at once', async () => {
    const started = Date.now();
    const text = await start('sleep 31 & echo $!');
    const pid = Number(/stdout ---\n(\d+)$/.exec(text)?.[1]);
    expect(text).toBe(`exit code: 0\n--- stdout ---\n${pid}`);
    expect(Date.now() - started).toBeLessThan(900);
    expect(await until(() => !alive(pid), 1_500)).toBe(true);
  });

  it('is killed even when it ignores SIGTERM', async () => {
    const started = Date.now();
    const text = await start("trap '' TERM; sleep 33 & echo $!");
    const pid = Number(/stdout ---\n(\d+)$/.exec(text)?.[1]);
    try {
      expect(text).toBe(`exit code: 0\n--- stdout ---\n${pid}`);
      expect(Date.now() - started).toBeLessThan(900);
      expect(await until(() => !alive(pid), 1_500)).toBe(true);
    } finally {
      if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });

  it('cannot hold the result back when it left the process group: after a second its output is given up', async () => {
    // setsid moves the shell into a session of its own, out of the group's reach; it keeps stdout
    // open. The command waits until it has moved, so the group's end cannot catch it first.
    const pidFile = path.join(root, 'escaped-pid');
    const text = await start(
      `setsid sh -c 'echo $$ > ${pidFile}; exec sleep 32' & while [ ! -s '${pidFile}' ]; do sleep 0.01; done; cat '${pidFile}'; echo done`,
    );
    const pid = Number(/stdout ---\n(\d+)\n/.exec(text)?.[1]);
    try {
      expect(text).toBe(
        `exit code: 0\n--- stdout ---\n${pid}\ndone\n(processes it left running in the background still hold its output; their output is not shown)`,
      );
    } finally {
      if (pid > 0 && alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});
