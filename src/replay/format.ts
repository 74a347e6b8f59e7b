import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages/messages';
import { ExarchError } from '../engine/exarchError.js';
import type { ProviderErrorKind } from '../engine/model/errors.js';
import type { Message } from '../engine/types.js';

/**
 * The recording format (`exarch run --record FILE`): JSONL, a header line, then one line per model
 * exchange, written when the exchange ends. An exchange is one request as the provider sent it
 * (its body, canonical: keys sorted, `cache_control` markers left out, no headers and no key) and
 * the raw stream events that answered it, or the fault that ended it.
 *
 * Exchanges are keyed by the agent's id and the agent's own request count, so sub-agents that ran
 * concurrently replay by who asked, not by the order the network happened to answer in. `start`
 * and `end` number the exchanges' beginnings and ends in one sequence for the whole run: a replay
 * hands its answers out in that order, so every request meets the same deliveries it met when
 * recorded.
 *
 * A session's history only grows (its last message may be replaced by a merge), so a request
 * stores only what changed since the same agent's previous one: the top-level fields that differ,
 * and the messages after the first `keep` of the previous request's. A recording grows with the
 * run, not with the square of it.
 */

export const RECORDING_VERSION = 1;

/**
 * The largest recording a replay reads (256 MiB): it is read whole, and a string of text past
 * about 512 MiB is more than Node can hold. A larger file is refused by its size, unread.
 */
export const MAX_RECORDING_BYTES = 256 * 1024 * 1024;

export interface RecordingHeader {
  readonly kind: 'exarch.recording';
  readonly version: typeof RECORDING_VERSION;
  readonly provider: 'anthropic';
  /** The provider's model, for requests that name none. */
  readonly model: string;
  readonly maxTokens: number;
  readonly recordedAt: string;
}

/** How a recorded exchange ended, when it did not end with a whole message. */
export type RecordedFault =
  /** The provider's fault (an HTTP error, an SSE `error` event, a dropped connection), as the session saw it. */
  | { readonly kind: 'provider'; readonly message: string; readonly retryable: boolean; readonly status?: number; readonly errorKind: ProviderErrorKind }
  /** The session cancelled the request (its abort signal fired). */
  | { readonly kind: 'aborted' };

export interface RecordedExchange {
  readonly kind: 'exchange';
  /** The agent id (`root/researcher#2`) and its request count from 0. */
  readonly agent: string;
  readonly index: number;
  /** Positions of this exchange's beginning and end in the run's one sequence of both. */
  readonly start: number;
  readonly end: number;
  /**
   * Milliseconds from the start of the recording to the exchange's beginning and end (recordings
   * made before these were kept have none): how long the recorded run took between two positions
   * tells a replay how long to wait for the first before it gives up on it (see `ExchangeOrder`).
   */
  readonly startMs?: number;
  readonly endMs?: number;
  /** The body's top-level fields (`messages` aside) that differ from the agent's previous request; all of them at its first. */
  readonly fields: Readonly<Record<string, unknown>>;
  /** Fields the previous request had and this one has not. */
  readonly dropped?: readonly string[];
  /** `messages`: the first `keep` of the previous request's, then `messages`. */
  readonly keep: number;
  readonly messages: readonly Message[];
  readonly events: readonly RawMessageStreamEvent[];
  readonly fault?: RecordedFault;
}

/**
 * Why a recording cannot be used: `unreadable`, `unwritable`; `invalid`: not an exarch recording,
 * or a line of it that is not an exchange; `other-version`: made by an exarch that records another
 * version; `mismatch`: a replayed request it does not hold (`ReplayMismatchError`).
 */
export type RecordingErrorKind = 'unreadable' | 'unwritable' | 'invalid' | 'other-version' | 'mismatch';

/** A recording that cannot be read or written, or a replay that met a request it does not hold: one line. */
export class RecordingError extends ExarchError<RecordingErrorKind> {
  constructor(kind: RecordingErrorKind, message: string) {
    super(kind, message);
  }
}

/**
 * A request that differs from the recording: whose, and where first (`path`, a JSON path into the
 * request body), or that the recording has no such request (`path` undefined).
 */
export class ReplayMismatchError extends RecordingError {
  declare readonly kind: 'mismatch';

  constructor(
    readonly agent: string,
    /** The agent's request count from 0. */
    readonly index: number,
    readonly path: string | undefined,
  ) {
    super(
      'mismatch',
      path === undefined
        ? `the request differs from the recording: agent ${agent} made request ${index + 1}, which the recording does not have`
        : `the request differs from the recording at ${path} (agent ${agent}, request ${index + 1})`,
    );
  }
}
