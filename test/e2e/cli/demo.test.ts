import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { runDemo, type DemoResult } from '../../../src/cli/demo.js';
import { EXPLORER_BRIEF, EXPLORER_SIGN_OFF, FINAL_ANSWER } from '../../../src/cli/demoScript.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const ANSI = /\u001b\[/;

/** A writable that keeps what it was given. */
function sink(): { stream: Writable; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      chunks.push(String(chunk));
      done();
    },
  });
  return { stream, text: () => chunks.join('') };
}

/** `expected` appears in `states` in this order, possibly with other states between. */
function inOrder(states: readonly string[], expected: readonly string[]): boolean {
  let next = 0;
  for (const state of states) if (state === expected[next]) next += 1;
  return next === expected.length;
}

/** The log line of an agent entering a state, e.g. `+0.12s  root/reviewer    nudged`. */
function stateLine(agentId: string, state: string): RegExp {
  return new RegExp(`^ *\\+\\d+\\.\\d\\ds  ${agentId.replace('/', '\\/')} +${state}\\b`, 'm');
}

describe('exarch demo (in process)', () => {
  let result: DemoResult;
  let output: string;
  let errors: string;

  beforeAll(async () => {
    const out = sink();
    const err = sink();
    // A large speed makes every scripted delay ~0; the turn flow is the same.
    result = await runDemo({ out: out.stream, err: err.stream, color: false, speed: 1000 });
    output = out.text();
    errors = err.text();
  }, 20_000);

  it('completes as scripted, with nothing reported on stderr', () => {
    expect(result.problems).toEqual([]);
    expect(result.ok).toBe(true);
    expect(errors).toBe('');
  });

  it("shows each agent's state changes: the explorer replies, the reviewer is nudged then replies, the root ends readyForUser", () => {
    const explorer = result.states.get('root/explorer') ?? [];
    const reviewer = result.states.get('root/reviewer') ?? [];
    expect(inOrder(explorer, ['streaming', 'dispatchingBatch', 'streaming', 'replied']), explorer.join(' → ')).toBe(true);
    expect(inOrder(reviewer, ['streaming', 'dispatchingBatch', 'streaming', 'nudged', 'streaming', 'replied']), reviewer.join(' → ')).toBe(true);
    expect(explorer.at(-1)).toBe('replied');
    expect(reviewer.at(-1)).toBe('replied');
    expect(reviewer.filter((state) => state === 'nudged')).toHaveLength(1);
    expect(result.states.get('root')?.at(-1)).toBe('readyForUser');

    expect(output).toMatch(stateLine('root/explorer', 'replied'));
    expect(output).toMatch(stateLine('root/reviewer', 'nudged'));
    expect(output).toMatch(stateLine('root/reviewer', 'replied'));
    expect(output).toMatch(stateLine('root', 'readyForUser'));
    expect(output).toMatch(/root\/explorer +calls +reply\(string, 3354 chars rendered\), read_file\(vitest\.config\.ts\)/);
    expect(output).toMatch(/root\/reviewer +calls +reply\(object, \d+ chars rendered\)/);
    expect(output).toMatch(/root +inbox ← +\[agent 'explorer' replied\] \(3354 chars\)/);
  });

  it("delivers the explorer's brief verbatim to the root's inbox, with real newlines and without the sign-off", () => {
    expect(EXPLORER_BRIEF).toHaveLength(3354);
    expect(EXPLORER_BRIEF).toContain('\n');
    expect(EXPLORER_BRIEF).not.toContain('\\n');
    const explorerTurn = result.rootInboxTurns.find((turn) => turn.includes("[agent 'explorer' replied]"));
    expect(explorerTurn).toContain(`[agent 'explorer' replied]\n${EXPLORER_BRIEF}`);
    for (const turn of result.rootInboxTurns) expect(turn).not.toContain(EXPLORER_SIGN_OFF);
  });

  it("delivers the reviewer's JSON object pretty-printed", () => {
    const reviewerTurn = result.rootInboxTurns.find((turn) => turn.includes("[agent 'reviewer' replied]"));
    expect(reviewerTurn).toMatch(/\[agent 'reviewer' replied\]\n\{\n {2}"verdict": /);
  });

  it("prints the root's final answer", () => {
    expect(result.finalAnswer).toMatch(/^Here is this project's testing setup/);
    expect(output).toContain("root's final answer");
    expect(output).toContain(result.finalAnswer.split('\n')[0]);
  });

  it('sets the 396-char sign-off of the old positional contract against the 3354-char brief exarch delivered', () => {
    expect(result.delivered.positional).toBe(EXPLORER_SIGN_OFF);
    expect(result.delivered.exarch).toBe(EXPLORER_BRIEF);
    const summary = output.slice(output.indexOf("What reached root from 'explorer'"));
    expect(summary).toMatch(/old positional contract +396 chars/);
    expect(summary).toMatch(/exarch, through `reply` +3354 chars/);
  });

  it('prints no colour codes when colour is off, and colours when it is on', async () => {
    expect(output).not.toMatch(ANSI);
    const coloured = sink();
    await runDemo({ out: coloured.stream, color: true, speed: 1000 });
    expect(coloured.text()).toMatch(ANSI);
  });
});

describe('exarch command line', () => {
  // dist/ is built once for all tests by test/globalSetup.ts.

  const exarch = (...args: string[]) =>
    spawnSync(process.execPath, [join(ROOT, 'dist/src/cli/main.js'), ...args], {
      cwd: ROOT,
      encoding: 'utf8',
      env: { ...process.env, NO_COLOR: '1' },
      timeout: 60_000,
    });

  it('`exarch demo` runs the demo and exits 0: the narration on stderr, only the answer on stdout, like `run`', () => {
    const run = exarch('demo');
    expect(run.status).toBe(0);
    // The root's answer is the text its scripted model streamed, whole.
    expect(run.stdout).toBe(`${FINAL_ANSWER}\n`);
    expect(run.stderr).toContain("[agent 'explorer' replied] (3354 chars)");
    expect(run.stderr).toMatch(/old positional contract +396 chars/);
    expect(run.stderr).toContain("root's final answer (on stdout)");
    expect(run.stderr).not.toMatch(ANSI);
    // Every sub-agent's first line names its task (it once read `task: ""`).
    expect(run.stderr).toMatch(/root\/explorer +started +task: "Map this project's testing setup/);
    expect(run.stderr).toMatch(/root\/reviewer +started +task: "Review \.github\/workflows\/ci\.yml/);
    expect(run.stderr).not.toContain('task: ""');
  });

  it('an unknown command exits 2 with a one-line error and where the commands are listed, and no stack trace', () => {
    const run = exarch('frobnicate');
    expect(run.status).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe("exarch: unknown command 'frobnicate'\nrun 'exarch --help' for the commands\n");
  });

  it('a run flag given to demo is refused with exit 2', () => {
    const run = exarch('demo', '--max-steps', '3');
    expect(run.status).toBe(2);
    expect(run.stderr.split('\n')[0]).toBe('exarch: --max-steps is not an option of demo');
  });

  it('a bad flag exits 2 with a one-line error', () => {
    const run = exarch('demo', '--bogus');
    expect(run.status).toBe(2);
    expect(run.stderr.split('\n')[0]).toMatch(/^exarch: .*--bogus/);
    expect(run.stderr).not.toMatch(/^\s+at /m);
  });

  it('help lists run with its options, demo, the environment and the exit codes', () => {
    const run = exarch('--help');
    expect(run.status).toBe(0);
    expect(run.stdout).toContain('exarch demo');
    expect(run.stdout).toContain('exarch run [options] "<task>"');
    for (const flag of ['--model', '--max-steps', '--max-depth', '--reply-cap', '--log-dir', '--allow-write', '--allow-shell'])
      expect(run.stdout).toContain(flag);
    expect(run.stdout).toMatch(/ANTHROPIC_API_KEY.*ANTHROPIC_BASE_URL.*EXARCH_MODEL/);
    expect(run.stdout).toContain(
      '3 root capped, 4 waiting for approval (resumable),\n5 stopped: a file the run writes could not be written (disk full, file-size limit, read-only; resumable),\n130 interrupted',
    );
  });

  it('--version prints the package version', () => {
    const run = exarch('--version');
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
  });
});
