import { enqueueActions, sendParent, setup, stopChild, type AnyActorLogic, type AnyActorRef } from 'xstate';
import { closeEffects } from '../src/session/sessionEffects.js';
import type { AgentResult } from '../src/engine/types.js';
import { remoteMemberLogic, type RemoteMemberInput } from '../src/engine/remoteChildren.js';

/** The most sub-agents one crew ever holds. */
export const CREW_SIZE = 64;

/** A sub-agent for a crew to run: the session's actor id for it, and its session's input. */
export interface CrewMember<Input> {
  readonly actorId: string;
  readonly input: Input;
  /** Set for a sub-agent that runs elsewhere (see `RemoteChildren`): the crew runs a stand-in that waits for its result. */
  readonly remote?: RemoteMemberInput;
}

/** @public The crew machine's input (named in the session machine's declared type). */
export interface CrewInput<Input> {
  readonly members: readonly CrewMember<Input>[];
}

/** @public Named in the session machine's declared type. */
export type CrewEvent =
  | { readonly type: 'crew.cancel'; readonly actorId: string; readonly reason: string }
  | { readonly type: `xstate.done.actor.${number}`; readonly output: AgentResult; readonly actorId: string }
  | { readonly type: `xstate.error.actor.${number}`; readonly error: unknown; readonly actorId: string };

/**
 * Stops what an actor that crashed left running. XState stops an actor's children as part of the
 * actor's own stop, inside its transition; an actor whose transition throws never gets there (and
 * `stopChild` on it is a no-op), so without this a crashed sub-agent's in-flight model request,
 * its tool calls, its open log and its crews — its whole subtree of sub-agents, still making
 * requests — would run on with no one to answer to. Does nothing for an actor that did not crash.
 */
export function stopOrphansOf(actor: AnyActorRef | undefined): void {
  const snapshot = actor?.getSnapshot() as { status?: string; children?: Record<string, AnyActorRef> } | undefined;
  if (!actor || snapshot?.status !== 'error') return;
  // Its own model request and tool calls (which also closes its log, as failed).
  closeEffects(actor);
  // `_stop` is what XState's own `stopChild` calls; `stop()` refuses actors that have a parent.
  for (const child of Object.values(snapshot.children ?? {})) (child as AnyActorRef & { _stop?: () => void })._stop?.();
}

/** @public Which crew-local actor id stands for which of the session's actor ids, both ways (named in the session machine's declared type). */
export interface CrewContext {
  /** The session's actor id of the child at each local id. */
  readonly sessionIds: string[];
  readonly localIds: Map<string, string>;
}

/**
 * Makes the crew machine: it holds up to `CREW_SIZE` of a session's sub-agents and forwards each
 * one's `done` or `error` event to the session, then stops it.
 *
 * Why a crew exists: XState copies an actor's `snapshot.children` on every spawn and stop, and
 * every delivery stops a finished child. Were thousands of sub-agents the session's own children,
 * every delivery would copy thousands of entries. Crews keep the session's own children few (one
 * per 64 sub-agents), and each crew's small. A crew is spawned with its members, those of one
 * tool batch, and is stopped once the last of them has finished.
 *
 * Inside a crew, children have the local ids "0" to "63", and the crew renames their events to
 * the session's actor ids as it forwards them: a children record keyed by dense small integers is
 * copied by V8's fast path, while one keyed by the session's ids (say 6,400 to 6,463) is a sparse
 * dictionary that cost about 12 µs per copy, that is per finished sub-agent.
 *
 * Why a function: the members are sessions, and a session spawns crews. machines/session.ts makes
 * its crew with `memberLogic`, a function returning the session machine, which XState calls when
 * the crew spawns a member under the key `session` — by then the session machine exists. So this
 * file imports nothing from session.ts, nothing is bound by mutation when a module loads, and
 * members are still spawned by a key (which persisted snapshots name), with the same actor ids.
 */
/** The crew machine's id: what tells a crew from a session to those that watch actors (the live inspector leaves crews out). */
export const CREW_MACHINE_ID = 'crew';

export function createCrewMachine<Input>(memberLogic: () => AnyActorLogic) {
  return setup({
    types: { context: {} as CrewContext, events: {} as CrewEvent, input: {} as CrewInput<Input> },
    actors: {
      // A getter: XState looks a key up in the machine's actors when it spawns, not before.
      get session(): AnyActorLogic {
        return memberLogic();
      },
      remote: remoteMemberLogic,
    },
  }).createMachine({
    id: CREW_MACHINE_ID,
    // A crew is made with all the members it will ever hold (those of one tool batch), and spawns
    // them as it starts: the session's batch needs no event to each crew, and so no enqueued actions.
    context: ({ input, spawn }) => {
      const sessionIds: string[] = [];
      const localIds = new Map<string, string>();
      for (const member of input.members) {
        const localId = String(sessionIds.length);
        sessionIds.push(member.actorId);
        localIds.set(member.actorId, localId);
        if (member.remote) spawn('remote', { id: localId, input: member.remote });
        else spawn('session', { id: localId, input: member.input });
      }
      return { sessionIds, localIds };
    },
    on: {
      'crew.cancel': {
        actions: enqueueActions(({ context, event, enqueue, self }) => {
          // The child may have finished while the cancel was on its way: gone, or at its final state
          // with its done event still queued here. Its result is already on its way; a cancel sent to
          // it now would only be XState's "sent to stopped actor" warning.
          const localId = context.localIds.get(event.actorId);
          const child: AnyActorRef | undefined = localId === undefined ? undefined : self.getSnapshot().children[localId];
          if (localId !== undefined && child?.getSnapshot().status === 'active') enqueue.sendTo(localId, { type: 'cancel', reason: event.reason });
        }),
      },
      'xstate.done.actor.*': {
        actions: [
          sendParent(({ context, event }) => {
            const actorId = sessionIdOf(context, event.actorId);
            return { type: `xstate.done.actor.${actorId}`, actorId, output: (event as { output: AgentResult }).output };
          }),
          stopChild(({ event }) => event.actorId),
        ],
      },
      'xstate.error.actor.*': {
        actions: enqueueActions(({ context, event, enqueue, self }) => {
          const crashed: AnyActorRef | undefined = self.getSnapshot().children[event.actorId];
          enqueue(() => stopOrphansOf(crashed));
          const actorId = sessionIdOf(context, event.actorId);
          enqueue(sendParent({ type: `xstate.error.actor.${actorId}`, actorId, error: (event as { error: unknown }).error }));
          enqueue.stopChild(event.actorId);
        }),
      },
    },
  });
}

function sessionIdOf(context: CrewContext, localId: string): string {
  const actorId = context.sessionIds[Number(localId)];
  if (actorId === undefined) throw new Error(`exarch: crew has no child with local id ${localId}`);
  context.localIds.delete(actorId);
  return actorId;
}
