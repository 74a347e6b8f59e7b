import type { StreamModelInput } from '../engine/model/streamModel.js';
import type { AgentIdentity, SessionListener } from '../engine/types.js';

/** Called with each text delta of any session of one actor system. */
export type DeltaTap = (agent: AgentIdentity, text: string) => void;

/**
 * Text deltas never become machine events (a streaming model sends thousands), so XState's
 * inspection cannot show them. An observer taps them here, per actor system, and every model
 * request of that system's sessions reports to its taps besides the session's own listener.
 * Keyed weakly by the system: a run that ends takes its taps with it.
 */
const taps = new WeakMap<object, Set<DeltaTap>>();

/** Adds a tap to `system`'s deltas; returns what removes it. */
export function addDeltaTap(system: object, tap: DeltaTap): () => void {
  let set = taps.get(system);
  if (!set) taps.set(system, (set = new Set()));
  set.add(tap);
  // The set stays (empty) once made: a request under way holds it, and reads it at each delta.
  return () => void set.delete(tap);
}

/**
 * A model request's input with `system`'s taps joined to its listener; the input itself when the
 * system was never tapped (a run no one observes pays one lookup per request).
 */
export function withDeltaTaps(system: object, input: StreamModelInput): StreamModelInput {
  const set = taps.get(system);
  if (!set) return input;
  const own = input.listener;
  const listener: SessionListener = {
    onTextDelta: (agent, delta) => {
      own?.onTextDelta?.(agent, delta);
      for (const tap of set) tap(agent, delta);
    },
    onToolUseStart: (agent, id, name) => own?.onToolUseStart?.(agent, id, name),
    onToolInputDelta: (agent, id, json) => own?.onToolInputDelta?.(agent, id, json),
    onRetry: (agent, info) => own?.onRetry?.(agent, info),
  };
  return { ...input, listener };
}
