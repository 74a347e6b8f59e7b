import type { AnyActorRef } from 'xstate';
import type { AgentIdentity, Usage } from './types.js';
import { addUsage } from './usage.js';

/**
 * A bound on the spend of a whole tree of agents, counted from the usage the model streams reports
 * as it arrives (see `StreamSink.usage`). Either bound, or both; `maxCost` needs `price`. A `price`
 * alone bounds nothing, but lets parents give sub-agents budgets in US$ (`agent {…, budget: { cost }}`).
 */
export interface TreeBudget {
  /** Tokens of every kind (input, output, cache writes and reads) across the tree. */
  readonly maxTokens?: number;
  /** US$ across the tree, as `price` reckons each response's usage. */
  readonly maxCost?: number;
  readonly price?: (usage: Usage) => number;
}

/**
 * The budget a parent gives a sub-agent in its `agent` call: what the sub-agent and every agent
 * below it may spend together. Either bound, or both; `cost` (US$) needs the run's prices.
 */
export interface AgentBudget {
  readonly tokens?: number;
  readonly cost?: number;
}

/** What one agent spent: every token its model requests reported, those aborted or retried included. */
export interface AgentSpend {
  readonly agent: AgentIdentity;
  /** The model its profile asks for; undefined: the provider's. */
  readonly model: string | undefined;
  readonly usage: Usage;
}

/** A budget was reached: the tree's (`scope: 'tree'`, `agent` the root) or a sub-agent's. */
export interface BudgetCrossing {
  readonly scope: 'tree' | 'agent';
  /** The root, or the sub-agent the budget was given to. */
  readonly agent: AgentIdentity;
  /** Spent so far, within the budget's scope. */
  readonly tokens: number;
  readonly cost: number;
  readonly limit: AgentBudget;
}

/** Sent to a sub-agent whose budget is spent: it ends `capped` ("budget"), its sub-agents cancelled. */
export interface BudgetSpentEvent {
  readonly type: 'budget.spent';
}

/** Tokens of every kind in `usage`. */
export function tokensOf(usage: Usage): number {
  return usage.inputTokens + usage.outputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens;
}

/**
 * One sub-agent's subtree, bounded by the budget its parent gave it. Nested budgets each count:
 * an agent's spend counts toward every scope it is in, and the tree's.
 */
export class BudgetScope {
  private tokens = 0;
  private cost = 0;
  private crossed = false;

  constructor(
    /** The sub-agent the budget was given to. */
    readonly owner: AgentIdentity,
    readonly limit: AgentBudget,
    /** The nearest enclosing scope (a budget given to an ancestor), if any. */
    readonly parent: BudgetScope | undefined,
    private readonly ownerActor: AnyActorRef,
    private readonly meter: BudgetMeter,
  ) {}

  /** Whether this scope, or one around it, is spent. */
  get spent(): boolean {
    for (let scope: BudgetScope | undefined = this; scope; scope = scope.parent) if (scope.crossed) return true;
    return false;
  }

  /** @internal Counts a spend of the subtree; the first that reaches the budget ends its owner. */
  add(tokens: number, cost: number): void {
    this.tokens += tokens;
    this.cost += cost;
    if (this.crossed || !reaches(this.limit.tokens, this.tokens, this.limit.cost, this.cost)) return;
    this.crossed = true;
    const crossing: BudgetCrossing = { scope: 'agent', agent: this.owner, tokens: this.tokens, cost: this.cost, limit: this.limit };
    const owner = this.ownerActor;
    // After the transition that reported it: sending from inside one would re-enter the tree.
    queueMicrotask(() => {
      this.meter.announce(crossing);
      owner.send({ type: 'budget.spent' } satisfies BudgetSpentEvent);
    });
  }
}

function reaches(maxTokens: number | undefined, tokens: number, maxCost: number | undefined, cost: number): boolean {
  return (maxTokens !== undefined && tokens >= maxTokens) || (maxCost !== undefined && cost >= maxCost);
}

/**
 * The tree's shared meter (one per root, in the options every sub-agent shares): what each agent
 * spent, the tree's budget and the sub-agents' budgets (`BudgetScope`).
 *
 * The bound it keeps, for the tree and for each sub-agent's budget alike: a model request starts
 * only while the spend so far within the budget's scope is under it. Spend is counted as the
 * stream reports it, so a budget is reached during a response, not only at its end. When the
 * tree's is reached, every running sub-agent is cancelled (its parent receives
 * `[agent 'NAME' was cancelled]`), which aborts the requests they had in flight, at most one per
 * running agent; a session that would go on after that ends `capped` with the reason "budget". The
 * root gets one final request to answer from what it has; after it, the root too ends `capped` if
 * it would go on. When a sub-agent's is reached, that sub-agent ends `capped` ("budget") at once:
 * its own request in flight is aborted, its calls are answered, and its sub-agents are cancelled
 * (aborting theirs); its parent receives `[agent 'NAME' hit the step cap]`.
 */
export class BudgetMeter {
  private tokens = 0;
  private cost = 0;
  private crossed = false;
  private finalTurn = false;
  private root: AnyActorRef | undefined;
  private readonly spend = new Map<string, { agent: AgentIdentity; model: string | undefined; usage: Usage }>();
  private readonly listeners = new Set<(crossing: BudgetCrossing) => void>();

  constructor(private readonly budget: TreeBudget | undefined) {}

  /** The root session, whose sub-agents a crossing cancels. */
  attachRoot(root: AnyActorRef): void {
    this.root = root;
  }

  /** Whether the tree's budget was reached. */
  get spent(): boolean {
    return this.crossed;
  }

  /** What the tree spent, for the notice that says the budget stopped the run (cost: 0 without prices). */
  get totals(): { readonly tokens: number; readonly cost: number } {
    return { tokens: this.tokens, cost: this.cost };
  }

  /** Whether spend can be priced (budgets in US$ need it). */
  get priced(): boolean {
    return this.budget?.price !== undefined;
  }

  /** What each agent spent so far in this process (a resumed agent: with what its journal had committed), in the order they first spent. */
  agents(): AgentSpend[] {
    return [...this.spend.values()].map(({ agent, model, usage }) => ({ agent, model, usage }));
  }

  /** The scope of a sub-agent given `limit` by its parent, inside `parent` (the parent's own scope, if any). */
  scope(owner: AgentIdentity, limit: AgentBudget, parent: BudgetScope | undefined, ownerActor: AnyActorRef): BudgetScope {
    return new BudgetScope(owner, limit, parent, ownerActor, this);
  }

  /**
   * `agent` spent `usage` (what a stream report added). It counts toward the agent's own spend,
   * every budget scope it is in, and the tree.
   */
  charge(agent: AgentIdentity, model: string | undefined, scope: BudgetScope | undefined, usage: Usage): void {
    const entry = this.spend.get(agent.id);
    if (entry) entry.usage = addUsage(entry.usage, usage);
    else this.spend.set(agent.id, { agent, model, usage });
    this.count(scope, usage);
  }

  /**
   * A resumed session: `own` is what its journal committed of its own requests, `delivered` what
   * its finished sub-agents spent. Both count toward its scopes and the tree; `own` is its spend.
   */
  seed(agent: AgentIdentity, model: string | undefined, scope: BudgetScope | undefined, own: Usage, delivered: Usage): void {
    this.spend.set(agent.id, { agent, model, usage: own });
    this.count(scope, addUsage(own, delivered));
  }

  private count(scope: BudgetScope | undefined, usage: Usage): void {
    const tokens = tokensOf(usage);
    if (tokens === 0) return;
    const cost = this.budget?.price ? this.budget.price(usage) : 0;
    for (let s = scope; s; s = s.parent) s.add(tokens, cost);
    this.tokens += tokens;
    this.cost += cost;
    const budget = this.budget;
    if (this.crossed || !budget || !reaches(budget.maxTokens, this.tokens, budget.maxCost, this.cost)) return;
    this.crossed = true;
    const root = this.root;
    const crossing: BudgetCrossing = {
      scope: 'tree',
      agent: (root?.getSnapshot() as { context?: { agent?: AgentIdentity } } | undefined)?.context?.agent ?? {
        name: 'root',
        path: ['root'],
        depth: 0,
        id: 'root',
      },
      tokens: this.tokens,
      cost: this.cost,
      limit: { ...(budget.maxTokens === undefined ? {} : { tokens: budget.maxTokens }), ...(budget.maxCost === undefined ? {} : { cost: budget.maxCost }) },
    };
    // After the transition that reported it: cancelling from inside it would re-enter the tree.
    queueMicrotask(() => {
      this.announce(crossing);
      if (root) cancelSubAgents(root);
    });
  }

  /**
   * Whether a session that would go on must end `capped` ("budget"): a sub-agent once the tree's
   * budget is spent, the root after its final request, and anyone whose sub-agent budget (or an
   * enclosing one) is spent.
   */
  caps(agent: AgentIdentity, scope?: BudgetScope): boolean {
    return (this.crossed && (agent.depth > 0 || this.finalTurn)) || scope?.spent === true;
  }

  /**
   * Whether a request must not start: a sub-agent's, once the tree's budget or one of its scopes
   * is spent (the root's final request is still made).
   */
  blocks(agent: AgentIdentity, scope?: BudgetScope): boolean {
    return (this.crossed && agent.depth > 0) || scope?.spent === true;
  }

  /** A request starts: the root's first one after the budget was spent is its final turn. */
  requestStarting(agent: AgentIdentity): void {
    if (this.crossed && agent.depth === 0) this.finalTurn = true;
  }

  /** Calls `listener` with each budget reached, the tree's or a sub-agent's; returns what unsubscribes. */
  onCrossing(listener: (crossing: BudgetCrossing) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  /** @internal */
  announce(crossing: BudgetCrossing): void {
    for (const listener of this.listeners) listener(crossing);
  }
}

/** Cancels the root's running sub-agents (each cancels its own subtree first). */
function cancelSubAgents(root: AnyActorRef): void {
  const visit = (actor: AnyActorRef): void => {
    for (const child of Object.values((actor.getSnapshot() as { children?: Record<string, AnyActorRef | undefined> }).children ?? {})) {
      if (!child) continue;
      const snapshot = child.getSnapshot() as { status?: string; context?: { agent?: unknown } };
      if (snapshot.context?.agent === undefined)
        visit(child); // a crew: its members are the sub-agents
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
    if (value !== undefined && (typeof value !== 'number' || !Number.isFinite(value) || value <= 0))
      throw new RangeError(`exarch: budget.${key} must be a positive number, got ${String(value)}`);
  }
  if (budget.maxCost !== undefined && typeof budget.price !== 'function')
    throw new TypeError('exarch: budget.maxCost needs budget.price, the cost in US$ of a response’s usage');
  if (budget.price !== undefined && typeof budget.price !== 'function') throw new TypeError('exarch: budget.price must be a function of a response’s usage');
  return budget;
}

/** Checks a sub-agent budget given by a host (`subtreeBudget`); throws one line for a bad one. */
export function checkAgentBudget(budget: AgentBudget | undefined): AgentBudget | undefined {
  if (budget === undefined) return undefined;
  const { tokens, cost } = budget;
  if (tokens === undefined && cost === undefined) throw new RangeError('exarch: a sub-agent budget needs tokens, cost or both');
  if (tokens !== undefined && (!Number.isSafeInteger(tokens) || tokens <= 0))
    throw new RangeError(`exarch: budget.tokens must be a positive integer, got ${String(tokens)}`);
  if (cost !== undefined && (typeof cost !== 'number' || !Number.isFinite(cost) || cost <= 0))
    throw new RangeError(`exarch: budget.cost must be a positive number, got ${String(cost)}`);
  return budget;
}
