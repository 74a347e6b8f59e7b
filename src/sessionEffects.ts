import { fromCallback, type AnyActorRef } from 'xstate';
import type { SessionRecorder } from './log/recorder.js';
import { runModelStep, StepCancellation, type StreamModelInput } from './model/streamModel.js';
import { startToolBatch, type RunToolsInput, type ToolBatch, type ToolBatchEvent } from './tools/runTools.js';
import type { ModelResponse } from './types.js';

/** What a session asks of its effects. */
export type EffectCommand =
  | { readonly type: 'model.request'; readonly input: StreamModelInput }
  | { readonly type: 'tools.run'; readonly input: RunToolsInput }
  /** Send `tick` on the next turn of the event loop (arms while one is pending change nothing). */
  | { readonly type: 'tick.arm' }
  /** Aborts the model request and abandons the tool batch, whichever runs. */
  | { readonly type: 'abort' };

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
 * A session's I/O, as one actor invoked for the session's whole life: the model request of
 * `streaming`, the tool batch of `dispatchingBatch` and the tick `readyForUser` and `nudged` rest
 * on are commands sent on entry, answered with events, and aborted by `abort` (on cancel) or by
 * the actor's teardown. One long-lived actor rather than an invoked actor per step: creating,
 * starting and stopping two or three actors per step was most of a step's cost.
 *
 * The tick is a `setImmediate` rather than a delayed transition: XState scans every pending
 * delayed event of the system whenever any actor stops, so one timer per sub-agent made a wide
 * fan-out quadratic.
 *
 * Its teardown (the session ended, was stopped, or crashed and was cleaned up) aborts what still
 * runs — an abandoned batch answers its calls — and then closes the log, last.
 */
export const sessionEffects = fromCallback<EffectCommand, SessionEffectsInput, EffectEvent>(({ input, receive, sendBack }) => {
  let model: StepCancellation | undefined;
  let tools: ToolBatch | undefined;
  let tick: NodeJS.Immediate | undefined;
  let closed = false;
  const sendTick = (): void => {
    tick = undefined;
    sendBack({ type: 'tick' });
  };

  receive((command) => {
    if (closed) return;
    switch (command.type) {
      case 'tick.arm':
        tick ??= setImmediate(sendTick);
        return;
      case 'model.request': {
        model?.abort(new Error('superseded by a new request'));
        const cancellation = new StepCancellation();
        model = cancellation;
        runModelStep(command.input, cancellation).then(
          (output) => {
            if (cancellation.isAborted) return;
            model = undefined;
            sendBack({ type: 'model.done', output });
          },
          (error: unknown) => {
            if (cancellation.isAborted) return;
            model = undefined;
            sendBack({ type: 'model.error', error });
          },
        );
        return;
      }
      case 'tools.run':
        tools?.abandon(new Error('tool batch superseded'));
        tools = startToolBatch(command.input, (event) => {
          if (!closed) sendBack(event);
        });
        return;
      case 'abort':
        model?.abort(new Error('model request cancelled'));
        model = undefined;
        tools?.abandon(new Error('tool batch cancelled'));
        tools = undefined;
        return;
    }
  });

  return () => {
    closed = true;
    if (tick) clearImmediate(tick);
    model?.abort(new Error('session stopped'));
    tools?.abandon(new Error('tool batch cancelled'));
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
