import type { AnyActorRef } from 'xstate';

/**
 * Steering a live tree from the host: find a session by its agent id (its path, `root/lead/scribe`)
 * and cancel its subtree, or give it a message. Both act on exactly that session; the rest of the
 * tree goes on.
 */

/** The live session of `agentId` in the tree of `root`, or undefined when none runs. */
export function findAgent(root: AnyActorRef, agentId: string): AnyActorRef | undefined {
  const visit = (actor: AnyActorRef): AnyActorRef | undefined => {
    const snapshot = actor.getSnapshot() as { status?: string; context?: { agent?: { id?: string } }; children?: Record<string, AnyActorRef | undefined> };
    const id = snapshot.context?.agent?.id;
    if (id === agentId) return snapshot.status === 'active' ? actor : undefined;
    // Only down the branch that can hold it (a crew has no agent: look inside it).
    if (id !== undefined && !agentId.startsWith(`${id}/`)) return undefined;
    for (const child of Object.values(snapshot.children ?? {})) {
      const found = child && visit(child);
      if (found) return found;
    }
    return undefined;
  };
  return visit(root);
}

/** The ids of the agents running in the tree of `root`, root first, each parent before its children. */
export function runningAgents(root: AnyActorRef): string[] {
  const ids: string[] = [];
  const visit = (actor: AnyActorRef): void => {
    const snapshot = actor.getSnapshot() as { status?: string; context?: { agent?: { id?: string } }; children?: Record<string, AnyActorRef | undefined> };
    const id = snapshot.context?.agent?.id;
    if (id !== undefined) {
      if (snapshot.status !== 'active') return;
      ids.push(id);
    }
    for (const child of Object.values(snapshot.children ?? {})) if (child) visit(child);
  };
  visit(root);
  return ids;
}

/**
 * Cancels the sub-agent `agentId` and its whole subtree; its parent receives
 * `[agent 'NAME' was cancelled]` as for `cancel_agent`. Returns false when no such sub-agent runs
 * (the root is stopped with `cancel` on its own actor).
 */
export function cancelAgent(root: AnyActorRef, agentId: string, reason = 'cancelled by the host'): boolean {
  const found = agentId.includes('/') ? findAgent(root, agentId) : undefined;
  if (!found) return false;
  found.send({ type: 'cancel', reason });
  return true;
}

/**
 * Gives the running agent `agentId` a user message: it is queued, and the agent receives it as a
 * user turn at its next turn boundary (`readyForUser`). Returns false when no such agent runs.
 */
export function messageAgent(root: AnyActorRef, agentId: string, text: string): boolean {
  const found = findAgent(root, agentId);
  if (!found) return false;
  found.send({ type: 'user.message', text });
  return true;
}
