import { fromCallback, type EventObject } from 'xstate';

export type TickEvent = { readonly type: 'tick' };

/**
 * Sends `tick` once, on the next turn of the event loop (after pending I/O). The session rests on
 * it where a state must be observable before it moves on. A plain callback actor rather than a
 * delayed transition: XState scans every pending delayed event of the system whenever any actor
 * stops, so one timer per sub-agent made a wide fan-out quadratic.
 */
export const nextTick = fromCallback<EventObject, void, TickEvent>(({ sendBack }) => {
  const handle = setImmediate(() => sendBack({ type: 'tick' }));
  return () => clearImmediate(handle);
});
