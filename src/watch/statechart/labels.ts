import type { TraceStatechart } from '../trace/format.js';

export type Transition = TraceStatechart['transitions'][number];

/**
 * The guard of each transition as a diagram shows it: its own guard, or `else` for an unguarded
 * transition that follows guarded ones on the same event from the same state (XState tries them
 * in order, so it is taken when every guard before it failed).
 */
export function displayGuards(transitions: readonly Transition[]): (string | undefined)[] {
  const seen = new Set<string>();
  return transitions.map((t) => {
    const key = `${t.source}\u0000${t.event}`;
    const earlier = seen.has(key);
    seen.add(key);
    return t.guard ?? (earlier ? 'else' : undefined);
  });
}

/** `event [guard] / action1, action2`, as UML writes a transition. */
export function transitionLabel(transition: Transition, guard: string | undefined = transition.guard): string {
  const shown = guard === undefined ? '' : ` [${guard}]`;
  const actions = transition.actions.length === 0 ? '' : ` / ${transition.actions.join(', ')}`;
  return `${transition.event}${shown}${actions}`;
}
