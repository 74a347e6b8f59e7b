import type { Usage } from './types.js';

/**
 * The room a model request takes in the budgets it spends within before it leaves (see
 * `BudgetMeter.admit` in budgetMeter.ts): the rule that admits it, and the `Admission` it holds until it
 * ends.
 */

/** Whether a spend of `tokens` / `cost` has reached a bound of `maxTokens` / `maxCost` (either, where given). */
export function reaches(maxTokens: number | undefined, tokens: number, maxCost: number | undefined, cost: number): boolean {
  return (maxTokens !== undefined && tokens >= maxTokens) || (maxCost !== undefined && cost >= maxCost);
}

/** What an `Admission` tells when it is released (the meter, which admits the next waiting request). */
export interface AdmissionOwner {
  released(admission: Admission, kept: Usage | undefined): void;
}

/** What the requests admitted within a budget hold while they run: their estimates, and how many run. */
export interface Held {
  tokens: number;
  cost: number;
  requests: number;
}

/** A budget's answer to a request: admitted, wait for a running request to end, or never (nothing runs that could make room). */
export type Room = 'yes' | 'wait' | 'never';

/**
 * The admission rule, for the tree and for a sub-agent's budget alike. A request is admitted when
 * its estimate fits beside what is spent and what the running requests hold; or, when no request
 * runs within the budget, while the spend is under it (an estimate that errs high never stops a
 * budget that still has room from being used: the request then overshoots by at most itself).
 */
export function roomIn(
  held: Held,
  spentTokens: number,
  spentCost: number,
  maxTokens: number | undefined,
  maxCost: number | undefined,
  tokens: number,
  cost: number,
): Room {
  if (maxTokens === undefined && maxCost === undefined) return 'yes';
  const fits =
    (maxTokens === undefined || spentTokens + held.tokens + tokens <= maxTokens) && (maxCost === undefined || spentCost + held.cost + cost <= maxCost);
  if (fits) return 'yes';
  if (held.requests > 0) return 'wait';
  return reaches(maxTokens, spentTokens, maxCost, spentCost) ? 'never' : 'yes';
}

/**
 * The room a running request holds within its budgets (its estimated input, in tokens and US$),
 * from the moment it is admitted until it ends. `release` gives it back, once; with the usage of
 * the response that was kept, the meter learns how many tokens a byte of request is.
 */
export class Admission {
  private released = false;

  /** @internal */
  constructor(
    private readonly owner: AdmissionOwner | undefined,
    private readonly levels: readonly Held[],
    /** The estimate held: tokens, US$, and the request's size in bytes. */
    readonly tokens: number,
    readonly cost: number,
    readonly bytes: number,
    readonly model: string | undefined,
  ) {}

  /** The request ended (`kept`: the usage of its response, when one was kept). Idempotent. */
  release(kept?: Usage): void {
    // FREE holds nothing and is shared: releasing it changes nothing, itself included.
    if (this.released || this.owner === undefined) return;
    this.released = true;
    for (const held of this.levels) {
      held.tokens -= this.tokens;
      held.cost -= this.cost;
      held.requests -= 1;
    }
    this.owner.released(this, kept);
  }
}

/** An admission that holds nothing: a request no budget bounds. */
export const FREE = new Admission(undefined, [], 0, 0, 0, undefined);
