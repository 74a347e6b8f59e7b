import { ExarchError } from '../../engine/exarchError.js';

/**
 * A sandbox was asked for and cannot be had: no bubblewrap, no prlimit, or no user it may run
 * the commands as. (A file of its own: the sandbox and the choice of its user both throw it.)
 */
export class ShellSandboxError extends ExarchError<'sandbox-unavailable'> {
  constructor(message: string) {
    super('sandbox-unavailable', message);
  }
}
