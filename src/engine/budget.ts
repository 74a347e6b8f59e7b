import type { AnyActorRef } from 'xstate';
import type { AgentIdentity, Usage } from './types.js';
import { reaches, roomIn, type Held, type Room } from './admission.js';

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
  /**
   * The cost in US$ of `usage`, spent by requests for `model` (a declared agent's profile may name
   * one; undefined: the provider's own).
   */
  readonly price?: (usage: Usage, model: string | undefined) => number;
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

/** Raised by a session whose request its budgets have no room for while others run: it becomes `queued`. */
export interface BudgetWaitEvent {
  readonly type: 'budget.wait';
}

/** Sent to a `queued` session: the meter took room for its request (see `BudgetMeter.admit`), which it now makes. */
export interface BudgetRoomEvent {
  readonly type: 'budget.room';
}

/** Tokens of every kind in `usage`. */
export function tokensOf(usage: Usage): number {
  return usage.inputTokens + usage.outputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens;
}

/** Where a scope reports its budget reached: the meter, which tells whoever listens (`BudgetMeter.onCrossing`). */
export interface CrossingAnnouncer {
  announce(crossing: BudgetCrossing): void;
}

/**
 * One sub-agent's subtree, bounded by the budget its parent gave it. Nested budgets each count:
 * an agent's spend counts toward every scope it is in, and the tree's.
 */
export class BudgetScope {
  private tokens = 0;
  private cost = 0;
  private crossed = false;
  /** @internal What the requests admitted within it hold while they run (see `Admission`). */
  readonly held: Held = { tokens: 0, cost: 0, requests: 0 };

  constructor(
    /** The sub-agent the budget was given to. */
    readonly owner: AgentIdentity,
    readonly limit: AgentBudget,
    /** The nearest enclosing scope (a budget given to an ancestor), if any. */
    readonly parent: BudgetScope | undefined,
    private readonly ownerActor: AnyActorRef,
    private readonly meter: CrossingAnnouncer,
  ) {}

  /** Whether this scope, or one around it, is spent. */
  get spent(): boolean {
    for (let scope: BudgetScope | undefined = this; scope; scope = scope.parent) if (scope.crossed) return true;
    return false;
  }

  /** @internal Whether a request of `tokens` (costing `cost`) is admitted within this scope now: see `BudgetMeter.admit`. */
  room(tokens: number, cost: number): Room {
    return roomIn(this.held, this.tokens, this.cost, this.limit.tokens, this.limit.cost, tokens, cost);
  }

  /** @internal Counts a spend of the subtree; the first that reaches the budget ends its owner. */
  add(tokens: number, cost: number): void {
    this.tokens += tokens;
    this.cost += cost;
    if (this.crossed || !reaches(this.limit.tokens, this.tokens, this.limit.cost, this.cost)) return;
    this.crossed = true;
    const crossing: BudgetCrossing = { scope: 'agent', agent: this.owner, tokens: this.tokens, cost: this.cost, limit: this.limit };
    const owner = this.ownerActor;
    // After the transition that reported it: sending from inside one would re-enter the tree. By
    // then the session may have ended (its last response committed): an ended one is told nothing.
    queueMicrotask(() => {
      this.meter.announce(crossing);
      if (owner.getSnapshot().status === 'active') owner.send({ type: 'budget.spent' } satisfies BudgetSpentEvent);
    });
  }
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
