import type { FileError } from './fileError.js';

/**
 * What a file exarch appends lines to holds back, at most, while it cannot be written (a full
 * disk, a file-size limit, a read-only directory) and waits for room; past that the file is given
 * up, and stays a whole prefix of what it would have held.
 */
const MAX_HELD_BYTES = 16 * 1024 * 1024;

/**
 * The lines on their way to one append-only file of exarch's (a session log, the trace, a
 * recording): they are held until `flush`, written as one append, and held again when that append
 * fails. The append itself (`write`) must leave nothing of a failed write in the file (see
 * `appendRegular`), so the file only ever holds whole lines. The first failure is said once to
 * `onFault`; past MAX_HELD_BYTES held, the file is given up. When each writer flushes is its own
 * (a log at a turn's end, a recording with every exchange).
 *
 * @example
 * const lines = new HeldLines((data) => appendRegular(file, data, role), (error) => fileErrorOf(error, file, role), warn);
 * lines.add('{"type":"usage"}\n');
 * lines.flush(); // written, or held for the next flush
 */
export class HeldLines {
  private lines: string[] = [];
  private bytes = 0;
  private faulted = false;
  private abandoned = false;
  /** What was held when the last write failed (a writer may wait for more before it tries again). */
  private heldAtFault = 0;

  constructor(
    /** Appends `data` whole, or throws having appended nothing. */
    private readonly write: (data: string) => void,
    /** The error of a failed write, as the one line `onFault` is told. */
    private readonly faultOf: (error: unknown) => FileError,
    private readonly onFault: (fault: FileError) => void,
  ) {}

  /** Bytes held, not yet written. */
  get held(): number {
    return this.bytes;
  }

  /** Bytes added since the last write failed (all that is held when none did). */
  get heldSinceFault(): number {
    return this.bytes - this.heldAtFault;
  }

  /** Whether a write has failed (and was said). */
  get hasFaulted(): boolean {
    return this.faulted;
  }

  /** A line to write (ending with its newline); nothing once the file is given up. */
  add(line: string): void {
    if (this.abandoned) return;
    this.lines.push(line);
    this.bytes += line.length;
  }

  /**
   * Writes what is held, as `prepare` makes it (a redaction pass over the batch); a failure is said
   * once and the lines held for the next flush, never thrown.
   */
  flush(prepare: (text: string) => string = (text) => text): void {
    if (this.lines.length === 0 || this.abandoned) return;
    try {
      this.write(prepare(this.lines.join('')));
    } catch (error) {
      this.heldAtFault = this.bytes;
      if (this.bytes > MAX_HELD_BYTES) {
        this.abandoned = true;
        this.lines = [];
        this.bytes = 0;
      }
      if (!this.faulted) {
        this.faulted = true;
        this.onFault(this.faultOf(error));
      }
      return;
    }
    this.lines = [];
    this.bytes = 0;
    this.heldAtFault = 0;
  }
}
