import { appendFileSync, writeFileSync } from 'node:fs';
import { ExarchError } from '../../engine/exarchError.js';
import { makeDirs } from '../../engine/fs/makeDirs.js';
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
}

const FLUSH_BYTES = 256 * 1024;

/** The trace file cannot be made (a part of its path is a file, no permission): one line for the user. */
export class TraceFileError extends ExarchError<'trace-file'> {
  constructor(
    readonly file: string,
    readonly code: string | undefined,
    message: string,
  ) {
    super('trace-file', message);
  }

  static from(file: string, error: unknown): TraceFileError {
    const code = (error as NodeJS.ErrnoException | undefined)?.code;
    const why =
      code === 'ENOTDIR' || code === 'EEXIST' || code === 'EISDIR'
        ? code === 'EISDIR'
          ? 'it is a directory'
          : 'a part of the path is a file'
        : code === 'EACCES' || code === 'EPERM' || code === 'EROFS'
          ? 'permission denied'
          : error instanceof Error
            ? error.message
            : String(error);
    return new TraceFileError(file, code, `cannot write the trace to ${file}: ${why}`);
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
  private buffer: string[] = [];
  private bytes = 0;
  private readonly redactor: Redactor;
  private readonly observer = new RunObserver();
  private readonly maker: TraceRecordMaker;

  constructor(options: TraceRecorderOptions) {
    this.file = options.file;
    this.redactor = options.redactor ?? Redactor.fromEnv();
    try {
      makeDirs(dirname(options.file));
      writeFileSync(options.file, '');
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
    const line = `${stringifyBounded(record)}\n`;
    this.buffer.push(line);
    this.bytes += line.length;
    if (this.bytes >= FLUSH_BYTES) this.flush();
  }

  /** Writes what is buffered. */
  flush(): void {
    if (this.buffer.length === 0) return;
    appendFileSync(this.file, this.redactor.json(this.buffer.join('')));
    this.buffer = [];
    this.bytes = 0;
  }

  /** Ends the trace; later events are ignored. */
  close(): void {
    if (this.maker.done) return;
    this.maker.end();
    this.flush();
  }
}
