import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../support/cliHarness.js';

/** exarch view, demo's trace and viewer, --inspect and --ui, through the compiled command (dist/ from test/globalSetup.ts). */

const MAIN = fileURLToPath(new URL('../../../dist/src/cli/main.js', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function workdir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-view-'));
  dirs.push(dir);
  return dir;
}

function exarch(args: readonly string[], cwd: string) {
  return spawnSync(process.execPath, [MAIN, ...args], { cwd, encoding: 'utf8', env: { PATH: process.env['PATH'], CI: 'true' }, timeout: 60_000 });
}

describe('exarch demo and exarch view', () => {
  it('the demo records a trace, writes its viewer and says where both are', () => {
    const cwd = workdir();
    const run = exarch(['demo', '--speed', '100'], cwd);
    expect(run.status).toBe(0);
    expect(run.stderr).toContain('Turn flow recorded: .exarch/demo/trace.jsonl');
    expect(run.stderr).toContain('Open it in a browser: .exarch/demo/trace.html');
    const html = readFileSync(join(cwd, '.exarch/demo/trace.html'), 'utf8');
    expect(html).toContain('root/explorer');
  });

  it('view writes the HTML for a trace to --out and prints its path', () => {
    const cwd = workdir();
    expect(exarch(['demo', '--speed', '100', '--trace', 'run.jsonl'], cwd).status).toBe(0);
    const run = exarch(['view', 'run.jsonl', '--out', 'flow/page.html'], cwd);
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toBe('flow/page.html');
    expect(run.stderr).toMatch(/wrote the turn-flow viewer for 3 agents/);
    expect(existsSync(join(cwd, 'flow/page.html'))).toBe(true);
  });

  it('view of a file that is not a trace fails with one line', () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'notes.txt'), 'hello\n');
    const run = exarch(['view', 'notes.txt'], cwd);
    expect(run.status).toBe(1);
    expect(run.stderr.trim()).toMatch(/^exarch: notes\.txt: trace line 1 is not JSON/);
    expect(run.stderr.trim().split('\n')).toHaveLength(1);
    expect(exarch(['view'], cwd).status).toBe(2);
  });

  it('view of a name that is neither a file nor a run says in one line that it looked for both, and where', () => {
    const cwd = workdir();
    const store = join(cwd, '.exarch', 'exarch.db');
    for (const target of ['01NOPE', 'traces/gone.jsonl', '01ARZ3NDEKTSV4RRFFQ69G5FAV']) {
      const run = exarch(['view', target], cwd);
      expect(run.status, target).toBe(1);
      expect(run.stderr, target).toBe(
        `exarch: ${target} is neither a file nor a run id in ${store}${target.length === 26 ? ' (there is no run store there yet)' : ''}\n`,
      );
    }
    // A store that holds other runs: test/e2e/resume/cli.durable.test.ts.
  });

  it('--inspect starts the live inspector on loopback and tells the user where to look', async () => {
    const cwd = workdir();
    const port = await freePort();
    const run = exarch(['demo', '--speed', '100', '--inspect', '--inspect-port', String(port)], cwd);
    expect(run.status).toBe(0);
    expect(run.stderr).toContain(`Live inspector: open http://127.0.0.1:${port}/`);
    expect(exarch(['demo', '--inspect-port', '9'], cwd).status).toBe(2);
  });

  it('--ui serves the turn flow live on loopback, says where, and (not on a terminal) ends with the run', async () => {
    const cwd = workdir();
    const port = await freePort();
    const run = exarch(['demo', '--speed', '100', '--ui', '--ui-port', String(port)], cwd);
    expect(run.status).toBe(0);
    // The address carries the viewer's token (test/e2e/hostile/liveViewerToken.test.ts).
    expect(run.stderr).toMatch(new RegExp(`exarch: live turn flow at http://127\\.0\\.0\\.1:${port}/\\?token=[\\w-]{43} \\(open it in a browser\\)`));
    expect(run.stderr).not.toContain('still serving');
    // The answer still goes to stdout, alone.
    expect(run.stdout).toBe(exarch(['demo', '--speed', '100'], cwd).stdout);
    const usage = (args: string[]): string => {
      const bad = exarch(args, cwd);
      expect(bad.status).toBe(2);
      return bad.stderr.split('\n')[0] ?? '';
    };
    expect(usage(['demo', '--ui-port', '9'])).toBe('exarch: --ui-port needs --ui');
    expect(usage(['demo', '--ui', '--ui-port', 'http'])).toBe("exarch: --ui-port must be a port number, got 'http'");
    expect(usage(['view', 'x.jsonl', '--ui'])).toBe('exarch: --ui is not an option of view');
    expect(usage(['run', '--ui', '--db', 'postgres://localhost/x', '--detach', 'task'])).toBe(
      'exarch: --ui with --detach: nothing here follows the run; view it with exarch view RUN_ID --db URL',
    );
  });
});
