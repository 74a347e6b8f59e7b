import { describe, expect, it } from 'vitest';
import { exarch } from '../../support/cliHarness.js';

/*
 * How the command line answers a mistake and a request for help: a usage error is the mistake in
 * one line and where to look in another (exit 2); the help is printed only when asked for, whole
 * (`exarch --help`) or one command's (`exarch help run`, `exarch run --help`).
 */

/** Each command and the line its help starts with. */
const COMMANDS = [
  ['run', 'exarch run [options] "<task>"'],
  ['worker', 'exarch worker --db URL'],
  ['resume', 'exarch resume RUN_ID'],
  ['approve', 'exarch approve RUN_ID CALL_ID'],
  ['deny', 'exarch deny RUN_ID CALL_ID'],
  ['runs', 'exarch runs [--store FILE | --db URL]'],
  ['demo', 'exarch demo [--speed N]'],
  ['view', 'exarch view TRACE|RUN_ID'],
] as const;

describe('usage errors', () => {
  it('a mistyped option of run: one line naming it, one pointing to run’s help, exit 2', async () => {
    const run = await exarch(['run', '--modle', 'x', 'go']);
    expect(run.code).toBe(2);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe("exarch: unknown option '--modle'\nrun 'exarch help run' for the options\n");
  });

  it('a flag of another command points to the help of the command given', async () => {
    const run = await exarch(['runs', '--max-steps', '3']);
    expect(run.code).toBe(2);
    expect(run.stderr).toBe("exarch: --max-steps is not an option of runs\nrun 'exarch help runs' for the options\n");
  });

  it('each command takes only its own flags, and names the first foreign one as it was typed', async () => {
    const cases: [string[], string, string][] = [
      [['worker', '--store', 'x.db'], 'store', 'worker'],
      [['resume', '01JF3Q0000000000000000000X', '--max-steps', '3'], 'max-steps', 'resume'],
      [['demo', '--db', 'postgres://localhost/x'], 'db', 'demo'],
      [['view', 'trace.jsonl', '--speed', '2'], 'speed', 'view'],
      [['deny', 'RUN', 'CALL', '--always'], 'always', 'deny'],
      [['run', '--concurrency', '4', 'go'], 'concurrency', 'run'],
      [['runs', '--out', 'x.html', '--model', 'm'], 'out', 'runs'],
    ];
    for (const [args, flag, command] of cases) {
      const run = await exarch(args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stderr, args.join(' ')).toBe(`exarch: --${flag} is not an option of ${command}\nrun 'exarch help ${command}' for the options\n`);
    }
  });

  it('an unknown command, or none, points to the list of commands', async () => {
    for (const args of [['frob'], [], ['--modle', 'x'], ['help', 'frob']]) {
      const run = await exarch(args);
      expect(run.code, args.join(' ')).toBe(2);
      const lines = run.stderr.split('\n');
      expect(lines, args.join(' ')).toEqual([expect.stringMatching(/^exarch: /), "run 'exarch --help' for the commands", '']);
    }
  });
});

describe('help', () => {
  it('exarch --help and exarch help print every command, the environment and the exit codes on stdout', async () => {
    for (const args of [['--help'], ['help'], ['-h']]) {
      const run = await exarch(args);
      expect(run.code, args.join(' ')).toBe(0);
      expect(run.stderr).toBe('');
      for (const [, first] of COMMANDS) expect(run.stdout, args.join(' ')).toContain(first);
      expect(run.stdout).toContain('Environment: ANTHROPIC_API_KEY');
      expect(run.stdout).toContain('Exit codes: 0 done');
    }
  });

  it.each(COMMANDS)('exarch help %s and exarch %s --help print that command’s help, and no other command’s', async (command, first) => {
    const help = await exarch(['help', command]);
    const flag = await exarch([command, '--help']);
    expect(help.code).toBe(0);
    expect(flag.code).toBe(0);
    expect(help.stdout).toBe(flag.stdout);
    expect(help.stdout).toContain(first);
    expect(help.stdout).toContain("run 'exarch --help' for every command");
    const others = COMMANDS.filter(([other]) => other !== command && !(['approve', 'deny'].includes(other) && ['approve', 'deny'].includes(command)));
    for (const [, line] of others) expect(help.stdout).not.toContain(line);
  });

  it('run’s help lists its options and the environment it reads', async () => {
    const run = await exarch(['help', 'run']);
    expect(run.stdout).toContain('--model ID');
    expect(run.stdout).toContain('--replay FILE');
    expect(run.stdout).toContain('Environment: ANTHROPIC_API_KEY');
  });
});
