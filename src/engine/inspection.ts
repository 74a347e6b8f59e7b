import type { EventObject } from 'xstate';

/**
 * How many of exarch's inspection callbacks are running (a run observer decoding an event, and the
 * listeners it calls). XState calls them in the middle of its own work: the `@xstate.event` of a
 * sub-agent's `done` comes after the sub-agent stopped and before its crew receives the event. A
 * listener that cancels the run from there (`interrupt()` when some agent ends) would have the
 * crew stopped under that event, which XState then reports as "sent to stopped actor".
 */
let inspecting = 0;

/**
 * Marks an inspection callback as running until `inspectionEnded()`, so that the commands its
 * listeners give wait for XState (see `sendFromOutside`). A pair of calls rather than a callback:
 * it runs for every inspection event, and a closure per event would be garbage on the hot path.
 */
export function inspectionStarted(): void {
  inspecting += 1;
}

/** Ends what `inspectionStarted()` began; in a `finally`, so a listener that throws does not leave it marked. */
export function inspectionEnded(): void {
  inspecting -= 1;
}

/**
 * Sends a command from outside the machines (a cancel: an interrupt, a failed store, an abort
 * signal) to a run's root: at once, or, when given by an inspection listener, once XState has
 * finished what it was doing (a microtask later), to a root that still runs.
 */
export function sendFromOutside<E extends EventObject>(actor: { send(event: E): void; getSnapshot(): { readonly status: string } }, event: E): void {
  if (inspecting === 0) {
    actor.send(event);
    return;
  }
  queueMicrotask(() => {
    if (actor.getSnapshot().status === 'active') actor.send(event);
  });
}
