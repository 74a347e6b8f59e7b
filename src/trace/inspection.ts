import type { ActorRefLike, InspectionEvent } from 'xstate';

/**
 * The one place that reads XState's inspection events (`@xstate.actor`, `@xstate.snapshot`,
 * `@xstate.event`). Everything else sees `Observation`s, so XState v6's changes to these events
 * touch this file only.
 */
export type Observation =
  | { readonly kind: 'actor'; readonly actor: ObservedActor }
  | { readonly kind: 'snapshot'; readonly actor: ObservedActor; readonly snapshot: unknown }
  | { readonly kind: 'event'; readonly actor: ObservedActor; readonly event: { readonly type: string; readonly [key: string]: unknown } };

/** What the recorder may know of an actor: its id within its parent, and its latest snapshot. */
export interface ObservedActor {
  /** Unique within the actor system. */
  readonly sessionId: string;
  /** The id its parent gave it (a sub-agent's is a decimal number). */
  readonly id: string;
  getSnapshot(): unknown;
}

function observed(ref: ActorRefLike): ObservedActor {
  // Inspection hands out the actors themselves; their `id` is not part of the declared type.
  const id = (ref as { readonly id?: unknown }).id;
  return { sessionId: ref.sessionId, id: typeof id === 'string' ? id : '', getSnapshot: () => ref.getSnapshot() };
}

/** Turns an XState inspection event into an observation, or undefined for events of no interest. */
export function observe(event: InspectionEvent): Observation | undefined {
  switch (event.type) {
    case '@xstate.actor':
      return { kind: 'actor', actor: observed(event.actorRef) };
    case '@xstate.snapshot':
      return { kind: 'snapshot', actor: observed(event.actorRef), snapshot: event.snapshot };
    case '@xstate.event':
      return { kind: 'event', actor: observed(event.actorRef), event: event.event as { readonly type: string; readonly [key: string]: unknown } };
    default:
      return undefined;
  }
}
