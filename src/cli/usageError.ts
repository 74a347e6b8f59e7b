import { ExarchError } from '../engine/exarchError.js';

/** A mistake in how exarch was called: one line, then the usage, exit 2. */
export class UsageError extends ExarchError<'usage'> {
  constructor(message: string) {
    super('usage', message);
  }
}
