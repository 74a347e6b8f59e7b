import type { AnyTransitionDefinition } from 'xstate';
import { toDirectedGraph, type DirectedGraphNode } from 'xstate/graph';
import { sessionMachine } from '../../../machines/session.js';
import type { TraceStatechart } from '../trace/format.js';

/** A guard as the machine definition spells it: a name, or `a && b` for `and([...])`. */
export function guardText(guard: unknown): string | undefined {
  if (guard === undefined || guard === null) return undefined;
  if (typeof guard === 'string') return guard;
  if (typeof guard === 'object' && 'type' in guard && typeof guard.type === 'string') {
    // A parameterised guard shows its parameters: `resumesAt(streaming)`.
    const params = 'params' in guard && typeof guard.params === 'object' && guard.params !== null ? Object.values(guard.params).map(String) : [];
    return params.length > 0 ? `${guard.type}(${params.join(', ')})` : guard.type;
  }
  if (typeof guard === 'function') {
    const parts = (guard as { guards?: unknown[] }).guards;
    const op = (guard as { check?: unknown }).check === undefined ? undefined : 'and';
    if (Array.isArray(parts)) {
      // XState's higher-order guards are functions named for what they do: `not`, `and`, `or`.
      const texts = parts.map((g) => guardText(g) ?? '?');
      if (guard.name === 'not') return `!${texts.join('')}`;
      return texts.join(guard.name === 'or' ? ' || ' : ' && ');
    }
    return op ?? (guard.name || 'guard');
  }
  return undefined;
}

function actionText(action: unknown): string {
  if (typeof action === 'string') return action;
  if (typeof action === 'object' && action !== null && 'type' in action && typeof action.type === 'string') return action.type;
  if (typeof action === 'function') return (action as { type?: string }).type ?? (action.name || 'action');
  return 'action';
}

/** An eventless (`always`) transition, labelled as the statechart shows it. */
const ALWAYS_EVENT = 'always';

/**
 * Every transition leaving a node of `toDirectedGraph`: its edges, and its eventless (`always`)
 * transitions, which `toDirectedGraph` leaves out.
 */
export function transitionsOf(node: DirectedGraphNode): { source: string; target: string; event: string; transition: AnyTransitionDefinition }[] {
  const out = node.edges.map((edge) => ({ source: edge.source.id, target: edge.target.id, event: edge.label.text, transition: edge.transition }));
  for (const transition of node.stateNode.always ?? []) {
    for (const target of transition.target ?? []) out.push({ source: node.id, target: target.id, event: ALWAYS_EVENT, transition });
  }
  return out;
}

/**
 * The session machine's statechart — states and transitions with their guards and actions —
 * read from the machine definition with `xstate/graph`'s `toDirectedGraph`. Traces carry it, the
 * viewer draws it, and `npm run visualize` writes it as Mermaid and SVG.
 */
export function sessionStatechart(): TraceStatechart {
  const graph = toDirectedGraph(sessionMachine);
  const strip = (id: string): string => id.replace(/^session\.?/, '') || '*';
  const states: { id: string; final: boolean }[] = [];
  const transitions: TraceStatechart['transitions'][number][] = [];
  const visit = (node: DirectedGraphNode): void => {
    if (node.id !== 'session') states.push({ id: strip(node.id), final: node.stateNode.type === 'final' });
    for (const edge of transitionsOf(node)) {
      const guard = guardText(edge.transition.guard);
      transitions.push({
        source: strip(edge.source),
        target: strip(edge.target),
        event: edge.event,
        ...(guard === undefined ? {} : { guard }),
        actions: edge.transition.actions.map(actionText),
      });
    }
    for (const child of node.children) visit(child);
  };
  visit(graph);
  const initial = sessionMachine.root.initial?.target[0]?.key ?? 'readyForUser';
  return { initial, states, transitions };
}
