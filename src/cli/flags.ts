import { parseArgs } from 'node:util';
import type { StoreTarget } from './storeTarget.js';
import { UsageError } from './usageError.js';

/** The command line read against the table of every command's flags (strict: an unknown flag throws). */
export function parse(argv: readonly string[]) {
  return parseArgs({
    // parseArgs has no optional values: `--allow-shell=unsandboxed` becomes a flag of its own.
    args: argv.map((arg) => (arg === '--allow-shell=unsandboxed' ? '--allow-shell-unsandboxed' : arg)),
    allowPositionals: true,
    strict: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
      speed: { type: 'string' },
      model: { type: 'string' },
      'max-steps': { type: 'string' },
      'max-depth': { type: 'string' },
      'reply-cap': { type: 'string' },
      wake: { type: 'string' },
      'max-retry-wait': { type: 'string' },
      'log-dir': { type: 'string' },
      agents: { type: 'string' },
      'allow-write': { type: 'boolean' },
      'allow-shell': { type: 'boolean' },
      'allow-shell-unsandboxed': { type: 'boolean' },
      'allow-network': { type: 'boolean' },
      'allow-git-hooks': { type: 'boolean' },
      'shell-limits': { type: 'string' },
      'shell-user': { type: 'string' },
      mcp: { type: 'string', multiple: true },
      trace: { type: 'string' },
      out: { type: 'string' },
      inspect: { type: 'boolean' },
      'inspect-port': { type: 'string' },
      ui: { type: 'boolean' },
      'ui-port': { type: 'string' },
      store: { type: 'string' },
      db: { type: 'string' },
      detach: { type: 'boolean' },
      spread: { type: 'boolean' },
      concurrency: { type: 'string' },
      'drain-timeout': { type: 'string' },
      'job-expiry': { type: 'string' },
      'no-store': { type: 'boolean' },
      approve: { type: 'string' },
      'max-tokens': { type: 'string' },
      'max-cost': { type: 'string' },
      'no-wait': { type: 'boolean' },
      steer: { type: 'boolean' },
      always: { type: 'boolean' },
      otel: { type: 'boolean' },
      record: { type: 'string' },
      replay: { type: 'string' },
    },
  });
}

/**
 * The words of a command line that `parse` refused, read without the table: the command named
 * first, so a usage error can point to that command's help.
 */
export function parseLoosely(argv: readonly string[]): string[] {
  return parseArgs({ args: [...argv], allowPositionals: true, strict: false }).positionals;
}

/** The flags as parsed; each command takes only its own (`acceptFlags`). */
export type Values = ReturnType<typeof parse>['values'];

/**
 * A flag given to a command that has no use for it is a mistake worth one line, not silence. Each
 * command names the flags it takes (`--help` and `--version` go with every one): a flag added for
 * one command is refused by the others without a word of theirs changing.
 */
export function acceptFlags(command: string, values: Values, accepted: readonly (keyof Values)[]): void {
  // In the order they were typed: the first wrong one is named.
  const given = Object.keys(values).find(
    (flag) => flag !== 'help' && flag !== 'version' && values[flag as keyof Values] !== undefined && !accepted.includes(flag as keyof Values),
  );
  if (given !== undefined) throw new UsageError(`--${given} is not an option of ${command}`);
}

/** The flags that shape a run's sessions: taken by `run` alone (a resume reads them from the run's record). */
export const RUN_FLAGS = [
  'model',
  'max-tokens',
  'max-cost',
  'max-steps',
  'max-depth',
  'reply-cap',
  'wake',
  'max-retry-wait',
  'log-dir',
  'agents',
  'allow-write',
  'allow-shell',
  'allow-shell-unsandboxed',
  'allow-network',
  'allow-git-hooks',
  'shell-limits',
  'shell-user',
  'mcp',
  'otel',
  'record',
  'replay',
] as const;

/** `--store` and `--db` as given, without EXARCH_DB_URL. */
export function explicitTarget(values: Values): StoreTarget {
  return { ...(values.store === undefined ? {} : { store: values.store }), ...(values.db === undefined ? {} : { db: values.db }) };
}
