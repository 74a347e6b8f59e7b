import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools, type WorkspaceToolsOptions } from '../../../src/tools/workspace/index.js';
import { canSwitchUser, giveTo, UNLISTED_UID } from '../../support/asUser.js';
import { requireBubblewrap } from '../../support/bubblewrap.js';
import { tasksOf } from '../../support/processes.js';
import { until } from '../../support/until.js';

/**
 * Issue 37: a sandboxed command is limited in processes, memory, file size and CPU time, and the
 * model is told which limit stopped it. Real bubblewrap; the attacks are real (a fork bomb, a
 * memory balloon, a file past its limit, an endless loop), each run only once the limit it needs
 * is seen in force inside, so that a sandbox without limits fails the test and not the machine.
 */

const BWRAP = requireBubblewrap('test/e2e/hostile/sandboxLimits.test.ts');
const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' } as const;
let base: string;
let root: string;

beforeAll(async () => {
  base = mkdtempSync(join(tmpdir(), 'exarch-limits-'));
  root = join(base, 'work');
  spawnSync('mkdir', [root]);
  // Run as root (CI), exarch runs commands as the workspace's owner: a uid nothing else runs as,
  // so that the host can count the command's processes by it.
  if (canSwitchUser) await giveTo(UNLISTED_UID, base, root);
});
afterAll(() => {
  rmSync(base, { recursive: true, force: true });
});

type Options = Pick<WorkspaceToolsOptions, 'shellLimits' | 'shellTimeoutMs'>;

async function shell(command: string, options: Options = {}): Promise<string> {
  const tool = workspaceTools({ root, allowShell: true, ...options }).find((t: Tool) => t.name === 'run_shell');
  const prepared = tool?.prepare({ command });
  if (!prepared?.ok) throw new Error('cannot prepare run_shell');
  return String(await prepared.value({ agent, toolUseId: 'toolu_1', signal: new AbortController().signal }));
}

/** The soft and hard values of a row of the command's /proc/self/limits, as the kernel shows them. */
async function limitInside(row: string, options: Options): Promise<string> {
  const out = await shell(`grep '^${row}' /proc/self/limits`, options);
  return out.split('\n')[2]?.slice(row.length).trim().split(/\s+/).slice(0, 2).join(' ') ?? out;
}

describe.skipIf(BWRAP === undefined)('the limits of a sandboxed command', () => {
  it('by default: 1024 processes, 8 GiB of memory and 8192 descriptors per process, 4 GiB per file, 600 s of CPU time (SIGKILL a second later)', async () => {
    const out = await shell('cat /proc/self/limits');
    expect(out).toMatch(/^Max processes +1024 +1024 /m);
    expect(out).toMatch(/^Max data size +8589934592 +8589934592 /m);
    expect(out).toMatch(/^Max file size +4294967296 +4294967296 /m);
    expect(out).toMatch(/^Max cpu time +600 +601 /m);
    expect(out).toMatch(/^Max open files +8192 +8192 /m);
  });

  it.skipIf(!canSwitchUser)('a fork bomb holds at most its processes, the host forks on (as the same user too), and it ends with its call', async () => {
    const options = { shellLimits: { processes: 48 }, shellTimeoutMs: 6_000 };
    expect(await limitInside('Max processes', options)).toBe('48 48');
    // The call returns once bubblewrap has; its orphaned helper may take a moment longer to exit.
    await until(() => tasksOf(UNLISTED_UID) === 0, 'the last command to be gone', 10_000);
    let peak = 0;
    let hostForked: number | null = null;
    let sameUserForked: number | null = null;
    const watching = setInterval(() => {
      peak = Math.max(peak, tasksOf(UNLISTED_UID));
      // At its ceiling, the bomb's user still starts a process outside: the limit is the command's, not the user's.
      if (peak >= 40 && sameUserForked === null) {
        hostForked = spawnSync('/bin/true').status;
        sameUserForked = spawnSync('/bin/true', { uid: UNLISTED_UID, gid: UNLISTED_UID }).status;
      }
    }, 20);
    let out: string;
    try {
      // bash's, which retries a refused fork (dash's dies out at once). The shell then waits on a
      // FIFO no one opens: a builtin read, which needs no process the bomb may have taken.
      out = await shell(`mkfifo /tmp/hold; bash -c 'bomb() { bomb | bomb & }; bomb'; read line < /tmp/hold`, options);
    } finally {
      clearInterval(watching);
    }
    // The command's processes, plus bubblewrap's own outside the namespace.
    expect(peak).toBeGreaterThanOrEqual(40);
    expect(peak).toBeLessThanOrEqual(48 + 1);
    expect(hostForked).toBe(0);
    expect(sameUserForked).toBe(0);
    expect(out).toMatch(/^timed out after 6 s: the command and everything it started were killed\n/);
    expect(out).toMatch(
      /\nsandbox limit probably reached: processes: 48 processes and threads at once — the output says "[^"]+": a new process or thread was refused$/,
    );
    await until(() => tasksOf(UNLISTED_UID) === 0, "the bomb's processes to be gone", 10_000);
  });

  it('a memory balloon is stopped at its limit, and the model is told the memory limit', async () => {
    const options = { shellLimits: { memory: 256 * 1024 ** 2 } };
    expect(await limitInside('Max data size', options)).toBe('268435456 268435456');
    // 16 MiB at a time, every page written, up to 1 GiB: the count of MiB held after each step.
    const balloon = `'${process.execPath}' -e "const held = []; for (let i = 1; i <= 64; i++) { held.push(Buffer.alloc(16 << 20, 1)); console.log(i * 16) }"`;
    const out = await shell(balloon, options);
    const held = out.match(/^\d+$/gm)?.map(Number) ?? [];
    expect(Math.max(0, ...held)).toBeLessThan(256);
    expect(out).toMatch(/^exit code: [1-9]/);
    expect(out).toContain('RangeError: Array buffer allocation failed');
    expect(out).toMatch(/\nsandbox limit probably reached: memory: 256 MiB per process — the output says "allocation failed": an allocation was refused$/);
  });

  it('a file is cut at its limit: SIGXFSZ for the shell, EFBIG for a program that ignores it, and the model is told', async () => {
    const options = { shellLimits: { fileSize: 4 * 1024 ** 2 } };
    expect(await limitInside('Max file size', options)).toBe('4194304 4194304');
    const out = await shell('head -c 32M /dev/zero > big.bin', options);
    expect(statSync(join(root, 'big.bin')).size).toBe(4 * 1024 ** 2);
    expect(out).toMatch(/^exit code: 153 \(SIGXFSZ\)\n/);
    expect(out).toMatch(/\nsandbox limit reached: file-size — a process wrote past 4 MiB in one file and was killed by SIGXFSZ \(the file stops there\)$/);

    const efbig = await shell(`'${process.execPath}' -e "require('fs').writeFileSync('node.bin', Buffer.alloc(32 << 20))"`, options);
    expect(statSync(join(root, 'node.bin')).size).toBe(4 * 1024 ** 2);
    expect(efbig).toContain('EFBIG: file too large');
    expect(efbig).toMatch(/\nsandbox limit probably reached: file-size: 4 MiB per file — the output says "EFBIG": a write past the limit was refused$/);
  });

  it('an endless loop is stopped by its CPU limit long before its timeout: SIGXCPU, or SIGKILL a second later if it ignores that', async () => {
    const options = { shellLimits: { cpu: 1 }, shellTimeoutMs: 60_000 };
    expect(await limitInside('Max cpu time', options)).toBe('1 2');
    const out = await shell('while :; do :; done', options);
    expect(out).toBe('exit code: 152 (SIGXCPU)\n(no output)\nsandbox limit reached: cpu — a process used its 1 s of CPU time and was killed by SIGXCPU');
    const stubborn = await shell("trap '' XCPU; while :; do :; done", options);
    expect(stubborn).toBe(
      "exit code: 137 (SIGKILL)\n(no output)\nkilled by SIGKILL, not by exarch's timeout: the hard stop of the cpu limit (1 s, for a process that ignores SIGXCPU) or the kernel's out-of-memory killer",
    );
  });

  it('the model is told every limit in the tool description', () => {
    const tool = workspaceTools({ root, allowShell: true, shellLimits: { memory: 'unlimited', cpu: 30 } }).find((t) => t.name === 'run_shell');
    expect(tool?.spec.description).toContain(
      'Limits: processes: 1024 processes and threads at once, memory: not limited, file-size: 4 GiB per file, cpu: 30 s of CPU time per process, open-files: 8192 per process.',
    );
  });

  it('limits that are no limit or not a number are refused by name', () => {
    expect(() => workspaceTools({ root, allowShell: true, shellLimits: { processes: 0 } })).toThrow(
      "exarch: shellLimits.processes must be an integer ≥ 1 or 'unlimited', got 0",
    );
    expect(() => workspaceTools({ root, allowShell: true, shellLimits: { memory: 1.5 } })).toThrow(
      /^exarch: shellLimits\.memory must be an integer ≥ 16777216/,
    );
    expect(() => workspaceTools({ root, allowShell: 'unsandboxed', shellLimits: { cpu: 5 } })).toThrow(/are for sandboxed commands/);
  });
});
