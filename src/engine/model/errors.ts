import { ExarchError } from '../exarchError.js';

/** What went wrong with a model request (see `ProviderErrorKind`). */
export const PROVIDER_ERROR_KINDS = ['http', 'stream', 'connection', 'stall', 'replay', 'transient', 'fatal'] as const;

/**
 * What went wrong with a model request:
 *
 * - `http`: the server answered with an error status (the SDK's own retries spent), or asked for
 *   a longer wait than the run allows.
 * - `stream`: the stream broke after it began (an SSE `error` event, a dropped connection, a
 *   stream that left the protocol or ended early).
 * - `connection`: the server could not be reached.
 * - `stall`: no stream event for too long (`StallError`).
 * - `replay`: a replayed request differs from the recording (`replayProvider`).
 * - `transient`, `fatal`: a fault without a more precise kind, retried or not (the defaults).
 */
export type ProviderErrorKind = (typeof PROVIDER_ERROR_KINDS)[number];

/**
 * How a provider reports a fault. `retryable` faults (overloaded, rate limited, a dropped
 * connection or an SSE `error` event mid-stream, a stall) discard the partial message and the
 * step is retried with backoff; others (authentication, bad request, exhausted retries) fail the
 * session with `message` as its one-line reason.
 */
export class ProviderError extends ExarchError<ProviderErrorKind> {
  readonly retryable: boolean;
  readonly status: number | undefined;

  constructor(message: string, options: { retryable: boolean; status?: number; kind?: ProviderErrorKind; cause?: unknown }) {
    // No `cause` key at all when there is none: `'cause' in error` then says so.
    super(options.kind ?? (options.retryable ? 'transient' : 'fatal'), message, options.cause === undefined ? undefined : { cause: options.cause });
    this.retryable = options.retryable;
    this.status = options.status;
  }
}

/** No stream event arrived for too long. */
export class StallError extends ProviderError {
  declare readonly kind: 'stall';

  constructor(stallTimeoutMs: number) {
    super(`model stream stalled: no event for ${stallTimeoutMs} ms`, { retryable: true, kind: 'stall' });
  }
}

/** A one-line reason for any thrown value, for tags and logs. */
export function describeError(error: unknown): string {
  const text = error instanceof Error ? error.message : typeof error === 'string' ? error : JSON.stringify(error);
  return (text ?? String(error)).replace(/\s+/g, ' ').trim() || 'unknown error';
}
