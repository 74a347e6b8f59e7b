import type { ModelRequest, ModelResponse, Provider, SessionListener, StopReason, StreamSink } from '../types.js';
import { STOP_REASONS } from '../types.js';
import { ProviderError, StallError, describeError } from './errors.js';

export interface RetryPolicy {
  /** Retries of one step after a retryable fault (the first attempt is not a retry). */
  readonly maxRetries: number;
  readonly baseDelayMs: number;
  readonly maxDelayMs: number;
}

export interface StreamModelInput {
  readonly provider: Provider;
  readonly request: Omit<ModelRequest, 'signal'>;
  readonly listener: SessionListener | undefined;
  readonly retry: RetryPolicy;
  /** Abort and retry an attempt that shows no sign of life for this long. */
  readonly stallTimeoutMs: number;
  readonly onRetry?: (info: { attempt: number; delayMs: number; reason: string }) => void;
}

/**
 * The cancellation of one model step. Each attempt (and each backoff wait) gets its own
 * `AbortController`, which `abort` reaches directly: no outer signal and listener per request,
 * since a session makes one request per step and this is its hot path.
 */
export class StepCancellation {
  private aborted = false;
  private reason: unknown;
  private current: AbortController | undefined;

  get isAborted(): boolean {
    return this.aborted;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.current?.abort(reason);
  }

  /** A controller for the next attempt or wait; already aborted if the step was. */
  next(): AbortController {
    const controller = new AbortController();
    if (this.aborted) controller.abort(this.reason);
    this.current = controller;
    return controller;
  }

  /** Why the step was aborted. */
  get abortReason(): unknown {
    return this.reason;
  }
}

/**
 * One model step: a streamed request with bounded retries for retryable faults and a stall
 * watchdog. Deltas go straight to the listener and never become machine events.
 */
export async function runModelStep(input: StreamModelInput, cancellation: StepCancellation): Promise<ModelResponse> {
  for (let attempt = 0; ; attempt++) {
    try {
      return validateResponse(await attemptOnce(input, cancellation.next()));
    } catch (error) {
      if (cancellation.isAborted) throw cancellation.abortReason ?? error;
      const retryable = error instanceof ProviderError && error.retryable;
      if (!retryable) throw error;
      if (attempt >= input.retry.maxRetries) {
        throw new ProviderError(`${describeError(error)} (gave up after ${attempt + 1} attempts)`, {
          retryable: false,
          kind: error.kind,
          cause: error,
        });
      }
      const delayMs = backoffDelay(input.retry, attempt);
      const info = { attempt: attempt + 1, delayMs, reason: describeError(error) };
      input.onRetry?.(info);
      input.listener?.onRetry?.(input.request.agent, info);
      await sleep(delayMs, cancellation.next().signal);
    }
  }
}

/** Exponential backoff with full jitter, capped. */
export function backoffDelay(policy: RetryPolicy, attempt: number): number {
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}

async function attemptOnce(input: StreamModelInput, controller: AbortController): Promise<ModelResponse> {
  let lastActivity = Date.now();
  // One timer per attempt, re-armed only when it fires: deltas just stamp a time.
  let watchdog: NodeJS.Timeout | undefined;
  let stalled: StallError | undefined;
  const arm = (delay: number): void => {
    watchdog = setTimeout(() => {
      const idle = Date.now() - lastActivity;
      if (idle >= input.stallTimeoutMs) {
        stalled = new StallError(input.stallTimeoutMs);
        controller.abort(stalled);
      } else arm(input.stallTimeoutMs - idle);
    }, delay);
  };
  arm(input.stallTimeoutMs);
  const { agent } = input.request;
  const listener = input.listener;
  const sink: StreamSink = {
    text(delta) {
      lastActivity = Date.now();
      listener?.onTextDelta?.(agent, delta);
    },
    toolUseStart(id, name) {
      lastActivity = Date.now();
      listener?.onToolUseStart?.(agent, id, name);
    },
    toolInputDelta(id, partialJson) {
      lastActivity = Date.now();
      listener?.onToolInputDelta?.(agent, id, partialJson);
    },
    heartbeat() {
      lastActivity = Date.now();
    },
  };
  try {
    const response = await input.provider.stream({ ...input.request, signal: controller.signal }, sink);
    if (stalled) throw stalled;
    return response;
  } catch (error) {
    if (stalled) throw stalled;
    throw error;
  } finally {
    clearTimeout(watchdog);
  }
}

function validateResponse(response: ModelResponse): ModelResponse {
  if (!STOP_REASONS.includes(response.stopReason as StopReason)) {
    throw new ProviderError(`model returned an unknown stop reason: ${String(response.stopReason)}`, { retryable: false });
  }
  const ids = new Set<string>();
  for (const block of response.content) {
    if (block.type !== 'tool_use') continue;
    if (ids.has(block.id)) throw new ProviderError(`model returned tool_use id ${block.id} twice`, { retryable: false });
    ids.add(block.id);
  }
  return response;
}

export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
