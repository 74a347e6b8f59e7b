import type { TraceRecord } from '../trace/format.js';

/**
 * The run's trace records as the live viewer serves them: each record kept once, as the bytes of
 * its server-sent event (`id: N\ndata: JSON\n\n`), from which the trace's line (`JSON\n`) is a
 * view, not a copy. Every page, stream and download reads these same bytes, so a client costs the
 * server its place in them and at most one chunk (`CHUNK_BYTES`) of its own.
 */
export class ServedRecords {
  private readonly frames: Buffer[] = [];
  private total = 0;

  /** Adds a record, given as its (redacted) JSON text, one line. */
  add(json: string): void {
    const frame = Buffer.from(`id: ${this.frames.length}\ndata: ${json}\n\n`, 'utf8');
    this.frames.push(frame);
    this.total += frame.length;
  }

  get count(): number {
    return this.frames.length;
  }

  /** Bytes of every record's event so far: grows with each record (what a follower that stopped reading has missed). */
  get bytes(): number {
    return this.total;
  }

  /** Record `index`'s server-sent event. */
  frame(index: number): Buffer | undefined {
    return this.frames[index];
  }

  /** Record `index`'s line of the trace file (`JSON\n`): its event without `id: N\ndata: ` and one of the two newlines. */
  line(index: number): Buffer | undefined {
    const frame = this.frames[index];
    return frame?.subarray(`id: ${index}\ndata: `.length, frame.length - 1);
  }

  /** The first `count` records, parsed. */
  records(count = this.frames.length): TraceRecord[] {
    const records: TraceRecord[] = [];
    for (let i = 0; i < count; i++) records.push(JSON.parse((this.line(i) ?? Buffer.alloc(0)).toString('utf8')) as TraceRecord);
    return records;
  }
}

/**
 * The most a client is handed in one write. A client that stops reading holds at most this much
 * of its own (plus its socket's high-water mark), whatever it asked for: see EventFollower and
 * `chunksOf`.
 */
const CHUNK_BYTES = 64 * 1024;

/** Where a reader is in a sequence of buffers: the buffer, and how far into it. */
export interface ByteCursor {
  index: number;
  offset: number;
}

/**
 * The next at most `CHUNK_BYTES` bytes of the buffers `part(0)`, `part(1)`, … (undefined ends
 * them) from `at`, which moves past them; undefined when there is nothing more yet. Small parts are
 * joined into one copy, a big one is handed out in views of it.
 */
export function takeChunk(part: (index: number) => Buffer | undefined, at: ByteCursor): Buffer | undefined {
  const pieces: Buffer[] = [];
  let size = 0;
  for (let buffer = part(at.index); buffer !== undefined && size < CHUNK_BYTES; buffer = part(at.index)) {
    const piece = buffer.subarray(at.offset, at.offset + CHUNK_BYTES - size);
    pieces.push(piece);
    size += piece.length;
    at.offset += piece.length;
    if (at.offset >= buffer.length) {
      at.index++;
      at.offset = 0;
    }
  }
  if (pieces.length === 0) return undefined;
  return pieces.length === 1 ? pieces[0] : Buffer.concat(pieces, size);
}

/** Every chunk of the buffers `part(0)`, `part(1)`, … (undefined ends them), for a body streamed with backpressure. */
export function* chunksOf(part: (index: number) => Buffer | undefined): Generator<Buffer> {
  const at: ByteCursor = { index: 0, offset: 0 };
  for (let chunk = takeChunk(part, at); chunk !== undefined; chunk = takeChunk(part, at)) yield chunk;
}
