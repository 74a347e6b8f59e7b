import { inspect } from 'node:util';
import { ExarchError } from '../engine/exarchError.js';
import { describeError } from '../engine/model/errors.js';

/**
 * The one line the CLI prints for an error that ends a command. An error exarch throws on purpose
 * (an `ExarchError`, or one whose message it wrote: a plain `Error`, a library's) is said as it is.
 * An error of JavaScript's own classes (`TypeError: Cannot read properties of undefined`, a stack
 * overflow, a `SyntaxError` of JSON.parse) or zod's is a bug in exarch that the person cannot act
 * on: it is said as one, without its text; `EXARCH_DEBUG=1` prints it whole, stack and all, for a
 * bug report.
 */
export function failureLine(error: unknown, env: NodeJS.ProcessEnv = process.env): string {
  const debug = env['EXARCH_DEBUG'] !== undefined && env['EXARCH_DEBUG'] !== '' && env['EXARCH_DEBUG'] !== '0';
  const details = debug ? `\n${inspect(error, { depth: 4 })}` : '';
  if (isInternal(error)) return `exarch: an internal error stopped exarch (a bug: please report it; EXARCH_DEBUG=1 shows the details)${details}`;
  // Messages written as `exarch: …` for a host are not prefixed twice.
  return `exarch: ${describeError(error).replace(/^exarch: /, '')}${details}`;
}

/** JavaScript's own error classes, and zod's: what exarch's code raises when it is wrong, not what it says on purpose. */
const INTERNAL_CLASSES = new Set(['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError', 'EvalError', 'URIError', 'ZodError', '$ZodError']);

function isInternal(error: unknown): boolean {
  if (error instanceof ExarchError || !(error instanceof Error)) return false;
  // A host-facing check of exarch's (`RangeError('exarch: option maxSteps must be …')`) is on purpose.
  if (error.message.startsWith('exarch: ')) return false;
  return INTERNAL_CLASSES.has(error.name) || INTERNAL_CLASSES.has(error.constructor.name);
}
