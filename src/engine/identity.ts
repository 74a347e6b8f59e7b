import type { AgentIdentity } from './types.js';

export const ROOT_AGENT: AgentIdentity = Object.freeze({ name: 'root', path: Object.freeze(['root']), depth: 0, id: 'root' });

/** The identity of the `use`-th child named `name` of `parent` (ids stay unique when a name is reused). */
export function childIdentity(parent: AgentIdentity, name: string, use = 1): AgentIdentity {
  return {
    name,
    path: [...parent.path, name],
    depth: parent.depth + 1,
    id: `${parent.id}/${name}${use > 1 ? `#${use}` : ''}`,
  };
}

/**
 * For a host machine that runs a session as its own sub-agent: the session is offered `reply`,
 * ends in `replied` (or another final state) and its output is the `AgentResult`.
 */
export function hostedSubAgent(name: string, host = 'host'): AgentIdentity {
  return childIdentity({ name: host, path: [host], depth: 0, id: host }, name);
}
