import { describe, expect, it } from 'vitest';
import { readRecord, recordFromFlags } from '../../../../src/cli/runRecord.js';
import { DEFAULT_SHELL_LIMITS } from '../../../../src/tools/workspace/shellLimits.js';

/** `--shell-limits` as a run records it, and as a resume reads it back from a store anyone may have written. */

const cwd = process.cwd();
const env = {};

describe('the limits a run records', () => {
  it('are all of them, defaults filled in, and only for sandboxed commands', () => {
    expect(recordFromFlags({ allowShell: true, shellLimits: 'cpu=5m,memory=2G' }, env, cwd).shellLimits).toEqual({
      ...DEFAULT_SHELL_LIMITS,
      cpu: 300,
      memory: 2 * 1024 ** 3,
    });
    expect(recordFromFlags({ allowShell: true }, env, cwd).shellLimits).toEqual(DEFAULT_SHELL_LIMITS);
    expect(recordFromFlags({ allowShell: true, shellLimits: 'processes=unlimited,file-size=512k' }, env, cwd).shellLimits).toEqual({
      ...DEFAULT_SHELL_LIMITS,
      processes: 'unlimited',
      fileSize: 512 * 1024,
    });
    expect(recordFromFlags({ allowShell: 'unsandboxed' }, env, cwd).shellLimits).toBeUndefined();
    expect(recordFromFlags({}, env, cwd).shellLimits).toBeUndefined();
  });

  it('read back, keep each valid value and put a bad one back to its default, never to no limit', () => {
    const stored = {
      tools: [],
      allowShell: true,
      shellLimits: { processes: 77, memory: -1, fileSize: 'lots', cpu: 1.5, openFiles: 'unlimited', extra: 1 },
      shellUser: 'alice',
    };
    expect(readRecord(stored)).toMatchObject({
      shellLimits: { ...DEFAULT_SHELL_LIMITS, processes: 77, openFiles: 'unlimited' },
      shellUser: 'alice',
    });
    expect(readRecord({ tools: [], allowShell: true, shellLimits: [1, 2], shellUser: '$(id)' })).not.toHaveProperty('shellUser');
    expect(readRecord({ tools: [], allowShell: true, shellLimits: [1, 2] })).not.toHaveProperty('shellLimits');
  });
});
