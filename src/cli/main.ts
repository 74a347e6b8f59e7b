#!/usr/bin/env node
import { describeError } from '../engine/model/errors.js';
import { UsageError } from './usageError.js';
import { EXIT } from './runIo.js';
import { Redactor } from '../engine/redact.js';
import { redactProcessOutput } from './redactedOutput.js';
import { failureLine } from './failureLine.js';
import { isUrl, urlSecrets } from '../engine/urlSecrets.js';
import { USAGE, version } from './usage.js';
import { parse } from './flags.js';
import { view } from './viewCommand.js';
import { demo } from './demoCommand.js';
import { answer, resume, run, runs, worker } from './commands.js';

/**
 * The `exarch` command line (CONTRACT §7). Exit codes: 0 done, 1 fatal, 2 bad usage. Errors are
 * one line on stderr, never a stack trace: a user of the CLI cannot act on our internals.
 */

const EXIT_OK = EXIT.ok;
const EXIT_FATAL = EXIT.fatal;
const EXIT_USAGE = EXIT.usage;

async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // parseArgs explains how to pass a positional that starts with '-'; the first sentence is the error.
    const message = error instanceof Error ? error.message : String(error);
    return usageError(lowerFirst(message.split('. ', 1)[0] ?? message));
  }
  const { values, positionals } = parsed;
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return EXIT_OK;
  }
  const [command, ...rest] = positionals;
  if (values.help || command === 'help') {
    process.stdout.write(`exarch — agent sessions as explicit XState machines\n\n${USAGE}\n`);
    return EXIT_OK;
  }
  if (command === undefined) return usageError('missing command');
  try {
    if (command === 'run') return await run(rest, values);
    if (command === 'resume') return await resume(rest, values);
    if (command === 'runs') return await runs(rest, values);
    if (command === 'approve' || command === 'deny') return await answer(command, rest, values);
    if (command === 'view') return await view(rest, values);
    if (command === 'worker') return await worker(rest, values);
    if (command !== 'demo') throw new UsageError(`unknown command '${command}'`);
    return await demo(rest, values);
  } catch (error) {
    if (error instanceof UsageError) return usageError(error.message);
    process.stderr.write(`${failureLine(error)}\n`);
    return EXIT_FATAL;
  }
}

/**
 * The secrets of the URLs on this command line (`--db`, an `--mcp` URL, a URL in the task): masked
 * where exarch shows a URL, and redacted from the rest of what it prints, as the environment's are.
 */
function commandLineSecrets(argv: readonly string[]): string[] {
  return argv.map((arg) => arg.replace(/^--[\w-]+=/, '')).flatMap((arg) => (isUrl(arg) ? urlSecrets(arg) : []));
}

function usageError(message: string): number {
  process.stderr.write(`exarch: ${message.split('\n', 1)[0] ?? message}\n\n${USAGE}\n`);
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
