import { copyFileSync, existsSync, mkdirSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer } from '../../support/anthropicServer.js';
import { call, exarch, onCleanup, stream, workdir, type CliRun } from '../../support/cliHarness.js';

/**
 * Issue 37 (seams: the run store × the agents' workspace): a `--store FILE` in the working
 * directory but outside `.exarch/` had only the file itself (and its WAL) protected: its
 * `-journal`, and the file before it existed, were the agents' to write, and the journal (the
 * approvals answered `always`, which a resume obeys) is not signed. A run whose agents may write is
 * now refused such a store, as a usage error in one line, before anything starts.
 */

let state: string;
beforeEach(() => {
  state = mkdtempSync('/var/tmp/exarch-state-');
  onCleanup(() => rmSync(state, { recursive: true, force: true }));
});

async function serve(): Promise<AnthropicTestServer> {
  const server = await startAnthropicServer(
    historyHandler({ root: [stream({ toolCalls: [call('write_file', { path: 'notes.md', content: 'x\n' })] }), stream({ text: 'done' })] }),
  );
  onCleanup(() => server.close());
  return server;
}

function run(args: readonly string[], cwd: string, server: AnthropicTestServer): Promise<CliRun> {
  return exarch(args, { cwd, server, env: { EXARCH_STATE_DIR: state } });
}

const refusal = (shown: string): string =>
  `exarch: --store ${shown} is in the working directory, where agents that may write (--allow-write, --allow-shell) could change what a resume reads: keep it under .exarch/ or outside the working directory`;

describe('--store in the working directory, outside .exarch/', () => {
  it('is refused, in one line and before anything starts, for a run whose agents may write: by name, and through a symlink from outside', async () => {
    const cwd = workdir();
    const outside = workdir();
    mkdirSync(join(cwd, 'data'));
    // Outside by name, in the working directory in fact.
    symlinkSync(join(cwd, 'data'), join(outside, 'into-workspace'));
    const server = await serve();
    for (const [flags, store] of [
      [['--allow-write'], 'data/runs.db'],
      [['--allow-shell'], 'runs.db'],
      [['--allow-shell=unsandboxed'], 'data/deeper/runs.db'],
      [['--allow-write'], join(outside, 'into-workspace', 'runs.db')],
    ] as const) {
      const result = await run(['run', ...flags, '--store', store, 'Go'], cwd, server);
      expect(result.code, `${flags.join(' ')} ${store}`).toBe(2);
      expect(result.stderr.split('\n')[0]).toBe(refusal(store));
      expect(result.stderr).not.toContain('--allow-shell=unsandboxed: shell commands run without a sandbox');
    }
    expect(server.requests).toEqual([]);
    expect(existsSync(join(cwd, 'runs.db'))).toBe(false);
    expect(existsSync(join(cwd, 'data', 'runs.db'))).toBe(false);
  });

  it('is kept under .exarch/, outside the working directory, or for a run whose agents only read', async () => {
    const cwd = workdir();
    const outside = workdir();
    for (const args of [
      ['--allow-write', '--store', '.exarch/mine.db'],
      ['--allow-write', '--store', join(outside, 'runs.db')],
      ['--store', 'data/runs.db'],
    ]) {
      const result = await run(['run', ...args, 'Go'], cwd, await serve());
      expect(result.code, `${args.join(' ')}: ${result.stderr}`).toBe(0);
      expect(result.stdout).toBe('done\n');
    }
    expect(existsSync(join(cwd, '.exarch', 'mine.db'))).toBe(true);
    expect(existsSync(join(outside, 'runs.db'))).toBe(true);
  });

  it('resume refuses it the same way for a run recorded with write access (a store moved into the working directory)', async () => {
    const cwd = workdir();
    const outside = workdir();
    const server = await startAnthropicServer(
      historyHandler({ root: [stream({ toolCalls: [call('write_file', { path: 'notes.md', content: 'x\n' })] }), stream({ text: 'done' })] }),
    );
    onCleanup(() => server.close());
    const first = await run(['run', '--allow-write', '--approve', 'write_file', '--no-wait', '--store', join(outside, 'runs.db'), 'Go'], cwd, server);
    expect(first.code, first.stderr).toBe(4);
    const id = /^exarch: run (\S+) started$/m.exec(first.stderr)?.[1] ?? '';
    mkdirSync(join(cwd, 'data'));
    copyFileSync(join(outside, 'runs.db'), join(cwd, 'data', 'runs.db'));
    const requests = server.requests.length;
    const resumed = await run(['resume', id, '--no-wait', '--store', 'data/runs.db'], cwd, server);
    expect(resumed.code).toBe(2);
    expect(resumed.stderr.split('\n')[0]).toBe(refusal('data/runs.db'));
    expect(server.requests.length).toBe(requests);
    expect(existsSync(join(cwd, 'notes.md'))).toBe(false);
  });
});
