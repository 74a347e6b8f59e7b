import type { Redactor } from '../engine/redact.js';

/**
 * The command line's stdout and stderr pass every write through `redactor`: the answer, the
 * progress tree, the summary, every error line, whichever code writes them (log-update and the
 * demo included). Done once on the streams themselves rather than at each `write` call, so a
 * new message cannot forget it. A secret split across two writes would pass; everything exarch
 * prints is written a line (or a whole frame) at a time.
 */
export function redactProcessOutput(redactor: Redactor): void {
  if (!redactor.active) return;
  for (const stream of [process.stdout, process.stderr]) redactWrites(stream, redactor);
}

/** Replaces `stream.write` with one that redacts text chunks (a buffer is decoded as UTF-8 and passed as it was when nothing in it is a secret). */
function redactWrites(stream: NodeJS.WritableStream, redactor: Redactor): void {
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  const redacted = (chunk: unknown, ...rest: unknown[]): boolean => {
    if (typeof chunk === 'string') return write(redactor.text(chunk), ...rest);
    if (chunk instanceof Uint8Array) {
      const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
      const clean = redactor.text(text);
      return write(clean === text ? chunk : clean, ...rest);
    }
    return write(chunk, ...rest);
  };
  stream.write = redacted as typeof stream.write;
}
