import type { ModelRequest, ModelResponse, Provider, SessionListener, StopReason, StreamSink, Usage } from '../types.js';
import { STOP_REASONS } from '../types.js';
import { addUsage, ZERO_USAGE } from '../usage.js';
import { deadlines, type Deadline } from '../deadlines.js';
import { MAX_TOOL_INPUT_DEPTH, depthExceeds } from '../nesting.js';
import { wellFormedText } from '../wellFormed.js';
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
  /**
   * Tokens spent, as the stream reports them: called with what each report adds to the attempt's
   * count so far, and at the end with what the response's usage adds to it. A retried or aborted
   * attempt's tokens were spent too, and stay counted.
   */
  readonly onUsage?: (added: Usage) => void;
}

/**
 * The abort signal of one attempt (or backoff wait), made on first use: a provider that never reads
 * `request.signal` (a scripted model) costs no `AbortController`, and this is a session's hot path.
 */
export class AttemptAbort {
  private controller: AbortController | undefined;
  private reason: unknown;
  private aborted = false;
  /** Called once when the attempt is aborted (see `attemptOnce`). */
  onAbort: (() => void) | undefined;

  get isAborted(): boolean {
    return this.aborted;
  }

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.controller?.abort(reason);
    this.onAbort?.();
  }
}

/**
 * Model requests that left and the tokens they reported: what a provider bills, whether or not
 * the session keeps a response of theirs.
 */
export interface RequestSpend {
  readonly requests: number;
  readonly usage: Usage;
}

/**
 * The cancellation of one model step: `abort` reaches the current attempt directly. It also keeps
 * the step's ledger: every attempt that reached the provider (retries included) and what each
 * reported, so that requests a session does not keep (retried, failed, aborted) are still counted.
 */
export class StepCancellation {
  private aborted = false;
  private reason: unknown;
  private current: AttemptAbort | undefined;
  private sent = 0;
  /** Tokens of the step's attempts that ended without the response (retried or failed). */
  private lostUsage: Usage = ZERO_USAGE;
  /** Tokens the current attempt reported so far. */
  private attemptUsage: Usage = ZERO_USAGE;

  get isAborted(): boolean {
    return this.aborted;
  }

  /** Why the step was aborted. */
  get abortReason(): unknown {
    return this.reason;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.current?.abort(reason);
  }

  /** The next attempt's (or wait's) abort; already aborted if the step was. */
  next(): AttemptAbort {
    const attempt = new AttemptAbort();
    if (this.aborted) attempt.abort(this.reason);
    this.current = attempt;
    return attempt;
  }

  /** @internal An attempt is about to reach the provider. */
  sending(): void {
    this.sent++;
    this.attemptUsage = ZERO_USAGE;
  }

  /** @internal What the current attempt's stream reported it adds. */
  addUsage(added: Usage): void {
    this.attemptUsage = addUsage(this.attemptUsage, added);
  }

  /** @internal The current attempt ended without a response the step returns (it is retried, or the step fails). */
  attemptLost(): void {
    this.lostUsage = addUsage(this.lostUsage, this.attemptUsage);
    this.attemptUsage = ZERO_USAGE;
  }

  /** Requests of this step that reached the provider, each retry one more. */
  get requests(): number {
    return this.sent;
  }

  /**
   * What the step spent on requests it does not return a response of: retried and failed attempts,
   * and, once the step is aborted, the attempt it aborted (with what that had reported by then).
   */
  get lost(): Usage {
    return this.aborted ? addUsage(this.lostUsage, this.attemptUsage) : this.lostUsage;
  }

  /** Everything the step sent and spent, for a step that ends without a response (failed or aborted). */
  spent(): RequestSpend {
    return { requests: this.sent, usage: addUsage(this.lostUsage, this.attemptUsage) };
  }
}

/**
 * One model step: a streamed request with bounded retries for retryable faults and a stall
 * watchdog. Deltas go straight to the listener and never become machine events.
 */
export async function runModelStep(input: StreamModelInput, cancellation: StepCancellation): Promise<ModelResponse> {
  for (let attempt = 0; ; attempt++) {
    try {
      return validateResponse(await attemptOnce(input, cancellation.next(), cancellation));
    } catch (error) {
      if (cancellation.isAborted) throw cancellation.abortReason ?? error;
      cancellation.attemptLost();
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

async function attemptOnce(input: StreamModelInput, attempt: AttemptAbort, ledger: StepCancellation): Promise<ModelResponse> {
  let lastActivity = Date.now();
  // One deadline per attempt, re-armed only when it comes: deltas just stamp a time.
  let watchdog: Deadline | undefined;
  let stalled: StallError | undefined;
  const arm = (delay: number): void => {
    watchdog = deadlines.add(delay, () => {
      const idle = Date.now() - lastActivity;
      if (idle >= input.stallTimeoutMs) {
        stalled = new StallError(input.stallTimeoutMs);
        attempt.abort(stalled);
      } else arm(input.stallTimeoutMs - idle);
    });
  };
  arm(input.stallTimeoutMs);
  // An aborted attempt needs no watchdog, even if its provider never settles: a stream aborted
  // while the SDK iterates an already-received chunk was seen to leave its promise pending, and
  // the watchdog's ref'd deadline then kept the process from exiting.
  attempt.onAbort = () => watchdog?.cancel();
  if (attempt.isAborted) watchdog?.cancel();
  const { agent } = input.request;
  const listener = input.listener;
  // Reports that arrive after an abort are not counted: the abort took the attempt's spend as it was.
  const count = usageCounter((added) => {
    if (attempt.isAborted) return;
    ledger.addUsage(added);
    input.onUsage?.(added);
  });
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
    usage(usage) {
      lastActivity = Date.now();
      count(usage);
    },
  };
  try {
    const { request } = input;
    if (attempt.isAborted) throw attempt.signal.reason;
    ledger.sending();
    const response = await input.provider.stream(
      {
        agent: request.agent,
        system: request.system,
        messages: request.messages,
        tools: request.tools,
        ...(request.model === undefined ? {} : { model: request.model }),
        get signal() {
          return attempt.signal;
        },
      },
      sink,
    );
    if (stalled) throw stalled;
    count(response.usage);
    return response;
  } catch (error) {
    if (stalled) throw stalled;
    throw error;
  } finally {
    watchdog?.cancel();
  }
}

/**
 * Turns an attempt's cumulative usage reports into what each adds. Each kind of token only grows
 * (a report that says less than an earlier one adds nothing of that kind).
 */
function usageCounter(onUsage: (added: Usage) => void): (usage: Usage) => void {
  let input = 0;
  let output = 0;
  let cacheWrites = 0;
  let cacheReads = 0;
  return (usage) => {
    const added: Usage = {
      inputTokens: Math.max(0, usage.inputTokens - input),
      outputTokens: Math.max(0, usage.outputTokens - output),
      cacheCreationInputTokens: Math.max(0, usage.cacheCreationInputTokens - cacheWrites),
      cacheReadInputTokens: Math.max(0, usage.cacheReadInputTokens - cacheReads),
    };
    if (added.inputTokens + added.outputTokens + added.cacheCreationInputTokens + added.cacheReadInputTokens === 0) return;
    input += added.inputTokens;
    output += added.outputTokens;
    cacheWrites += added.cacheCreationInputTokens;
    cacheReads += added.cacheReadInputTokens;
    onUsage(added);
  };
}

function validateResponse(response: ModelResponse): ModelResponse {
  if (!STOP_REASONS.includes(response.stopReason as StopReason)) {
    throw new ProviderError(`model returned an unknown stop reason: ${String(response.stopReason)}`, { retryable: false });
  }
  const mended = wellFormedCalls(response);
  const ids = new Set<string>();
  let tooDeep: Record<string, string> | undefined;
  for (const block of mended.content) {
    if (block.type !== 'tool_use') continue;
    if (ids.has(block.id)) throw new ProviderError(`model returned tool_use id ${block.id} twice`, { retryable: false });
    ids.add(block.id);
    if (depthExceeds(block.input, MAX_TOOL_INPUT_DEPTH)) (tooDeep ??= {})[block.id] = `its input is nested more than ${MAX_TOOL_INPUT_DEPTH} levels deep`;
  }
  return tooDeep ? refuseInputs(mended, tooDeep) : mended;
}

/**
 * A call's id and name go back to the API in every later request (and the id in its result), so
 * a lone surrogate in either is mended here, once, before the batch, the history or the journal
 * sees the call: all of them then agree on it. (The input is mended as it enters the history, after
 * the tool has seen it as sent, so a path holding one is refused by name: see wellFormed.ts.)
 */
function wellFormedCalls(response: ModelResponse): ModelResponse {
  let changed = false;
  const content = response.content.map((block) => {
    if (block.type !== 'tool_use') return block;
    const id = wellFormedText(block.id);
    const name = wellFormedText(block.name);
    if (id === block.id && name === block.name) return block;
    changed = true;
    return { ...block, id, name };
  });
  if (!changed) return response;
  const mend = (ids: readonly string[]): string[] => ids.map(wellFormedText);
  const invalid = response.invalidToolInputs && Object.fromEntries(Object.entries(response.invalidToolInputs).map(([id, why]) => [wellFormedText(id), why]));
  return { ...response, content, incompleteToolUseIds: mend(response.incompleteToolUseIds), ...(invalid ? { invalidToolInputs: invalid } : {}) };
}

/**
 * Whatever the provider (the Anthropic one checks its own; a host's may not), a call whose input
 * nests past MAX_TOOL_INPUT_DEPTH is never executed and enters the history with `{}`: the session
 * answers it with an error naming why, and nothing downstream meets the value (see nesting.ts).
 */
function refuseInputs(response: ModelResponse, reasons: Readonly<Record<string, string>>): ModelResponse {
  return {
    ...response,
    content: response.content.map((block) => (block.type === 'tool_use' && reasons[block.id] !== undefined ? { ...block, input: {} } : block)),
    invalidToolInputs: { ...response.invalidToolInputs, ...reasons },
  };
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
