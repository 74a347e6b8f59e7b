import { ExarchError } from '../../engine/exarchError.js';

/**
 * An MCP server that could not be used. `start`: it did not start, answer `initialize` or list
 * its tools; `exited`: it went away (a stdio process that exited, a closed connection); `call`: a
 * call failed in transport or protocol (not a tool's own error, which is an `is_error` result).
 */
export class McpServerError extends ExarchError<'start' | 'exited' | 'call'> {
  constructor(
    message: string,
    kind: 'start' | 'exited' | 'call',
    /** The server's name as it appears in tool names (or, before it told its name, its command or host). */
    readonly server: string,
    options?: { cause?: unknown },
  ) {
    super(kind, message, options);
  }
}
