#!/usr/bin/env node
import { describeError } from '../engine/model/errors.js';
import { UsageError } from './usageError.js';
import { EXIT } from './runIo.js';
import { Redactor } from '../engine/redact.js';
import { redactProcessOutput } from './redactedOutput.js';
import { failureLine } from './failureLine.js';
import { isUrl, urlSecrets } from '../engine/urlSecrets.js';
import { commandHelp, isCommand, USAGE, version, type CommandName } from './usage.js';
import { parse, parseLoosely, type Values } from './flags.js';

/**
 * The `exarch` command line (CONTRACT §7). Exit codes: 0 done, 1 fatal, 2 bad usage. Errors are
 * one line on stderr, never a stack trace: a user of the CLI cannot act on our internals.
 */

const EXIT_OK = EXIT.ok;
const EXIT_FATAL = EXIT.fatal;
const EXIT_USAGE = EXIT.usage;

/** What a command does with the words and flags after its name; its exit code. */
type Command = (positionals: readonly string[], values: Values) => Promise<number>;

/**
 * Each command's code, loaded only when that command runs: `exarch --help`, `--version` and a
 * usage error load none of it (the SDK, SQLite, XState, zod, OpenTelemetry), so they answer as
 * fast as Node starts. A test (test/e2e/cli/startup.test.ts) checks what they load.
 */
const COMMANDS: Readonly<Record<CommandName, () => Promise<Command>>> = {
  run: async () => (await import('./commands.js')).run,
  resume: async () => (await import('./commands.js')).resume,
  runs: async () => (await import('./commands.js')).runs,
  approve: async () => {
    const { answer } = await import('./commands.js');
    return (positionals, values) => answer('approve', positionals, values);
  },
  deny: async () => {
    const { answer } = await import('./commands.js');
    return (positionals, values) => answer('deny', positionals, values);
  },
  worker: async () => (await import('./commands.js')).worker,
  view: async () => (await import('./viewCommand.js')).view,
  demo: async () => (await import('./demoCommand.js')).demo,
};

async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // parseArgs explains how to pass a positional that starts with '-'; the first sentence is the error.
    const message = error instanceof Error ? error.message : String(error);
    return usageError(lowerFirst(message.split('. ', 1)[0] ?? message), parseLoosely(argv)[0]);
  }
  const { values, positionals } = parsed;
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return EXIT_OK;
  }
  const [command, ...rest] = positionals;
  if (command === 'help' || (values.help && command === undefined)) return help(command === 'help' ? rest : []);
  if (command === undefined) return usageError('missing command', undefined);
  if (!isCommand(command)) return usageError(`unknown command '${command}'`, undefined);
  if (values.help) return help([command]);
  try {
    const run = await COMMANDS[command]();
    return await run(rest, values);
  } catch (error) {
    if (error instanceof UsageError) return usageError(error.message, command);
    process.stderr.write(`${failureLine(error)}\n`);
    return EXIT_FATAL;
  }
}

/** `exarch help`, `exarch --help`: everything; `exarch help run`, `exarch run --help`: that command's. */
function help(words: readonly string[]): number {
  const [command, ...more] = words;
  if (command === undefined) {
    process.stdout.write(`exarch — agent sessions as explicit XState machines\n\n${USAGE}\n`);
    return EXIT_OK;
  }
  if (!isCommand(command)) return usageError(`help: unknown command '${command}'`, undefined);
  if (more.length > 0) return usageError(`help takes one command, got '${words.join(' ')}'`, undefined);
  process.stdout.write(`${commandHelp(command)}\n`);
  return EXIT_OK;
}

/**
 * The secrets of the URLs on this command line (`--db`, an `--mcp` URL, a URL in the task): masked
 * where exarch shows a URL, and redacted from the rest of what it prints, as the environment's are.
 */
function commandLineSecrets(argv: readonly string[]): string[] {
  return argv.map((arg) => arg.replace(/^--[\w-]+=/, '')).flatMap((arg) => (isUrl(arg) ? urlSecrets(arg) : []));
}

/**
 * A usage error: the mistake in one line and where the options are in another, exit 2. The help
 * itself is not printed: a hundred lines after it, the one that matters scrolls away.
 */
function usageError(message: string, command: string | undefined): number {
  const pointer = isCommand(command) ? `run 'exarch help ${command}' for the options` : "run 'exarch --help' for the commands";
  process.stderr.write(`exarch: ${message.split('\n', 1)[0] ?? message}\n${pointer}\n`);
  return EXIT_USAGE;
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}

// No secret of the environment (the API key, any *_KEY, *_TOKEN, *_SECRET, *_PASSWORD, a URL's
// password or token) nor of a URL on the command line is printed, whoever prints it.
redactProcessOutput(Redactor.fromEnv(process.env, commandLineSecrets(process.argv.slice(2))));

// pg honours PGPASSFILE (and ~/.pgpass) as libpq does, and says on stderr that a later pg will
// stop: a notice a person at the command line cannot act on (a test proves the file still works).
process.noDeprecation = true;

// `exarch demo | head` closes the pipe early: that is the reader's choice, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') process.stderr.write(`exarch: cannot write to stdout: ${describeError(error)}\n`);
  process.exit(error.code === 'EPIPE' ? EXIT_OK : EXIT_FATAL);
});

// What no caller caught (an error thrown from a timer, a rejection no one awaited) ends the command
// as any failure does: one line, not Node's stack trace.
const fail = (error: unknown): void => {
  process.stderr.write(`${failureLine(error)}\n`);
  process.exit(EXIT_FATAL);
};
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`${failureLine(error)}\n`);
    process.exitCode = EXIT_FATAL;
  },
);
