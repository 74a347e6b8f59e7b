import { assign, enqueueActions, fromPromise, sendParent, setup, type AnyActorRef } from 'xstate';
import type { AgentResult } from '../src/types.js';
import type { SessionInput } from './session.js';

/** The most sub-agents one crew ever holds. */
export const CREW_SIZE = 64;

export type CrewEvent =
  | { readonly type: 'crew.spawn'; readonly children: readonly { readonly actorId: string; readonly input: SessionInput }[] }
  | { readonly type: 'crew.cancel'; readonly actorId: string; readonly reason: string }
  | { readonly type: `xstate.done.actor.${number}`; readonly output: AgentResult; readonly actorId: string }
  | { readonly type: `xstate.error.actor.${number}`; readonly error: unknown; readonly actorId: string };

/**
 * Stops what an actor that crashed left running. XState stops an actor's children as part of the
 * actor's own stop, inside its transition; an actor whose transition throws never gets there (and
 * `stopChild` on it is a no-op), so without this a crashed sub-agent's in-flight model request,
 * its tool calls, its log's lifetime and its crews — its whole subtree of sub-agents, still making
 * requests — would run on with no one to answer to. Does nothing for an actor that did not crash.
 */
export function stopOrphansOf(actor: AnyActorRef | undefined): void {
  const snapshot = actor?.getSnapshot() as { status?: string; children?: Record<string, AnyActorRef> } | undefined;
  if (snapshot?.status !== 'error') return;
  // `_stop` is what XState's own `stopChild` calls; `stop()` refuses actors that have a parent.
  for (const child of Object.values(snapshot.children ?? {})) (child as AnyActorRef & { _stop?: () => void })._stop?.();
}

const sessionPlaceholder = fromPromise<AgentResult, SessionInput>(() => {
  throw new Error('exarch: the crew binds the session actor key when machines/session.ts loads');
});

/**
 * Holds up to `CREW_SIZE` of a session's sub-agents and forwards each one's `done` or `error`
 * event to the session unchanged, then stops it.
 *
 * Why a crew exists: XState copies an actor's `snapshot.children` on every spawn and stop, and a
 * session spawns and stops its own invoked actors (the model request, the tool batch) on every
 * step. With thousands of sub-agents among them, every step and every delivery would copy
 * thousands of entries. Crews keep the session's own children few, and each crew's small.
 */
export const crewMachine = setup({
  types: { context: {} as Record<string, never>, events: {} as CrewEvent },
  actors: { session: sessionPlaceholder },
}).createMachine({
  id: 'crew',
  context: {},
  on: {
    'crew.spawn': {
      // One assign for the whole batch: one copy of the crew's children.
      actions: assign(({ event, spawn }) => {
        for (const child of event.children) spawn('session', { id: child.actorId, input: child.input });
        return {};
      }),
    },
    'crew.cancel': {
      actions: enqueueActions(({ event, enqueue, self }) => {
        // The child may have finished while the cancel was on its way; its result is already sent.
        if (self.getSnapshot().children[event.actorId]) enqueue.sendTo(event.actorId, { type: 'cancel', reason: event.reason });
      }),
    },
    'xstate.done.actor.*': {
      actions: enqueueActions(({ event, enqueue }) => {
        enqueue(sendParent(event));
        enqueue.stopChild(event.actorId);
      }),
    },
    'xstate.error.actor.*': {
      actions: enqueueActions(({ event, enqueue, self }) => {
        const crashed: AnyActorRef | undefined = self.getSnapshot().children[event.actorId];
        enqueue(() => stopOrphansOf(crashed));
        enqueue(sendParent(event));
        enqueue.stopChild(event.actorId);
      }),
    },
  },
});
