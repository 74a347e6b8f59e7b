import { defaultTextMapSetter, isSpanContextValid, ROOT_CONTEXT, trace, type SpanContext } from '@opentelemetry/api';
import { parseTraceParent, W3CTraceContextPropagator } from '@opentelemetry/core';
import type { JobStore } from '../store/jobStore.js';
import type { SpanDirectory } from '../watch/otel/exporterOptions.js';

/**
 * One run's agent spans as the store keeps them (`exarch.sessions.span`: a W3C traceparent and its start), for
 * the OpenTelemetry exporter of a worker: what other workers and earlier jobs opened is read
 * before a job starts (`load`), and what this worker opens is written back. A span is written
 * before the records that start its sub-agents (`written`), so a sub-agent's job always finds it.
 */
export class StoredSpans implements SpanDirectory {
  private readonly known = new Map<string, SpanContext>();
  private readonly starts = new Map<string, number>();
  private writes: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: JobStore,
    private readonly runId: string,
  ) {}

  /** Reads the spans of these sessions (every session of the run without `sessions`). */
  async load(sessions?: readonly string[]): Promise<void> {
    for (const [session, stored] of await this.store.spansOf(this.runId, sessions)) {
      // A traceparent, then (with planned ids) when the span starts, in ms.
      const [traceparent = '', start] = stored.split(' ');
      const span = parseTraceparent(traceparent);
      if (span) this.known.set(session, span);
      if (span && start !== undefined && Number.isFinite(Number(start))) this.starts.set(session, Number(start));
    }
  }

  get(agentId: string): SpanContext | undefined {
    return this.known.get(agentId);
  }

  startOf(agentId: string): number | undefined {
    return this.starts.get(agentId);
  }

  set(agentId: string, span: SpanContext, start?: number): void {
    this.known.set(agentId, span);
    if (start !== undefined) this.starts.set(agentId, start);
    // A span that was not sampled (or a no-op tracer's) has nothing for others to join.
    if (!isSpanContextValid(span)) return;
    const stored = start === undefined ? formatTraceparent(span) : `${formatTraceparent(span)} ${start}`;
    const write = this.store.recordSpan(this.runId, agentId, stored).catch(() => undefined);
    this.writes = Promise.all([this.writes, write]);
  }

  /** Settles once every span set so far is written (or failed to be: the trace is then split, the run is not). */
  written(): Promise<unknown> {
    return this.writes;
  }
}

const propagator = new W3CTraceContextPropagator();

/** A span context as a W3C `traceparent`, as the context propagator sends it. */
function formatTraceparent(span: SpanContext): string {
  const carrier: Record<string, string> = {};
  propagator.inject(trace.setSpanContext(ROOT_CONTEXT, span), carrier, defaultTextMapSetter);
  return carrier['traceparent'] ?? '';
}

/** A stored `traceparent` as a remote span context; undefined for anything else. */
function parseTraceparent(value: string): SpanContext | undefined {
  const span = parseTraceParent(value);
  return span && isSpanContextValid(span) ? { ...span, isRemote: true } : undefined;
}
