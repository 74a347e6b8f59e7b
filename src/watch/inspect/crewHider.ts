import type { StatelyInspectionEvent } from '@statelyai/inspect';
import type { InspectionEvent } from 'xstate';
import { CREW_MACHINE_ID } from '../../../machines/crew.js';

/** XState's event for a child actor that finished (`done`) or crashed (`error`). */
const CHILD_ENDED = /^xstate\.(done|error)\.actor\./;

/**
 * Keeps crews out of what the live inspector shows. A crew (machines/crew.ts) is plumbing that
 * holds a batch's sub-agents, not an agent: the inspector shows each sub-agent as the child of the
 * session that spawned it, and the result it delivers as sent by it, not by its crew.
 *
 * `note` sees each inspection event as it happens (where the actor's logic says what it is);
 * `view` rewrites the converted wire message that follows, or drops it (`undefined`).
 */
export class CrewHider {
  /** Crews by session id, with the session id of the session that holds them. */
  private readonly crews = new Map<string, string | undefined>();
  /** The sub-agent whose end each crew last received: the sender of the result it forwards next. */
  private readonly lastEnded = new Map<string, string>();

  note(event: InspectionEvent): void {
    if (event.type !== '@xstate.actor') return;
    const ref = event.actorRef as unknown as { logic?: { id?: unknown }; sessionId: string; _parent?: { sessionId: string } };
    if (ref.logic?.id === CREW_MACHINE_ID) this.crews.set(ref.sessionId, ref._parent?.sessionId);
  }

  view(message: StatelyInspectionEvent): StatelyInspectionEvent | undefined {
    const { crews } = this;
    if (crews.has(message.sessionId)) {
      // An event to a crew is dropped, but a sub-agent's end it receives says who sends what it forwards.
      if (message.type === '@xstate.event' && message.sourceId !== undefined && CHILD_ENDED.test(message.event.type))
        this.lastEnded.set(message.sessionId, message.sourceId);
      return undefined;
    }
    if (message.type === '@xstate.actor' && message.parentId !== undefined && crews.has(message.parentId)) {
      const parentId = crews.get(message.parentId);
      return { ...message, ...(parentId === undefined ? { parentId: undefined } : { parentId }) };
    }
    if (message.type === '@xstate.event' && message.sourceId !== undefined && crews.has(message.sourceId)) {
      const sourceId = CHILD_ENDED.test(message.event.type) ? this.lastEnded.get(message.sourceId) : undefined;
      return { ...message, sourceId };
    }
    return message;
  }
}
