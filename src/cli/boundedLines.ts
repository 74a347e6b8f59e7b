/**
 * Lines of a stream, each kept only up to `maxBytes`: what a pipe to `exarch run --steer` sends is
 * read a line at a time, and a line past the cap (a 50 MB `/msg`) is dropped as it streams in, not
 * gathered whole and then refused. readline keeps a line whole however long it grows, so the
 * piped reader is this one (a terminal keeps readline: a person types there, and edits).
 */
export interface BoundedLinesHandlers {
  /** One line, without its line break (`\n` or `\r\n`). */
  readonly line: (line: string) => void;
  /** A line grew past the cap: called once, as it does; the rest of it is dropped. */
  readonly overlong: () => void;
  /** The stream ended (a last line without a break was handed over first). */
  readonly end: () => void;
}

export interface BoundedLines {
  /** Stops reading: the handlers are called no more, and the stream is paused (as readline leaves it). */
  close(): void;
}

/** Reads `input` line by line, in order, keeping at most `maxBytes` of a line (bytes of UTF-8; a line break never splits a character). */
export function readBoundedLines(input: NodeJS.ReadableStream, maxBytes: number, handlers: BoundedLinesHandlers): BoundedLines {
  let kept: Buffer[] = [];
  let size = 0;
  let dropping = false;
  let closed = false;
  const finishLine = (): void => {
    if (!dropping) handlers.line(Buffer.concat(kept, size).toString('utf8').replace(/\r$/, ''));
    kept = [];
    size = 0;
    dropping = false;
  };
  const onData = (data: Buffer | string): void => {
    const chunk = typeof data === 'string' ? Buffer.from(data) : data;
    let start = 0;
    while (!closed) {
      const newline = chunk.indexOf(0x0a, start);
      const piece = chunk.subarray(start, newline === -1 ? chunk.length : newline);
      if (!dropping) {
        if (size + piece.length > maxBytes) {
          dropping = true;
          kept = [];
          size = 0;
          handlers.overlong();
        } else {
          kept.push(piece);
          size += piece.length;
        }
      }
      if (newline === -1) return;
      finishLine();
      start = newline + 1;
    }
  };
  const onEnd = (): void => {
    if (closed) return;
    if (size > 0 && !dropping) finishLine();
    close();
    handlers.end();
  };
  const close = (): void => {
    if (closed) return;
    closed = true;
    input.off('data', onData);
    input.off('end', onEnd);
    input.pause();
  };
  input.on('data', onData);
  input.on('end', onEnd);
  return { close };
}
