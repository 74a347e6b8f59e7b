import { randomBytes } from 'node:crypto';

/**
 * A tracer provider's id generator (`new BasicTracerProvider({ idGenerator })`, the SDK's
 * `IdGenerator`) that can give a span ids chosen before it starts: `@opentelemetry/api` cannot.
 * An agent span of a session that runs in several jobs is emitted once, by the job in which the
 * session ends, while earlier jobs have already parented spans under its ids. Ids are random
 * otherwise, as the SDK's own.
 */
export class PlannedIds {
  private planned: { readonly traceId: string; readonly spanId: string } | undefined;

  /** 32 hex digits, never all zero. */
  traceId(): string {
    return nonZeroHex(16);
  }

  /** 16 hex digits, never all zero. */
  spanId(): string {
    return nonZeroHex(8);
  }

  /** Runs `start` (which starts one span, synchronously) with the span given these ids. */
  startWith<T>(ids: { readonly traceId: string; readonly spanId: string }, start: () => T): T {
    this.planned = ids;
    try {
      return start();
    } finally {
      this.planned = undefined;
    }
  }

  generateTraceId(): string {
    return this.planned?.traceId ?? this.traceId();
  }

  generateSpanId(): string {
    return this.planned?.spanId ?? this.spanId();
  }
}

function nonZeroHex(bytes: number): string {
  for (;;) {
    const hex = randomBytes(bytes).toString('hex');
    if (/[^0]/.test(hex)) return hex;
  }
}
