import { appendFileSync, writeFileSync } from 'node:fs';
import { ExarchError } from '../exarchError.js';
import { makeDirs } from '../fs/makeDirs.js';
import { dirname } from 'node:path';
import type { InspectionEvent } from 'xstate';
import { stringifyBounded } from '../nesting.js';
import type { RunEvent } from '../observe/events.js';
import { RunObserver } from '../observe/runObserver.js';
import { Redactor } from '../redact.js';
import { sessionStatechart } from '../statechart/extract.js';
import { TRACE_VERSION, type TraceRecord } from './format.js';

type Draft = TraceRecord extends infer R ? (R extends TraceRecord ? Omit<R, 't'> : never) : never;

export interface TraceRecorderOptions {
  /** Where the JSONL trace goes (created or truncated). */
  readonly file: string;
  /** Shown by the viewer. */
  readonly title?: string;
  readonly now?: () => number;
  /** Secrets to keep out of the trace (default: those of `process.env`; see redact.ts). */
  readonly redactor?: Redactor;
}

const TASK_EXCERPT = 500;
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
        ? code === 'EISDIR' ? 'it is a directory' : 'a part of the path is a file'
        : code === 'EACCES' || code === 'EPERM' || code === 'EROFS'
          ? 'permission denied'
          : error instanceof Error ? error.message : String(error);
    return new TraceFileError(file, code, `cannot write the trace to ${file}: ${why}`);
  }
}

/**
 * Records a run as a JSONL trace (src/trace/format.ts), from its run events (src/observe/): pass
 * `recorder.inspect` as XState's `inspect` option on the root actor
 * (`createActor(sessionMachine, { inspect: recorder.inspect })`), or feed `onEvent` from an
 * observer shared with other consumers. Each message is written once, so tracing stays cheap
 * however long the run.
 */
export class TraceRecorder {
  readonly file: string;
  private readonly now: () => number;
  private readonly t0: number;
  private buffer: string[] = [];
  private bytes = 0;
  private closed = false;
  private readonly redactor: Redactor;
  private readonly observer = new RunObserver();

  constructor(options: TraceRecorderOptions) {
    this.file = options.file;
    this.now = options.now ?? (() => performance.now());
    this.redactor = options.redactor ?? Redactor.fromEnv();
    this.t0 = this.now();
    try {
      makeDirs(dirname(options.file));
      writeFileSync(options.file, '');
    } catch (error) {
      throw TraceFileError.from(options.file, error);
    }
    this.write({
      kind: 'trace.start',
      version: TRACE_VERSION,
      startedAt: new Date().toISOString(),
      title: options.title ?? 'exarch run',
      statechart: sessionStatechart(),
    });
    this.observer.subscribe(this.onEvent);
  }

  /** Pass as `inspect` when creating the root actor. */
  readonly inspect = (event: InspectionEvent): void => {
    if (!this.closed) this.observer.inspect(event);
  };

  /** One run event, as a trace record (or none: the trace summarises). */
  readonly onEvent = (event: RunEvent): void => {
    if (this.closed) return;
    const { agent } = event;
    switch (event.type) {
      case 'agent.started':
        this.write({ kind: 'agent.start', agent, name: event.name, depth: event.depth, parent: event.parent, task: event.task.slice(0, TASK_EXCERPT), taskChars: event.task.length });
        return;
      case 'message':
        this.write({ kind: 'message', agent, index: event.index, message: event.message });
        return;
      case 'agent.state':
        this.write({ kind: 'state', agent, state: event.state, steps: event.steps, usage: event.usage });
        return;
      case 'model.response':
        this.write({ kind: 'response', agent, stopReason: event.stopReason, textChars: event.textChars, toolCalls: event.toolCalls, usage: event.usage });
        return;
      case 'tool.result':
        this.write({ kind: 'tool.result', agent, toolUseId: event.id, isError: event.isError, chars: event.content.length });
        return;
      case 'delivery':
        this.write({ kind: 'delivery', parent: agent, child: event.child, name: event.name, outcome: event.outcome, text: event.text, ...(event.reason ? { reason: event.reason } : {}) });
        return;
      case 'user.message':
        this.write({ kind: 'event', agent, type: 'user.message', detail: `${event.text.length} characters` });
        return;
      case 'agent.cancel':
        this.write({ kind: 'event', agent, type: 'cancel', ...(event.reason === undefined ? {} : { detail: event.reason }) });
        return;
      case 'model.error':
        this.write({ kind: 'event', agent, type: 'model.error', detail: event.message });
        return;
      case 'agent.ended':
        this.write({ kind: 'agent.end', agent, status: event.status, ...(event.outcome ? { outcome: event.outcome } : {}), ...(event.reason ? { reason: event.reason } : {}) });
        return;
      default:
        return;
    }
  };

  /** Every line is JSON, however deep what a model sent (see nesting.ts). */
  private write(draft: Draft): void {
    const line = stringifyBounded({ t: Math.round((this.now() - this.t0) * 10) / 10, ...draft }) + '\n';
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
    if (this.closed) return;
    this.write({ kind: 'trace.end' });
    this.closed = true;
    this.flush();
  }
}
