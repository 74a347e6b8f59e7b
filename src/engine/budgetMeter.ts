import type { AnyActorRef } from 'xstate';
import type { AgentIdentity, Usage } from './types.js';
import { addUsage } from './usage.js';
import { Admission, FREE, reaches, roomIn, type AdmissionOwner, type Held, type Room } from './admission.js';
import { BudgetScope, tokensOf, type AgentBudget, type AgentSpend, type BudgetCrossing, type CrossingAnnouncer, type TreeBudget } from './budget.js';

/** A session waiting for room to make its request (see `BudgetMeter.admit`). */
export interface BudgetWaiter {
  readonly agent: AgentIdentity;
  readonly scope: BudgetScope | undefined;
  /** Called once, with the room the meter took for it, when its turn comes. */
  readonly admitted: (admission: Admission) => void;
  /** Called instead when it never can be admitted: it must end `capped` (budget). */
  readonly refused: () => void;
}

/** What a request of `bytes` bytes for `model` is estimated to take: see `BudgetMeter.admit`. */
interface Estimate {
  readonly tokens: number;
  readonly cost: number;
  readonly bytes: number;
  readonly model: string | undefined;
}

/**
 * Tokens a byte of request is taken to be before any response of the model has said: more than
 * any tokenizer makes of text (English runs about a quarter), plus what the API adds around tools.
 */
const UNKNOWN_TOKENS_PER_BYTE = 0.5;
const UNKNOWN_OVERHEAD_TOKENS = 512;
/** Once responses have said, the most tokens per byte seen for the model, with this margin. */
const KNOWN_MARGIN = 1.25;

/**
 * The tree's shared meter (one per root, in the options every sub-agent shares): what each agent
 * spent, the tree's budget and the sub-agents' budgets (`BudgetScope`).
 *
 * The bound it keeps, for the tree and for each sub-agent's budget alike: a model request leaves
 * only when the budget admits it (`admit`: its estimate fits beside the spend and the requests
 * running, or none runs and the spend is under the budget); one that must wait is queued, and the
 * queue is admitted in order as running requests end. Spend is counted as the stream reports it,
 * so a budget is reached during a response, not only at its end. The tree's budget keeps room for
 * the root's next request; when the spend reaches that line, every running or queued sub-agent is
 * cancelled (its parent receives `[agent 'NAME' was cancelled]`), which aborts the requests they
 * had in flight, at most one per running agent; a session that would go on after that ends
 * `capped` with the reason "budget". The root gets one final request to answer from what it has
 * when the budget still admits it; after it, or without it, the root too ends `capped` if it would
 * go on. When a sub-agent's is reached, that sub-agent ends `capped` ("budget") at once: its own
 * request in flight is aborted, its calls are answered, and its sub-agents are cancelled (aborting
 * theirs); its parent receives `[agent 'NAME' hit the step cap]`.
 */
export class BudgetMeter implements AdmissionOwner, CrossingAnnouncer {
  private tokens = 0;
  private cost = 0;
  private crossed = false;
  private finalTurn = false;
  private root: AnyActorRef | undefined;
  private readonly spend = new Map<string, { agent: AgentIdentity; model: string | undefined; usage: Usage }>();
  private readonly listeners = new Set<(crossing: BudgetCrossing) => void>();
  /** What the running requests admitted within the tree's budget hold. */
  private readonly held: Held = { tokens: 0, cost: 0, requests: 0 };
  /** Sessions waiting for room, in the order they asked, and the request each asked for. */
  private readonly waiting: BudgetWaiter[] = [];
  private readonly estimates = new WeakMap<BudgetWaiter, Estimate>();
  /** Tokens per byte of request, by model, the most any kept response has shown. */
  private readonly ratios = new Map<string | undefined, number>();
  /** The root's next request, in bytes, as it would leave now (its history and the results waiting for it). */
  private rootBytes: (() => number) | undefined;
  /** The model the root's requests ask for (a sub-agent's profile may name another). */
  private rootModel: string | undefined;

  constructor(private readonly budget: TreeBudget | undefined) {}

  /**
   * The root session, whose sub-agents a crossing cancels. `nextRequestBytes` sizes its next
   * request: the tree's budget keeps room for it (see `admit`), so that the root can still answer.
   */
  attachRoot(root: AnyActorRef, nextRequestBytes?: () => number, model?: string): void {
    this.root = root;
    this.rootBytes = nextRequestBytes;
    this.rootModel = model;
  }

  /** Whether the tree has a bound (a `price` alone bounds nothing). */
  private get bounded(): boolean {
    return this.budget?.maxTokens !== undefined || this.budget?.maxCost !== undefined;
  }

  /**
   * Asks room for `agent`'s next model request before it leaves. Its size is `bytes()`, measured
   * only when a budget bounds it; its tokens are estimated from that to err high (half a token a
   * byte plus 512, until a response of the model has shown how many tokens a byte of its requests
   * is: then the most seen, with a quarter more). The request is admitted within every budget it
   * spends within — the sub-agent budgets around it (`scope`) and the tree's — when it fits beside
   * the spend and the requests running there, or when none runs there and the spend is under the
   * budget (see `roomIn`). The tree's budget keeps room for the root's next request: a sub-agent's
   * request must fit under the budget less that (the root's own requests have the whole budget).
   *
   * Returns the room taken (`Admission`: release it when the request ends); `'wait'` when a running
   * request holds what it needs (call `wait`: it is admitted in its turn, in the order asked); or
   * `'spent'` when it never can be (it must end `capped`, budget).
   */
  admit(agent: AgentIdentity, scope: BudgetScope | undefined, model: string | undefined, bytes: () => number): Admission | 'wait' | 'spent' {
    // The line may have been passed without a spend since (the root's next request grew as results
    // came in, or the root's model first showed its tokens per byte): this request is past it.
    if (this.bounded && !this.crossed) {
      const line = this.line(true);
      if (reaches(line.tokens, this.tokens, line.cost, this.cost)) this.cross();
    }
    if (this.blocks(agent, scope)) return 'spent';
    if (!this.bounded && !boundedScope(scope)) return FREE;
    const estimate = this.estimate(model, bytes());
    const room = this.roomFor(agent, scope, estimate);
    // Sessions that asked first go first: a request that fits waits behind them (a large one would
    // otherwise wait for ever while smaller ones keep taking the room it needs).
    if (room === 'yes' && this.waiting.length > 0) return 'wait';
    if (room === 'yes') return this.take(scope, estimate);
    if (room === 'never') {
      this.reachedAtAdmission(agent, estimate);
      return 'spent';
    }
    return 'wait';
  }

  /**
   * `waiter` asked for a request of `bytes` (`admit` said `'wait'`): it is admitted in its turn,
   * refused if it never can be, or stays until it `leave`s.
   */
  wait(waiter: BudgetWaiter, model: string | undefined, bytes: number): void {
    this.waiting.push(waiter);
    this.estimates.set(waiter, this.estimate(model, bytes));
    this.pump();
  }

  /** `waiter` no longer waits (it was cancelled or ended): it is not admitted after this. */
  leave(waiter: BudgetWaiter): void {
    const at = this.waiting.indexOf(waiter);
    if (at < 0) return;
    this.waiting.splice(at, 1);
    this.estimates.delete(waiter);
    // The head left: the next may go.
    if (at === 0) this.pump();
  }

  /** @internal An admitted request ended. */
  released(admission: Admission, kept: Usage | undefined): void {
    if (kept && admission.bytes > 0) {
      const input = kept.inputTokens + kept.cacheCreationInputTokens + kept.cacheReadInputTokens;
      const ratio = input / admission.bytes;
      if (ratio > (this.ratios.get(admission.model) ?? -1)) this.ratios.set(admission.model, ratio);
    }
    this.pump();
  }

  /** Admits waiting sessions in the order they asked, while the first of them has room. */
  private pump(): void {
    while (this.waiting.length > 0) {
      const head = this.waiting[0] as BudgetWaiter;
      const estimate = this.estimates.get(head) as Estimate;
      if (this.blocks(head.agent, head.scope)) return; // a crossing is on its way to it
      const room = this.roomFor(head.agent, head.scope, estimate);
      if (room === 'wait') return;
      if (room === 'never' && head.agent.depth > 0) {
        // Nothing runs that could make room: the tree's budget is reached, and the crossing cancels
        // the waiting sub-agents with the running ones (a cancel, which an interrupted run's resume
        // undoes, rather than an end of their own).
        this.reachedAtAdmission(head.agent, estimate);
        return;
      }
      this.waiting.shift();
      this.estimates.delete(head);
      // Told after the transition that made room (a pump runs inside another session's, as it ends
      // or leaves the queue): a session cancelled in the same cascade, an interrupt's, has left by
      // then and gives the room back at once (see RequestAdmitter).
      if (room === 'yes') {
        const admission = this.take(head.scope, estimate);
        queueMicrotask(() => head.admitted(admission));
      }
      // The root: the budget has no room for its request, and none will come.
      else queueMicrotask(() => head.refused());
    }
  }

  private estimate(model: string | undefined, bytes: number): Estimate {
    const ratio = this.ratios.get(model);
    const tokens = ratio === undefined ? Math.ceil(bytes * UNKNOWN_TOKENS_PER_BYTE) + UNKNOWN_OVERHEAD_TOKENS : Math.ceil(bytes * ratio * KNOWN_MARGIN);
    const cost = this.budget?.price
      ? this.budget.price({ inputTokens: tokens, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 }, model)
      : 0;
    return { tokens, cost, bytes, model };
  }

  /** The tree's room for `agent` (less the root's next request for a sub-agent), then each scope's. */
  private roomFor(agent: AgentIdentity, scope: BudgetScope | undefined, estimate: Estimate): Room {
    let room: Room = 'yes';
    for (let s = scope; s; s = s.parent) {
      const r = s.room(estimate.tokens, estimate.cost);
      if (r === 'never') return 'never';
      if (r === 'wait') room = 'wait';
    }
    if (!this.bounded) return room;
    const r = this.treeRoom(agent, estimate);
    return r === 'never' ? 'never' : r === 'wait' ? 'wait' : room;
  }

  private treeRoom(agent: AgentIdentity, estimate: Estimate): Room {
    const line = this.line(agent.depth > 0);
    return roomIn(this.held, this.tokens, this.cost, line.tokens, line.cost, estimate.tokens, estimate.cost);
  }

  /** The tree's bound: the whole budget for the root, less the root's next request for a sub-agent. */
  private line(subAgent: boolean): { tokens: number | undefined; cost: number | undefined } {
    const maxTokens = this.budget?.maxTokens;
    const maxCost = this.budget?.maxCost;
    // Kept once a response of the root's model has shown its tokens per byte: an estimate made
    // before that errs high enough to stop a tree before its root's first response is in.
    if (!subAgent || !this.rootBytes || !this.ratios.has(this.rootModel)) return { tokens: maxTokens, cost: maxCost };
    const reserve = this.estimate(this.rootModel, this.rootBytes());
    return { tokens: maxTokens === undefined ? undefined : maxTokens - reserve.tokens, cost: maxCost === undefined ? undefined : maxCost - reserve.cost };
  }

  private take(scope: BudgetScope | undefined, estimate: Estimate): Admission {
    const levels: Held[] = [];
    for (let s = scope; s; s = s.parent) levels.push(s.held);
    if (this.bounded) levels.push(this.held);
    for (const held of levels) {
      held.tokens += estimate.tokens;
      held.cost += estimate.cost;
      held.requests += 1;
    }
    return new Admission(this, levels, estimate.tokens, estimate.cost, estimate.bytes, estimate.model);
  }

  /**
   * A request can never be admitted: nothing runs that could make room. Within the tree's budget
   * that is the budget reached, as a spend reaching it would be. (Within a sub-agent's, the spend
   * that reached it ended the scope's owner already.)
   */
  private reachedAtAdmission(agent: AgentIdentity, estimate: Estimate): void {
    if (this.bounded && this.treeRoom(agent, estimate) === 'never') this.cross();
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
    this.count(scope, usage, model);
  }

  /**
   * A resumed session: `own` is what its journal committed of its own requests, `delivered` what
   * its finished sub-agents spent. Both count toward its scopes and the tree; `own` is its spend.
   */
  seed(agent: AgentIdentity, model: string | undefined, scope: BudgetScope | undefined, own: Usage, delivered: Usage): void {
    this.spend.set(agent.id, { agent, model, usage: own });
    this.count(scope, own, model);
    // What finished sub-agents spent comes as one total whatever their models: priced at this agent's.
    this.count(scope, delivered, model);
  }

  private count(scope: BudgetScope | undefined, usage: Usage, model: string | undefined): void {
    const tokens = tokensOf(usage);
    if (tokens === 0) return;
    const cost = this.budget?.price ? this.budget.price(usage, model) : 0;
    for (let s = scope; s; s = s.parent) s.add(tokens, cost);
    this.tokens += tokens;
    this.cost += cost;
    if (this.crossed || !this.bounded) return;
    // Reached when the spend reaches the budget, or the line past which no sub-agent may start a
    // request (the room kept for the root's next one: see `admit`).
    const line = this.line(true);
    if (reaches(line.tokens, this.tokens, line.cost, this.cost)) this.cross();
  }

  /** The tree's budget is reached: every running sub-agent is cancelled; the root has its final turn. */
  private cross(): void {
    if (this.crossed || !this.budget) return;
    const budget = this.budget;
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
      // The root may be waiting for room its sub-agents held: their requests end with them.
      this.pump();
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

/** Whether `scope`, or one around it, bounds what is spent within it. */
function boundedScope(scope: BudgetScope | undefined): boolean {
  for (let s = scope; s; s = s.parent) if (s.limit.tokens !== undefined || s.limit.cost !== undefined) return true;
  return false;
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
