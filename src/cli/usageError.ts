import { ExarchError } from '../engine/exarchError.js';

/** A mistake in how exarch was called: one line, then a pointer to the command's help, exit 2. */
export class UsageError extends ExarchError<'usage'> {
  constructor(message: string) {
    super('usage', message);
  }
}
