import { fromPromise, type AnyActorRef, type AnyEventObject } from 'xstate';
import type { AgentBudget } from './budget.js';
import type { AgentIdentity, AgentResult } from './types.js';

/**
 * Sub-agents that run somewhere else: on another worker, as their own job (src/workers/). A
 * session whose options carry one (and which spends within no budget of its own or an ancestor's:
 * a budget is kept in one process) starts every sub-agent through it instead of spawning a copy of
 * the session machine. The parent's side is unchanged: the sub-agent is a member of a crew, its
 * result arrives as the crew's `done` event, `cancel_agent` sends it `cancel`.
 */
export interface RemoteChildren {
  /**
   * Starts `child` elsewhere, or finds it again (a parent taken up from its journal starts its live
   * children again: the same child must not run twice). `signal` aborts when the parent's actor
   * stops (it parked, or its process is stopping): stop listening for the result, the child runs on.
   */
  start(child: RemoteChildSpec, signal: AbortSignal): RemoteChild;
}

/** What a sub-agent is started with: what its parent's `spawn` record says. */
export interface RemoteChildSpec {
  /** The parent's actor id for it (its deliveries carry it). */
  readonly actorId: string;
  readonly parent: AgentIdentity;
  readonly agent: AgentIdentity;
  readonly task: string;
  /** The declared agent type it was started as. */
  readonly profile?: string;
  /** The budget its parent gave it: it and its subtree spend within it (the subtree then runs where it runs). */
  readonly budget?: AgentBudget;
}

export interface RemoteChild {
  /** Settles with the sub-agent's result, as its session's `done` output would be. */
  readonly result: Promise<AgentResult>;
  /** The parent cancels it (`cancel_agent`, or the parent's own end): its result still arrives, `cancelled`. */
  cancel(reason: string): void;
}

/** The input of a crew member that runs elsewhere. */
export interface RemoteMemberInput {
  readonly remote: RemoteChildren;
  readonly spec: RemoteChildSpec;
}

const started = new WeakMap<AnyActorRef, RemoteChild>();

const awaitResult = fromPromise<AgentResult, RemoteMemberInput>(({ input, self, signal }) => {
  const child = input.remote.start(input.spec, signal);
  started.set(self, child);
  return child.result;
});

/**
 * The actor a crew runs a remote sub-agent as: a promise actor whose output is the sub-agent's
 * result, and which also takes the `cancel` a crew sends its members (a promise actor ignores
 * events: this one passes a cancel on to the sub-agent, wherever it runs).
 */
export const remoteMemberLogic: typeof awaitResult = {
  ...awaitResult,
  transition(snapshot, event: AnyEventObject, scope) {
    if (event.type === 'cancel' && snapshot.status === 'active') {
      const reason = typeof event['reason'] === 'string' ? event['reason'] : 'cancelled';
      started.get(scope.self)?.cancel(reason);
    }
    return awaitResult.transition(snapshot, event, scope);
  },
};
