import { fromCallback, type AnyActorRef, type EventObject } from 'xstate';
import type { SessionRecorder } from './log/recorder.js';
import { runModelStep, StepCancellation, type StreamModelInput } from './model/streamModel.js';
import { startToolBatch, type RunToolsInput, type ToolBatch, type ToolBatchEvent } from './tools/runTools.js';
import type { ModelResponse } from './types.js';

/** What the effects report back to the session. */
export type EffectEvent =
  | { readonly type: 'tick' }
  | { readonly type: 'model.done'; readonly output: ModelResponse }
  | { readonly type: 'model.error'; readonly error: unknown }
  | ToolBatchEvent;

export interface SessionEffectsInput {
  readonly recorder: SessionRecorder;
  readonly session: AnyActorRef;
  /** Whether a snapshot of the session is at rest (a log closed there records `stopped`, not `cancelled`). */
  readonly atRest: (snapshot: unknown) => boolean;
}

/**
 * A session's I/O: the model request of `streaming`, the tool batch of `dispatchingBatch`, and the
 * tick `readyForUser` and `nudged` rest on. The machine's entry actions start them (through
 * `effectsOf(self)`), `abort` ends them on cancel, and they answer with events to the session.
 *
 * Started by actions rather than by an invoked actor per step, or by events to a long-lived one:
 * creating, starting and stopping two or three actors per step was most of a step's cost, and an
 * event to an actor is a macrostep of its own. Where no effects run (a transition computed as pure
 * logic, as the model-based tests do), `effectsOf` finds none and the actions do nothing.
 *
 * The tick is a `setImmediate` rather than a delayed transition: XState scans every pending
 * delayed event of the system whenever any actor stops, so one timer per sub-agent made a wide
 * fan-out quadratic. Arming it while one is pending changes nothing.
 */
export class SessionEffects {
  private model: StepCancellation | undefined;
  private tools: ToolBatch | undefined;
  private tick: NodeJS.Immediate | undefined;
  private closed = false;

  constructor(private readonly send: (event: EffectEvent) => void) {}

  private readonly sendTick = (): void => {
    this.tick = undefined;
    this.send({ type: 'tick' });
  };

  armTick(): void {
    if (this.closed) return;
    this.tick ??= setImmediate(this.sendTick);
  }

  requestModel(input: StreamModelInput): void {
    if (this.closed) return;
    this.model?.abort(new Error('superseded by a new request'));
    this.model = undefined;
    const cancellation = new StepCancellation();
    this.model = cancellation;
    runModelStep(input, cancellation).then(
      (output) => {
        if (cancellation.isAborted) return;
        this.model = undefined;
        this.send({ type: 'model.done', output });
      },
      (error: unknown) => {
        if (cancellation.isAborted) return;
        this.model = undefined;
        this.send({ type: 'model.error', error });
      },
    );
  }

  runTools(input: RunToolsInput): void {
    if (this.closed) return;
    this.tools?.abandon(new Error('tool batch superseded'));
    const batch = startToolBatch(input, (event) => {
      if (this.closed) return;
      // A drained batch has nothing left to abandon. (Dropping it also spares the next step an
      // Error, whose stack trace costs more than the rest of a short step.)
      if (event.type === 'batch.drained' && this.tools === batch) this.tools = undefined;
      this.send(event);
    });
    this.tools = batch;
  }

  /** Aborts the model request and abandons the tool batch (every call is answered), whichever runs. */
  abort(reason: string): void {
    this.model?.abort(new Error(reason));
    this.model = undefined;
    this.tools?.abandon(new Error(reason));
    this.tools = undefined;
  }

  close(): void {
    this.closed = true;
    if (this.tick) clearImmediate(this.tick);
    this.tick = undefined;
    this.abort('session stopped');
  }
}

const running = new WeakMap<AnyActorRef, SessionEffects>();

/** The effects of a running session (none before its `effects` actor started, or after it stopped). */
export function effectsOf(session: AnyActorRef): SessionEffects | undefined {
  return running.get(session);
}

/**
 * Invoked for a session's whole life: it owns the session's `SessionEffects`, starts with a tick
 * armed (the session's first rest in `readyForUser`), and its teardown (the session ended, was
 * stopped, or crashed and was cleaned up) aborts what still runs — an abandoned batch answers its
 * calls — and then closes the log, last.
 */
export const sessionEffects = fromCallback<EventObject, SessionEffectsInput, EffectEvent>(({ input, sendBack }) => {
  const effects = new SessionEffects(sendBack);
  running.set(input.session, effects);
  effects.armTick();
  return () => {
    effects.close();
    running.delete(input.session);
    // After the other teardowns of the same stop, which may still record (an abandoned batch's answers).
    queueMicrotask(() => {
      const snapshot = input.session.getSnapshot() as { status: string; error?: unknown; value?: unknown };
      input.recorder.stopped({
        state: String(snapshot.value),
        atRest: input.atRest(snapshot),
        ...(snapshot.status === 'error' ? { crash: { error: snapshot.error } } : {}),
      });
    });
  };
});
