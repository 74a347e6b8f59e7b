import { ExarchError } from '../../engine/exarchError.js';
import { type FileError, fileErrorOf } from '../../engine/fs/fileError.js';
import { makeDirs } from '../../engine/fs/makeDirs.js';
import { HeldLines } from '../../engine/fs/heldLines.js';
import { appendRegular, writeRegular } from '../../engine/fs/regularFile.js';
import { dirname } from 'node:path';
import type { InspectionEvent } from 'xstate';
import { stringifyBounded } from '../../engine/nesting.js';
import type { RunEvent } from '../observe/events.js';
import { RunObserver } from '../observe/runObserver.js';
import { Redactor } from '../../engine/redact.js';
import type { TraceRecord } from './format.js';
import { TraceRecordMaker } from './records.js';

export interface TraceRecorderOptions {
  /** Where the JSONL trace goes (created or truncated). */
  readonly file: string;
  /** Shown by the viewer. */
  readonly title?: string;
  /** The model the run's requests ask for (the viewer prices its costs with it). */
  readonly model?: string;
  readonly now?: () => number;
  /** Secrets to keep out of the trace (default: those of `process.env`; see redact.ts). */
  readonly redactor?: Redactor;
  /**
   * Called once, with the first write that failed (a full disk, a file-size limit, a read-only
   * directory): one line naming the file and the cause. The records it did not write are held
   * and tried again at the next flush (up to 16 MiB; past that the trace is given up); the file
   * only ever holds whole lines. Default: a process warning.
   */
  readonly onFault?: (fault: FileError) => void;
}

const FLUSH_BYTES = 256 * 1024;

/** The trace file cannot be made (a part of its path is a file, no permission, a FIFO): one line for the user. */
export class TraceFileError extends ExarchError<'trace-file'> {
  constructor(
    readonly file: string,
    readonly code: string | undefined,
    message: string,
  ) {
    super('trace-file', message);
  }

  static from(file: string, error: unknown): TraceFileError {
    const fault = fileErrorOf(error, file, { what: 'the trace', writing: true });
    return new TraceFileError(file, fault.code, `cannot write the trace to ${file}: ${fault.reason}`);
  }
}

/**
 * Records a run as a JSONL trace (src/watch/trace/format.ts), from its run events (src/watch/observe/): pass
 * `recorder.inspect` as XState's `inspect` option on the root actor
 * (`createActor(sessionMachine, { inspect: recorder.inspect })`), or feed `onEvent` from an
 * observer shared with other consumers. Each message is written once, so tracing stays cheap
 * however long the run.
 */
export class TraceRecorder {
  readonly file: string;
  private readonly redactor: Redactor;
  private readonly observer = new RunObserver();
  private readonly maker: TraceRecordMaker;
  /** The records not written yet (a write that failed holds them for a later flush). */
  private readonly lines: HeldLines;

  constructor(options: TraceRecorderOptions) {
    this.file = options.file;
    this.redactor = options.redactor ?? Redactor.fromEnv();
    const file = options.file;
    this.lines = new HeldLines(
      (data) => appendRegular(file, data, { what: 'the trace' }),
      (error) => fileErrorOf(error, file, { what: 'the trace', writing: true }),
      options.onFault ?? ((fault) => process.emitWarning(fault.message)),
    );
    try {
      makeDirs(dirname(options.file));
      // A FIFO, a device or a directory is refused without waiting on it (regularFile.ts).
      writeRegular(options.file, '', { what: 'the trace' });
    } catch (error) {
      throw TraceFileError.from(options.file, error);
    }
    this.maker = new TraceRecordMaker(
      {
        ...(options.title === undefined ? {} : { title: options.title }),
        ...(options.model === undefined ? {} : { model: options.model }),
        ...(options.now === undefined ? {} : { now: options.now }),
      },
      (record) => this.write(record),
    );
    this.observer.subscribe(this.onEvent);
  }

  /** Pass as `inspect` when creating the root actor. */
  readonly inspect = (event: InspectionEvent): void => {
    if (!this.maker.done) this.observer.inspect(event);
  };

  /** One run event, as a trace record (or none: the trace summarises). */
  readonly onEvent = (event: RunEvent): void => this.maker.onEvent(event);

  /** Every line is JSON, however deep what a model sent (see nesting.ts). */
  private write(record: TraceRecord): void {
    this.lines.add(`${stringifyBounded(record)}\n`);
    // Once a write failed, only every FLUSH_BYTES more (and the close) try again.
    if (this.lines.heldSinceFault >= FLUSH_BYTES) this.flush();
  }

  /** Writes what is buffered; a write that fails is said to `onFault` (once) and tried again later, never thrown. */
  flush(): void {
    this.lines.flush((data) => this.redactor.json(data));
  }

  /** Ends the trace; later events are ignored. */
  close(): void {
    if (this.maker.done) return;
    this.maker.end();
    this.flush();
  }
}
