import type { AnyActorRef } from 'xstate';
import type { AgentIdentity, Usage } from './types.js';

/**
 * A bound on the spend of a whole tree of agents, counted from the usage each model response
 * reports as it completes. Either bound, or both; `maxCost` needs `price`.
 */
export interface TreeBudget {
  /** Tokens of every kind (input, output, cache writes and reads) across the tree. */
  readonly maxTokens?: number;
  /** US$ across the tree, as `price` reckons each response's usage. */
  readonly maxCost?: number;
  readonly price?: (usage: Usage) => number;
}

/**
 * The tree's shared meter (one per root, in the options every sub-agent shares).
 *
 * The bound it keeps: a model request starts only while the tree's spend so far is under the
 * budget. When a completed response takes the spend to or past it, every running sub-agent is
 * cancelled (its parent receives `[agent 'NAME' was cancelled]`), which aborts the requests they
 * had in flight, at most one per running agent; a session that would go on after that ends
 * `capped` with the reason "budget". The root gets one final request to answer from what it has;
 * after it, the root too ends `capped` if it would go on.
 */
export class BudgetMeter {
  private tokens = 0;
  private cost = 0;
  private crossed = false;
  private finalTurn = false;
  private root: AnyActorRef | undefined;

  constructor(private readonly budget: TreeBudget | undefined) {}

  /** The root session, whose sub-agents a crossing cancels. */
  attachRoot(root: AnyActorRef): void {
    this.root = root;
  }

  /** Whether the budget was reached. */
  get spent(): boolean {
    return this.crossed;
  }

  /** What was spent, for the notice that says the budget stopped the run. */
  get totals(): { readonly tokens: number; readonly cost: number } {
    return { tokens: this.tokens, cost: this.cost };
  }

  /** A response completed with this usage. */
  add(usage: Usage): void {
    const { budget } = this;
    if (!budget) return;
    this.tokens += usage.inputTokens + usage.outputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens;
    if (budget.price) this.cost += budget.price(usage);
    if (this.crossed) return;
    if ((budget.maxTokens !== undefined && this.tokens >= budget.maxTokens) || (budget.maxCost !== undefined && this.cost >= budget.maxCost)) {
      this.crossed = true;
      // After the transition that committed the response: cancelling from inside it would re-enter the tree.
      const root = this.root;
      if (root) queueMicrotask(() => cancelSubAgents(root));
    }
  }

  /** Whether a session that would go on must end `capped` ("budget"): any sub-agent once the budget is spent; the root after its final request. */
  caps(agent: AgentIdentity): boolean {
    return this.crossed && (agent.depth > 0 || this.finalTurn);
  }

  /** A request starts: the root's first one after the budget was spent is its final turn. */
  requestStarting(agent: AgentIdentity): void {
    if (this.crossed && agent.depth === 0) this.finalTurn = true;
  }
}

/** Cancels the root's running sub-agents (each cancels its own subtree first). */
function cancelSubAgents(root: AnyActorRef): void {
  const visit = (actor: AnyActorRef): void => {
    for (const child of Object.values((actor.getSnapshot() as { children?: Record<string, AnyActorRef | undefined> }).children ?? {})) {
      if (!child) continue;
      const snapshot = child.getSnapshot() as { status?: string; context?: { agent?: unknown } };
      if (snapshot.context?.agent === undefined) visit(child); // a crew: its members are the sub-agents
      else if (snapshot.status === 'active') child.send({ type: 'cancel', reason: 'the tree budget is spent' });
    }
  };
  visit(root);
}

/** Checks a budget given by a host; throws one line for a bad one. */
export function checkBudget(budget: TreeBudget | undefined): TreeBudget | undefined {
  if (budget === undefined) return undefined;
  for (const key of ['maxTokens', 'maxCost'] as const) {
    const value = budget[key];
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value <= 0)) throw new RangeError(`exarch: budget.${key} must be a positive number, got ${String(value)}`);
  }
  if (budget.maxCost !== undefined && typeof budget.price !== 'function') throw new TypeError('exarch: budget.maxCost needs budget.price, the cost in US$ of a response’s usage');
  return budget;
}
