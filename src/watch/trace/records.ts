import type { RunEvent } from '../observe/events.js';
import { sessionStatechart } from '../statechart/extract.js';
import { TRACE_VERSION, type TraceRecord } from './format.js';

/** A trace record before it is timed. */
type TraceDraft = TraceRecord extends infer R ? (R extends TraceRecord ? Omit<R, 't'> : never) : never;

export interface TraceRecordMakerOptions {
  /** Shown by the viewer (default `exarch run`). */
  readonly title?: string;
  /** The model the run's requests ask for (the viewer prices its costs with it). */
  readonly model?: string;
  readonly now?: () => number;
}

/** How much of a task a trace keeps (its full length is recorded beside it). */
const TASK_EXCERPT = 500;

/**
 * Turns a run's events (src/watch/observe/) into trace records (format.ts), each timed in milliseconds
 * since the maker was created: what `TraceRecorder` writes to a file and what the live viewer
 * streams to a browser, so both show a run the same way. The trace summarises: text deltas,
 * usage and snapshot events make no record, and each message is recorded once (again only when
 * a later append merged into it).
 */
export class TraceRecordMaker {
  private readonly now: () => number;
  private readonly t0: number;
  private ended = false;

  /** Emits the `trace.start` record at once. */
  constructor(
    options: TraceRecordMakerOptions,
    private readonly emit: (record: TraceRecord) => void,
  ) {
    this.now = options.now ?? (() => performance.now());
    this.t0 = this.now();
    this.write({
      kind: 'trace.start',
      version: TRACE_VERSION,
      startedAt: new Date().toISOString(),
      title: options.title ?? 'exarch run',
      statechart: sessionStatechart(),
      ...(options.model === undefined ? {} : { model: options.model }),
    });
  }

  /** One run event, as a trace record (or none: the trace summarises). Ignored after `end()`. */
  readonly onEvent = (event: RunEvent): void => {
    if (this.ended) return;
    const { agent } = event;
    switch (event.type) {
      case 'agent.started':
        this.write({
          kind: 'agent.start',
          agent,
          name: event.name,
          depth: event.depth,
          parent: event.parent,
          task: event.task.slice(0, TASK_EXCERPT),
          taskChars: event.task.length,
          ...(event.model === undefined ? {} : { model: event.model }),
        });
        return;
      case 'message':
        this.write({ kind: 'message', agent, index: event.index, message: event.message });
        return;
      case 'agent.state':
        this.write({ kind: 'state', agent, state: event.state, steps: event.steps, requests: event.requests, usage: event.usage });
        return;
      case 'model.response':
        this.write({ kind: 'response', agent, stopReason: event.stopReason, textChars: event.textChars, toolCalls: event.toolCalls, usage: event.usage });
        return;
      case 'tool.result':
        this.write({ kind: 'tool.result', agent, toolUseId: event.id, isError: event.isError, chars: event.content.length });
        return;
      case 'delivery':
        this.write({
          kind: 'delivery',
          parent: agent,
          child: event.child,
          name: event.name,
          outcome: event.outcome,
          text: event.text,
          ...(event.reason ? { reason: event.reason } : {}),
        });
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
        this.write({
          kind: 'agent.end',
          agent,
          status: event.status,
          ...(event.outcome ? { outcome: event.outcome } : {}),
          ...(event.reason ? { reason: event.reason } : {}),
        });
        return;
      default:
        return;
    }
  };

  /** Whether `end()` was called. */
  get done(): boolean {
    return this.ended;
  }

  /** Emits `trace.end` (once); later events are ignored. */
  end(): void {
    if (this.ended) return;
    this.write({ kind: 'trace.end' });
    this.ended = true;
  }

  private write(draft: TraceDraft): void {
    this.emit({ t: Math.round((this.now() - this.t0) * 10) / 10, ...draft } as TraceRecord);
  }
}
