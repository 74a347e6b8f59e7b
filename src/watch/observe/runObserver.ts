import type { AnyActorRef, InspectionEvent } from 'xstate';
import { actorsOf, isRunning, systemOf } from '../../engine/actors.js';
import { RunDecoder } from './decoder.js';
import { inspectionEnded, inspectionStarted } from '../../engine/inspection.js';
import { addDeltaTap } from '../../session/deltaTaps.js';
import { EventQueue } from './eventQueue.js';
import type { RunEvent, RunEventListener } from './events.js';

/**
 * Follows one run (a root session and every sub-agent under it) and hands out its events, decoded
 * once, to any number of listeners and async iterators.
 *
 * Backpressure: the machines never wait for a consumer. Listeners are called synchronously, in
 * order, as each event is observed; one that throws is reported on a fresh task (as XState reports
 * an unhandled error) and the others still get the event. Each async iterator has its own queue
 * (see `EventQueue`): nothing is dropped and order is kept; while a consumer lags, consecutive
 * `text.delta`s of one agent merge into one, so a streaming model cannot grow the queue delta by
 * delta.
 *
 * The run ends when its system's root actor ends (for a root session, after its `agent.ended`):
 * iterators finish once they have taken what waits, and what a stop reports in the same tick (its
 * sub-agents' ends) still arrives.
 */
export class RunObserver {
  private readonly decoder = new RunDecoder((event) => this.emit(event));
  private listeners: readonly RunEventListener[] = [];
  private readonly queues = new Set<EventQueue>();
  /** The XState session id of the system's root actor. */
  private rootId: string | undefined;
  private finished = false;
  private system: object | undefined;
  private untap: (() => void) | undefined;
  private readonly detachers: (() => void)[] = [];

  /**
   * Pass as XState's `inspect` option where the root actor is created
   * (`createSessionActor(input, { inspect: observer.inspect })`, `startRun(…, { actor: { inspect } })`):
   * the observer sees the run from its first event.
   */
  readonly inspect = (event: InspectionEvent): void => {
    if (this.finished) return;
    if (!this.system) this.bind(systemOf(event));
    this.rootId ??= event.rootId;
    // Its listeners run inside XState's step: what they command waits for it (see `sendFromOutside`).
    inspectionStarted();
    try {
      this.decoder.inspect(event);
    } finally {
      inspectionEnded();
    }
    // The root actor ended (a session's `agent.ended` has just been sent). What the same stop
    // reports (its sub-agents' ends) comes within this tick.
    if (
      event.type === '@xstate.snapshot' &&
      this.rootId !== undefined &&
      (event.actorRef as AnyActorRef | undefined)?.sessionId === this.rootId &&
      (event.snapshot as { status?: unknown }).status !== 'active'
    ) {
      queueMicrotask(() => this.finish());
    }
  };

  /**
   * Follows `actor`'s system from now on (`actor.system.inspect`): all of it when `actor` has not
   * started yet; otherwise its sessions as they are now, then everything live. Returns what
   * detaches it.
   */
  attach(actor: AnyActorRef): () => void {
    this.bind(actor.system as object);
    this.rootId ??= actor.sessionId;
    if (isRunning(actor)) for (const ref of actorsOf(actor)) this.decoder.snapshot(ref.sessionId, ref.getSnapshot());
    const subscription = actor.system.inspect(this.inspect);
    const detach = (): void => subscription.unsubscribe();
    this.detachers.push(detach);
    return detach;
  }

  /** Calls `listener` with every event from now on, in order; returns what unsubscribes it. */
  subscribe(listener: RunEventListener): () => void {
    this.listeners = [...this.listeners, listener];
    return () => {
      this.listeners = this.listeners.filter((l) => l !== listener);
    };
  }

  /** The events from now on, as an async iterator that ends with the run (or at `break`). */
  events(): AsyncIterableIterator<RunEvent> {
    const queue = new EventQueue(() => this.queues.delete(queue));
    if (this.finished) queue.end();
    else this.queues.add(queue);
    return queue;
  }

  /** Text deltas never pass through a machine: they are tapped from the system's model requests. */
  private bind(system: object | undefined): void {
    if (!system || this.system) return;
    this.system = system;
    this.untap = addDeltaTap(system, (agent, text) => this.decoder.textDelta(agent, text));
  }

  private emit(event: RunEvent): void {
    if (this.finished) return;
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch (error) {
        setTimeout(() => {
          throw error;
        });
      }
    }
    for (const queue of this.queues) queue.push(event);
  }

  private finish(): void {
    if (this.finished) return;
    this.finished = true;
    this.untap?.();
    this.decoder.close();
    for (const detach of this.detachers.splice(0)) detach();
    for (const queue of [...this.queues]) queue.end();
  }
}

/** A new observer, to pass as `inspect` where the root actor is created (see `RunObserver`). */
export function createRunObserver(): RunObserver {
  return new RunObserver();
}

/**
 * Calls `listener` with every event of the run `actor` roots, in order, synchronously as each is
 * observed (the machines never wait for it); returns what unsubscribes. Attach before
 * `actor.start()` to see everything; a running actor's sessions are shown as they are now first.
 *
 * @example
 * const stop = observe(actor, (event) => {
 *   if (event.type === 'agent.state') console.log(event.path.join(' › '), event.state);
 * });
 */
export function observe(actor: AnyActorRef, listener: RunEventListener): () => void {
  const observer = new RunObserver();
  const unsubscribe = observer.subscribe(listener);
  const detach = observer.attach(actor);
  return () => {
    unsubscribe();
    detach();
  };
}

/**
 * The events of the run `actor` roots, as an async iterator: ordered, ending after the root's
 * `agent.ended` (or when the loop breaks). A slow consumer never slows the run: events wait in
 * the iterator's own queue, consecutive text deltas of one agent merged (see `RunObserver`).
 *
 * @example
 * for await (const event of events(actor)) if (event.type === 'text.delta') process.stdout.write(event.text);
 */
export function events(actor: AnyActorRef): AsyncIterableIterator<RunEvent> {
  const observer = new RunObserver();
  const iterator = observer.events();
  const detach = observer.attach(actor);
  const ownReturn = iterator.return?.bind(iterator);
  // Breaking out of the loop detaches from the system too.
  iterator.return = () => {
    detach();
    return ownReturn ? ownReturn() : Promise.resolve({ value: undefined, done: true });
  };
  return iterator;
}
