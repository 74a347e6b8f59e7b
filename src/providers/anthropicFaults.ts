import type { APIError } from '@anthropic-ai/sdk';
import { ProviderError, describeError } from '../engine/model/errors.js';

/** The SDK's module: its client and error classes. */
export type AnthropicSdk = typeof import('@anthropic-ai/sdk');

/** One line from an API error body: `overloaded_error: Overloaded`. */
function apiErrorText(error: APIError): string {
  const body = error.error as { error?: { type?: unknown; message?: unknown } } | undefined;
  const type = typeof body?.error?.type === 'string' ? body.error.type : undefined;
  const message = typeof body?.error?.message === 'string' ? body.error.message : undefined;
  if (type || message) return [type, message].filter(Boolean).join(': ');
  return describeError(error);
}

/** The longest `retry-after` a request waits for by default (`AnthropicProviderOptions.maxRetryWaitMs`). */
export const DEFAULT_MAX_RETRY_WAIT_MS = 60_000;
/** Set on a response whose retry-after was over the cap (see `cappedRetryFetch`): the wait asked for, in ms. */
const ASKED_WAIT_HEADER = 'x-exarch-retry-after-ms';

/**
 * The SDK's fetch, but a retryable answer (429, 5xx) whose `retry-after` asks for more than
 * `maxWaitMs` is marked `x-should-retry: false`, which the SDK obeys, so the request ends now with
 * that error rather than sleeping for as long as the server says.
 */
export function cappedRetryFetch(maxWaitMs: number, base: typeof fetch = globalThis.fetch): typeof fetch {
  return async (input, init) => {
    const response = await base(input, init);
    if (response.status !== 429 && response.status < 500) return response;
    const askedMs = retryAfterMs(response.headers);
    if (askedMs === undefined || askedMs <= maxWaitMs) return response;
    const headers = new Headers(response.headers);
    headers.set('x-should-retry', 'false');
    headers.set(ASKED_WAIT_HEADER, String(askedMs));
    return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
  };
}

/** The wait a response asks for, read as the SDK reads it (`retry-after-ms`, then `retry-after` in seconds or as a date). */
function retryAfterMs(headers: Headers): number | undefined {
  const ms = Number.parseFloat(headers.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms > 0) return ms;
  const raw = headers.get('retry-after');
  if (raw === null) return undefined;
  const seconds = Number.parseFloat(raw);
  if (Number.isFinite(seconds)) return seconds > 0 ? seconds * 1000 : undefined;
  const at = Date.parse(raw);
  return Number.isFinite(at) && at > Date.now() ? at - Date.now() : undefined;
}

/** Socket errors by which undici says the connection went away under a response. */
const SOCKET_GONE = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);

/** Whether `error` (or what caused it, a few levels down) is undici's word for a connection dropped under a response. */
function droppedSocket(error: unknown): boolean {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && current instanceof Error; depth++) {
    if (current instanceof TypeError && current.message === 'terminated') return true;
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && SOCKET_GONE.has(code)) return true;
    current = current.cause;
  }
  return false;
}

/**
 * The SDK's error as a `ProviderError` that says whether the step may be retried (CONTRACT §5).
 * `sdk` is the loaded module, whose error classes are matched: the SDK is loaded lazily.
 */
export function translateError(sdk: AnthropicSdk, error: unknown, started: boolean, signal: AbortSignal): unknown {
  const { AnthropicError, APIConnectionError, APIError, APIUserAbortError } = sdk;
  if (signal.aborted || error instanceof APIUserAbortError) return error;
  if (error instanceof ProviderError) return error;
  const askedMs = error instanceof APIError ? Number(error.headers?.get(ASKED_WAIT_HEADER) ?? Number.NaN) : Number.NaN;
  if (error instanceof APIError && Number.isFinite(askedMs)) {
    return new ProviderError(
      `rate limited: the server asked to wait ${Math.round(askedMs / 1000)} s (HTTP ${error.status ?? '?'}), longer than this run waits`,
      {
        retryable: false,
        ...(error.status === undefined ? {} : { status: error.status }),
        kind: 'http',
        cause: error,
      },
    );
  }
  if (error instanceof APIError && error.status !== undefined) {
    // The SDK already retried what it retries; what reaches us is final.
    return new ProviderError(`${apiErrorText(error)} (HTTP ${error.status})`, { retryable: false, status: error.status, kind: 'http', cause: error });
  }
  if (error instanceof APIError && !(error instanceof APIConnectionError)) {
    // An SSE `error` event: the request was accepted, then the stream failed.
    return new ProviderError(apiErrorText(error), { retryable: true, kind: 'stream', cause: error });
  }
  // The SDK reports a connection dropped after the response began as a plain AnthropicError
  // ('terminated'), or, closed after the headers but before the first event, passes undici's own
  // TypeError('terminated') on unwrapped: a dropped connection either way (CONTRACT §5: retried).
  // (A connection that failed before any response is the SDK's APIConnectionError, retried by it.)
  if (started || (!(error instanceof APIError) && (error instanceof AnthropicError || droppedSocket(error)))) {
    return new ProviderError(`connection lost mid-stream: ${describeError(error)}`, { retryable: true, kind: 'stream', cause: error });
  }
  if (error instanceof APIConnectionError) {
    return new ProviderError(`cannot reach the Anthropic API: ${describeError(error.cause ?? error)}`, { retryable: false, kind: 'connection', cause: error });
  }
  return new ProviderError(describeError(error), { retryable: false, cause: error });
}
