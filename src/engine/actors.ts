import type { AnyActorRef, InspectionEvent } from 'xstate';

/**
 * What exarch reads of XState's actors beyond their declared API, here only: whether an actor runs
 * yet, whether it is a root with one observer, the actors under one, and a stand-in for an actor
 * that is gone.
 */

/** XState's `ProcessingStatus.Running` (an actor's `_processingStatus`, not part of its declared type). */
const RUNNING = 1;

/** Whether `actor` was started and has not stopped. */
export function isRunning(actor: AnyActorRef): boolean {
  return (actor as unknown as { _processingStatus?: number })._processingStatus === RUNNING;
}

/** Whether `actor` is a root (it has no parent) and exactly one observer subscribes to it. */
export function isRootWithOneObserver(actor: AnyActorRef): boolean {
  const internals = actor as unknown as { _parent?: unknown; observers?: ReadonlySet<unknown> };
  return internals._parent === undefined && internals.observers?.size === 1;
}

/** An actor and everything under it, parents first. */
export function actorsOf(root: AnyActorRef): AnyActorRef[] {
  const out: AnyActorRef[] = [];
  const visit = (actor: AnyActorRef): void => {
    out.push(actor);
    const children = (actor.getSnapshot() as { children?: Record<string, AnyActorRef> } | undefined)?.children;
    for (const child of Object.values(children ?? {})) visit(child);
  };
  visit(root);
  return out;
}

/**
 * What an inspection consumer reads of an actor ref (id, session id, logic, parent's session id),
 * without the actor and the history it holds: for keeping an ended actor's registration.
 */
export function standIn(actorRef: InspectionEvent['actorRef'], snapshot: unknown): InspectionEvent['actorRef'] {
  const ref = actorRef as unknown as { id: string; sessionId: string; logic?: unknown; _parent?: { sessionId: string } };
  return {
    id: ref.id,
    sessionId: ref.sessionId,
    logic: ref.logic,
    _parent: ref._parent ? { sessionId: ref._parent.sessionId } : undefined,
    getSnapshot: () => snapshot,
  } as unknown as InspectionEvent['actorRef'];
}

/** The actor system of an inspected actor, if the event has one (hand-made events may not). */
export function systemOf(event: InspectionEvent): object | undefined {
  const ref = event.actorRef as { system?: unknown } | undefined;
  return typeof ref?.system === 'object' && ref.system !== null ? ref.system : undefined;
}
