import type { AnyActorRef } from 'xstate';
import type { SessionRecorder } from './recorder.js';
import { runModelStep, StepCancellation, type RequestSpend, type StreamModelInput } from '../engine/model/streamModel.js';
import { isRootWithOneObserver } from '../engine/actors.js';
import { withDeltaTaps } from './deltaTaps.js';
import { startToolBatch, type RunnableCall, type RunToolsInput, type ToolBatch, type ToolBatchEvent } from '../tools/runTools.js';
import type { ModelResponse, Usage } from '../engine/types.js';
import type { Admission } from '../engine/admission.js';

const readOnly = (call: RunnableCall): boolean => call.readOnly;

/** What the effects report back to the session. */
export type EffectEvent =
  | { readonly type: 'tick' }
  /**
   * `requests`: the step's requests that reached the provider (more than one when it was retried;
   * absent: one); `lost`: what the retried ones spent (absent: nothing).
   */
  | { readonly type: 'model.done'; readonly output: ModelResponse; readonly requests?: number; readonly lost?: Usage }
  /** `spent`: the step's requests, none of which the session keeps, and what they spent (absent: none left). */
  | { readonly type: 'model.error'; readonly error: unknown; readonly spent?: RequestSpend }
  /** Sent when a request that waited for the journal is about to leave (see `requestModel`). */
  | { readonly type: 'model.starting' }
  | ToolBatchEvent;

/**
 * A session's I/O: the model request of `streaming`, the tool batch of `dispatchingBatch`, and the
 * tick `readyForUser` and `nudged` rest on. The machine's entry actions start them (through
 * `effectsOf(self)`), `abort` ends them on cancel, and they answer with events to the session.
 *
 * Started by actions rather than by an invoked actor per step, or by events to a long-lived one:
 * creating, starting and stopping two or three actors per step was most of a step's cost, and an
 * event to an actor is a macrostep of its own. They are not an actor of their own either: an actor
 * per sub-agent for them was a tenth of a wide fan-out's cost. Their lifetime is the session's:
 * made on first use, closed when the session completes (ends or is stopped) or crashes.
 *
 * The tick is a `setImmediate` rather than a delayed transition: XState scans every pending
 * delayed event of the system whenever any actor stops, so one timer per sub-agent made a wide
 * fan-out quadratic. Arming it while one is pending changes nothing.
 */
export class SessionEffects {
  private model: StepCancellation | undefined;
  private tools: ToolBatch | undefined;
  /** The batch held open while the session waits for sub-agents (see `holdBatch`). */
  private held: ToolBatch | undefined;
  private tick: NodeJS.Immediate | undefined;
  private closed = false;
  /** The room the current request's budgets hold for it, until it ends. */
  private admission: Admission | undefined;

  /**
   * @param barrier called before a model request or a tool batch starts: in a durable run, a
   * promise that settles once the journal holds the records the effect depends on. No tool with
   * effects runs before its call is stored (read-only tools may: see `Tool.readOnly`), and no
   * request shows the model a tool result the journal does not hold (a crash then would answer
   * that call again, differently: the history would change under the model).
   */
  constructor(
    private readonly send: (event: EffectEvent) => void,
    private readonly barrier: () => Promise<void> | undefined = noBarrier,
    /** The session's actor system, whose observers may tap its text deltas (src/session/deltaTaps.ts). */
    private readonly system?: object,
  ) {}

  private readonly sendTick = (): void => {
    this.tick = undefined;
    if (!this.closed) this.send({ type: 'tick' });
  };

  armTick(): void {
    if (this.closed) return;
    this.tick ??= setImmediate(this.sendTick);
  }

  /**
   * @param lateInput for a request that waits for the journal: whether input arrived meanwhile that
   * the machine may join to the request (`model.starting` is sent only then: an event per step
   * would cost every durable step a macrostep).
   */
  requestModel(input: StreamModelInput, lateInput?: () => boolean, admission?: Admission | 'keep'): void {
    if (this.closed) {
      if (admission !== 'keep') admission?.release();
      return;
    }
    // A request made again (late input joined it before it left) keeps the room its first try was admitted with.
    const room = admission === 'keep' ? this.admission : admission;
    if (admission !== 'keep') this.admission?.release();
    this.admission = undefined;
    this.model?.abort(new Error('superseded by a new request'));
    this.model = undefined;
    const cancellation = new StepCancellation();
    this.model = cancellation;
    this.admission = room;
    const gate = this.barrier();
    if (!gate) {
      this.startModel(input, cancellation);
      return;
    }
    void gate.then(() => {
      if (cancellation.isAborted || this.closed) return;
      // Input that arrived while the journal was written may join the request's turn: the machine
      // then asks for the request again, which supersedes (aborts) this one before it starts.
      if (lateInput?.() === true) this.send({ type: 'model.starting' });
      if (!cancellation.isAborted && !this.closed) this.startModel(input, cancellation);
    });
  }

  private startModel(input: StreamModelInput, cancellation: StepCancellation): void {
    runModelStep(this.system ? withDeltaTaps(this.system, input) : input, cancellation).then(
      (output) => {
        if (cancellation.isAborted) return;
        this.model = undefined;
        this.endAdmission(output.usage);
        // The usual step, one request and nothing lost, adds no fields to its event.
        const { requests, lost } = cancellation;
        this.send(requests === 1 && isZero(lost) ? { type: 'model.done', output } : { type: 'model.done', output, requests, lost });
      },
      (error: unknown) => {
        if (cancellation.isAborted) return;
        this.model = undefined;
        this.endAdmission(undefined);
        const spent = cancellation.spent();
        this.send(spent.requests === 0 ? { type: 'model.error', error } : { type: 'model.error', error, spent });
      },
    );
  }

  runTools(input: RunToolsInput): void {
    if (this.closed) return;
    this.tools?.abandon(new Error('tool batch superseded'));
    // Reads need not wait for the response that asked for them (see `Tool.readOnly`). A batch with
    // nothing to run still waits: its drain commits the batch, after what planned it.
    const gate = input.calls.length > 0 && input.calls.every(readOnly) ? undefined : this.barrier();
    if (!gate) {
      this.startTools(input);
      return;
    }
    // Until the journal is written, the batch is a placeholder that can still be abandoned.
    let abandoned = false;
    const waiting: ToolBatch = {
      abandon: () => {
        if (abandoned) return;
        abandoned = true;
        input.onAbandon(input.calls.map((call) => call.id));
      },
    };
    this.tools = waiting;
    void gate.then(() => {
      if (abandoned || this.closed || this.tools !== waiting) return;
      this.startTools(input);
    });
  }

  private startTools(input: RunToolsInput): void {
    const batch = startToolBatch(input, (event) => {
      if (this.closed) return;
      // A drained batch has nothing left to abandon. (Dropping it also spares the next step an
      // Error, whose stack trace costs more than the rest of a short step.)
      if (event.type === 'batch.drained' && this.tools === batch) this.tools = undefined;
      this.send(event);
    });
    this.tools = batch;
  }

  /**
   * While a session waits for its sub-agents (`wait_for_agents`) nothing runs, yet its batch is
   * still open: held here as a batch would be, so a stop or a cancel answers its calls
   * (`onAbandon`) exactly as it does a running batch's. `release` drops it once the wait ends.
   */
  holdBatch(onAbandon: () => void): void {
    if (this.closed) return;
    this.tools?.abandon(new Error('tool batch superseded'));
    this.tools = this.held = { abandon: () => onAbandon() };
  }

  releaseBatch(): void {
    if (this.tools === this.held) this.tools = undefined;
    this.held = undefined;
  }

  /**
   * Aborts the model request and abandons the tool batch (every call is answered), whichever runs.
   * Returns what the aborted step had sent and spent, when a request of it had left: the session
   * counts it (nothing of it is committed, but the provider served it).
   */
  abort(reason: string): RequestSpend | undefined {
    const step = this.model;
    step?.abort(new Error(reason));
    this.model = undefined;
    this.endAdmission(undefined);
    this.tools?.abandon(new Error(reason));
    this.tools = undefined;
    const spent = step?.spent();
    return spent && spent.requests > 0 ? spent : undefined;
  }

  /** The request ended: the room its budgets held for it goes back (with the kept response's usage, which teaches the meter). */
  private endAdmission(kept: Usage | undefined): void {
    const admission = this.admission;
    this.admission = undefined;
    admission?.release(kept);
  }

  /** Ends every effect (see `abort`, whose spend it returns). */
  close(): RequestSpend | undefined {
    this.closed = true;
    if (this.tick) clearImmediate(this.tick);
    this.tick = undefined;
    return this.abort('session stopped');
  }
}

const noBarrier = (): undefined => undefined;

function isZero(usage: Usage): boolean {
  return usage.inputTokens === 0 && usage.outputTokens === 0 && usage.cacheCreationInputTokens === 0 && usage.cacheReadInputTokens === 0;
}

interface Running {
  readonly effects: SessionEffects;
  readonly onClose?: () => void;
  readonly recorder: SessionRecorder;
  readonly atRest: (snapshot: unknown) => boolean;
  readonly subscription: { unsubscribe(): void };
}

const running = new WeakMap<AnyActorRef, Running>();
const inert = new WeakSet<AnyActorRef>();

/**
 * Marks an actor that stands in as `self` while a session's transitions are computed as pure
 * logic (as the model-based tests do): no effects are ever made for it.
 */
export function withoutEffects(actor: AnyActorRef): void {
  inert.add(actor);
}

/** How a session's effects reach it, and what closes its log. */
export interface SessionEffectsOwner {
  readonly recorder: SessionRecorder;
  /** Whether a snapshot of the session is at rest (a log closed there records `stopped`, not `cancelled`). */
  readonly atRest: (snapshot: unknown) => boolean;
  /** Before each model request and tool batch starts (see `SessionEffects`). */
  readonly barrier?: () => Promise<void> | undefined;
  /** When the session completes or crashes, after its effects end (it leaves its budget's queue). */
  readonly onClose?: () => void;
}

/**
 * The effects of a running session, made on its first use (an entry action of its first
 * macrostep, which runs as the session starts); undefined for an inert stand-in.
 */
export function effectsOf(session: AnyActorRef, owner: () => SessionEffectsOwner): SessionEffects | undefined {
  const found = running.get(session);
  if (found) return found.effects;
  if (inert.has(session)) return undefined;
  const { recorder, atRest, barrier, onClose } = owner();
  const effects = new SessionEffects((event) => session.send(event), barrier, session.system as object | undefined);
  const subscription = session.subscribe({
    // Completion is both ends of a session: its final state, and a stop from outside.
    complete: () => closeEffects(session),
    // A crash ends it too. XState reports a crash as unhandled when some observer has no error
    // listener, or when a root has no observers at all; this listener must not change that, so it
    // reports in the one case it would otherwise hide: a root whose only observer it is.
    error: (error: unknown) => {
      // Counted before closing, which unsubscribes this listener.
      const onlyListener = isRootWithOneObserver(session);
      closeEffects(session);
      if (onlyListener) reportUnhandled(error);
    },
  });
  running.set(session, { effects, recorder, atRest, subscription, ...(onClose ? { onClose } : {}) });
  return effects;
}

/** As XState reports an error no observer handles: thrown from a fresh task. */
function reportUnhandled(error: unknown): void {
  setTimeout(() => {
    throw error;
  });
}

/**
 * Ends a session's effects: aborts what still runs (an abandoned batch answers its calls), then
 * closes its log, after whatever else the same stop records. Called when the session completes
 * or crashes.
 */
export function closeEffects(session: AnyActorRef): void {
  const entry = running.get(session);
  if (!entry) return;
  running.delete(session);
  entry.subscription.unsubscribe();
  // A request aborted by the stop was served all the same: its log and journal count it.
  const spent = entry.effects.close();
  if (spent) entry.recorder.lost(spent);
  entry.onClose?.();
  queueMicrotask(() => {
    const snapshot = session.getSnapshot() as { status: string; error?: unknown; value?: unknown };
    entry.recorder.stopped({
      state: String(snapshot.value),
      atRest: entry.atRest(snapshot),
      ...(snapshot.status === 'error' ? { crash: { error: snapshot.error } } : {}),
    });
  });
}
