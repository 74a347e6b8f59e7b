import { ExarchError } from '../engine/exarchError.js';

/**
 * Thrown by a tool's `run` to answer the call with an `is_error` result of exactly this text
 * (clipped like any output), lines kept: a tool's own error report, such as an MCP result with
 * `isError: true`. Any other throw becomes the one line `tool '<name>' failed: <message>`.
 */
export class ToolErrorResult extends ExarchError<'tool-error'> {
  constructor(readonly content: string) {
    super('tool-error', content);
  }
}
