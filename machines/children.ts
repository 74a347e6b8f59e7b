import type { AgentBudget, BudgetScope } from '../src/engine/budget.js';
import type { RemoteChildSpec, RemoteMemberInput } from '../src/engine/remoteChildren.js';
import type { ResolvedOptions } from '../src/session/options.js';
import { addUsage } from '../src/engine/usage.js';
import type { AgentResult } from '../src/engine/types.js';
import type { SessionInput, SessionContext } from './sessionTypes.js';

// What a session passes the sub-agents it spawns, and takes from them when they finish.

/** What a parent passes a sub-agent of its budgets: the one it gives it, and the one it spends within. */
export function budgetsFor(enclosing: BudgetScope | undefined, own: AgentBudget | undefined): Pick<SessionInput, 'subtreeBudget' | 'enclosingBudget'> {
  return { ...(own === undefined ? {} : { subtreeBudget: own }), ...(enclosing === undefined ? {} : { enclosingBudget: enclosing }) };
}

/**
 * A sub-agent that runs elsewhere (see `RemoteChildren`), or undefined for one that runs here: a
 * session that spends within a budget keeps its subtree in its own process, where the budget is
 * kept.
 */
export function remoteMember(options: ResolvedOptions, scope: BudgetScope | undefined, spec: RemoteChildSpec): RemoteMemberInput | undefined {
  return options.remoteChildren && scope === undefined ? { remote: options.remoteChildren, spec } : undefined;
}

/** A child's result enters the inbox; returns the crew to stop, if the child was its last. */
export function acceptChildResult(
  context: SessionContext,
  actorId: string,
  result: AgentResult,
): { update: Partial<SessionContext>; emptyCrew: string | undefined } {
  const removed = context.children.remove(actorId);
  context.inbox.push(result);
  context.fixed.recorder.record({ type: 'inbox', actorId, result });
  return { update: { childUsage: addUsage(context.childUsage, result.usage) }, emptyCrew: removed?.emptyCrew };
}
