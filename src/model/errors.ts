/**
 * How a provider reports a fault. `retryable` faults (overloaded, rate limited, a dropped
 * connection or an SSE `error` event mid-stream, a stall) discard the partial message and the
 * step is retried with backoff; others (authentication, bad request, exhausted retries) fail the
 * session with `message` as its one-line reason.
 */
export class ProviderError extends Error {
  readonly retryable: boolean;
  readonly status: number | undefined;
  readonly kind: string;

  constructor(message: string, options: { retryable: boolean; status?: number; kind?: string; cause?: unknown }) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ProviderError';
    this.retryable = options.retryable;
    this.status = options.status;
    this.kind = options.kind ?? (options.retryable ? 'transient' : 'fatal');
  }
}

/** No stream event arrived for too long. */
export class StallError extends ProviderError {
  constructor(stallTimeoutMs: number) {
    super(`model stream stalled: no event for ${stallTimeoutMs} ms`, { retryable: true, kind: 'stall' });
    this.name = 'StallError';
  }
}

/** A one-line reason for any thrown value, for tags and logs. */
export function describeError(error: unknown): string {
  const text = error instanceof Error ? error.message : typeof error === 'string' ? error : JSON.stringify(error);
  return (text ?? String(error)).replace(/\s+/g, ' ').trim() || 'unknown error';
}
