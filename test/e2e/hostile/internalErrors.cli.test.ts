import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { exarch, MAIN, serve, workdir, type CliRun } from '../../support/cliHarness.js';
import { expectOneLine } from '../../support/oneLine.js';

/**
 * Issue 37, "internal error text never reaches a user", the command line's own handling: what no
 * part of exarch caught (an error thrown from a timer, a rejection no one awaited) printed Node's
 * stack trace; an error of JavaScript's own classes that reached the top printed its text (`Cannot
 * read properties of undefined`). Now the first is one line, and the second is said as a bug, in
 * one line, without its text (EXARCH_DEBUG=1 prints it whole). And the declared agents' config,
 * which a person edits, is said in exarch's words: no `received undefined`, no JSON.parse message.
 */

/**
 * `exarch demo` with `fault` (a statement) run in its process once the demo is under way (its first
 * line of narration written), from a fresh task: as a bug deep inside would strike.
 */
function demoWith(fault: string, env: Record<string, string> = {}): Promise<CliRun> {
  const code = `const write = process.stderr.write.bind(process.stderr);
    let struck = false;
    process.stderr.write = (chunk, ...rest) => {
      if (!struck && String(chunk).includes('root')) {
        struck = true;
        setImmediate(() => { ${fault} });
      }
      return write(chunk, ...rest);
    };`;
  const child = spawn(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(code)}`, MAIN, 'demo'], {
    cwd: workdir(),
    env: { PATH: process.env['PATH'], CI: 'true', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
}

const INTERNAL_LINE = /^exarch: an internal error stopped exarch \(a bug: please report it; EXARCH_DEBUG=1 shows the details\)$/m;

describe('what reaches the top of the command line', () => {
  it('an error thrown from a fresh task, mid-command: one line, exit 1, no stack', async () => {
    const run = await demoWith('throw new TypeError("Cannot read properties of undefined (reading \'x\')");');
    expect(run.code).toBe(1);
    expectOneLine(run.stderr, /internal error/);
    expect(run.stderr).toMatch(INTERNAL_LINE);
  });

  it('a rejection no one awaited, mid-command: one line, exit 1, no stack', async () => {
    const run = await demoWith('Promise.reject(new RangeError("Invalid array length"));');
    expect(run.code).toBe(1);
    expectOneLine(run.stderr, /internal error/);
  });

  it('an error exarch wrote the words of, thrown from a fresh task: its own line', async () => {
    const run = await demoWith('throw new Error("cannot write session log x: ENOSPC");');
    expect(run.code).toBe(1);
    expectOneLine(run.stderr, /^exarch: cannot write session log x: ENOSPC$/);
  });

  it('EXARCH_DEBUG=1 prints the internal error whole after its line', async () => {
    const run = await demoWith('throw new TypeError("the detail");', { EXARCH_DEBUG: '1' });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^exarch: an internal error stopped exarch .*\nTypeError: the detail\n\s+at /m);
  });
});

describe('the declared agents’ config, as a person edits it', () => {
  it.each([
    ['a field missing', '{"agents": {"scout": {}}}', /^exarch: exarch\.config\.json: agents\.scout\.description is missing \(expected /],
    ['text that is not JSON', '{"agents": {"scout": {"description" "finds"}}}', /^exarch: exarch\.config\.json is not valid JSON: at line 1, column 37$/],
    ['text cut short', '{"agents": ', /^exarch: exarch\.config\.json is not valid JSON: it ends too soon$/],
  ])('%s: one line in exarch’s words, and no request', async (_what, config, line) => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'exarch.config.json'), config);
    const server = await serve({});
    const run = await exarch(['run', '--no-store', 'go'], { server, cwd });
    expect(run.code).toBe(1);
    expectOneLine(run.stderr, line);
    expect(server.requests).toHaveLength(0);
  });
});
