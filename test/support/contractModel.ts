/**
 * The session's transitions as CONTRACT.md states them (§1 states, §3 reply and reminder, §5 stop
 * reasons, §6 step cap and cancellation) and as issue 15 adds `wait_for_agents` and its waiting
 * state, written from the text alone: nothing here imports
 * `machines/` or `src/`, so a changed guard or a miscounted step in the machine makes the two
 * disagree instead of moving both sides of the comparison.
 *
 * It is a model of what a session does with each event the outside world (the model, tools,
 * children, the user) can send it, over a small abstract state that it keeps itself: the number
 * of requests in the current turn, the one-shot reply reminder, the per-turn truncation budget,
 * live children, inbox and queued user messages, and the open batch.
 */

type ContractValue =
  | 'starting'
  | 'readyForUser'
  | 'streaming'
  | 'queued'
  | 'dispatchingBatch'
  | 'awaitingApproval'
  | 'waitingForAgents'
  | 'nudged'
  | 'replied'
  | 'finishedWithoutReply'
  | 'capped'
  | 'failed'
  | 'cancelled';

export interface ContractLimits {
  /** §6: model requests per turn. */
  readonly maxSteps: number;
  /** §5: truncation reminders per turn. */
  readonly truncationBudget: number;
  /** Issue 17: which host tool calls wait for a person (by their input). None without it. */
  readonly approve?: (input: unknown) => boolean;
}

export interface ContractState {
  readonly kind: 'root' | 'sub';
  readonly value: ContractValue;
  /** Model requests made in this turn, nudged continuations and pause_turn continuations included (§6). */
  readonly steps: number;
  /** §3: the reply reminder fires at most once. */
  readonly reminded: boolean;
  /** §5: truncation reminders used in this turn. */
  readonly truncations: number;
  readonly kids: number;
  readonly inbox: number;
  readonly queuedUser: number;
  readonly batch: {
    readonly pending: number;
    readonly reply: 'none' | 'content' | 'empty';
    readonly truncated: boolean;
    /** A `wait_for_agents` call (the first of the response) that has to wait: children were running. */
    readonly wait: 'all' | 'any' | null;
    /** Issue 17: host tool calls still waiting for a person's answer. */
    readonly awaiting: number;
  } | null;
  /** For `replied`: whether the payload rendered to nothing (§3: outcome empty). */
  readonly outcome?: 'replied' | 'empty';
}

/** The events as they reach a session (the names the machine receives; their meaning from the contract). */
export type ContractEvent =
  | { readonly type: 'user.message' }
  | { readonly type: 'cancel' }
  /** Issue 17: the budget a sub-agent spends within is reached. */
  | { readonly type: 'budget.spent' }
  /** Issue 37: the budget has no room for the request about to leave; later it has. */
  | { readonly type: 'budget.wait' }
  | { readonly type: 'budget.room' }
  | { readonly type: 'tick' }
  | { readonly type: 'tool.settled' }
  | { readonly type: 'batch.drained' }
  | { readonly type: 'model.error' }
  | { readonly type: 'model.starting' }
  | { readonly type: 'child.finished' }
  /** Issue 17: a person answers one waiting call. */
  | { readonly type: 'approval.answer'; readonly decision: 'approve' | 'deny' }
  | { readonly type: 'model.done'; readonly response: ContractResponse };

/** A complete model response as the contract sees it. */
interface ContractResponse {
  readonly stopReason: string;
  readonly calls: readonly { readonly id: string; readonly name: string; readonly input: unknown }[];
  /** Calls whose input was cut off at max_tokens: never executed (§5). */
  readonly cutOff: readonly string[];
}

const FINAL: ReadonlySet<ContractValue> = new Set(['replied', 'finishedWithoutReply', 'capped', 'failed', 'cancelled']);

export function initialContractState(kind: 'root' | 'sub'): ContractState {
  // A sub-agent's task is its first user message (§2): it is queued when the session starts, which
  // rests in `starting` until its first turn (a root without a task waits in readyForUser).
  return {
    kind,
    value: kind === 'sub' ? 'starting' : 'readyForUser',
    steps: 0,
    reminded: false,
    truncations: 0,
    kids: 0,
    inbox: 0,
    queuedUser: kind === 'sub' ? 1 : 0,
    batch: null,
  };
}

export function isFinal(state: ContractState): boolean {
  return FINAL.has(state.value);
}

/** §3: a missing, null or empty-string result renders to nothing. */
function payloadIsEmpty(input: unknown): boolean {
  if (typeof input !== 'object' || input === null || !('result' in input)) return true;
  const result = (input as { result: unknown }).result;
  return result === undefined || result === null || result === '';
}

/** `s` moved to `value`. */
function go(s: ContractState, value: ContractValue, changes: Partial<ContractState> = {}): ContractState {
  return { ...s, ...changes, value };
}

/** §6: about to make another request in this turn (or to nudge): made, or `capped` when the cap is reached. */
function goOn(s: ContractState, into: 'streaming' | 'nudged', limits: ContractLimits, changes: Partial<ContractState> = {}): ContractState {
  if (s.steps >= limits.maxSteps) return go(s, 'capped', { ...changes, batch: null });
  return into === 'streaming' ? go(s, 'streaming', { ...changes, batch: null, steps: s.steps + 1 }) : go(s, 'nudged', { ...changes, batch: null });
}

/** §5 max_tokens: a truncation reminder from the per-turn budget, or failure when it is spent. */
function truncated(s: ContractState, limits: ContractLimits): ContractState {
  return s.truncations < limits.truncationBudget ? goOn(s, 'nudged', limits, { truncations: s.truncations + 1 }) : go(s, 'failed', { batch: null });
}

/** Issue 15: a wait ends when every child has delivered ('all') or one has ('any'). */
function waitHolds(wait: 'all' | 'any' | null, kids: number, inbox: number): boolean {
  return wait === null || kids === 0 || (wait === 'any' && inbox > 0);
}

/** After a batch (drained, and any wait over): the truncation reminder, or the next request. A wait's inbox rides along with the results. */
function afterBatch(s: ContractState, limits: ContractLimits): ContractState {
  const batch = s.batch;
  // Issue 17: messages sent to a sub-agent while it worked ride along too (the root's wait for its turn's end).
  const base = { ...s, ...(batch?.wait ? { inbox: 0 } : {}), ...(s.kind === 'sub' ? { queuedUser: 0 } : {}) };
  return batch?.truncated ? truncated(base, limits) : goOn(base, 'streaming', limits);
}

/** The next state per the contract, or the same state when the event changes nothing it models. */
export function contractStep(s: ContractState, event: ContractEvent, limits: ContractLimits): ContractState {
  if (isFinal(s)) return s;
  switch (event.type) {
    case 'cancel':
      // §6: cancelling a session ends it, whatever it was doing.
      return go(s, 'cancelled', { batch: null });
    case 'budget.spent':
      // Issue 17 (docs/protocol.md §9): a sub-agent whose budget is reached ends capped at once, whatever it was doing.
      return go(s, 'capped', { batch: null, kids: 0 });
    case 'budget.wait':
      // Issue 37: a budget admits a request before it leaves; one it has no room for waits, queued,
      // and was never made: it is not one of the turn's requests (§6).
      return s.value === 'streaming' ? go(s, 'queued', { steps: s.steps - 1 }) : s;
    case 'budget.room':
      // Issue 37: admitted, the request leaves: one more of the turn's requests.
      return s.value === 'queued' ? go(s, 'streaming', { steps: s.steps + 1 }) : s;
    case 'child.finished': {
      // §3/§4: every child delivers exactly one result into the inbox.
      const next = { ...s, kids: s.kids - 1, inbox: s.inbox + 1 };
      // Issue 15: a waiting session goes on once its wait's condition holds.
      if (s.value === 'waitingForAgents' && s.batch && waitHolds(s.batch.wait, next.kids, next.inbox)) return afterBatch(next, limits);
      return next;
    }
    case 'user.message':
      // The root waits at readyForUser for the user; at any other time the message waits its turn
      // (a sub-agent's: the end of its step's batch, or of its step — issue 17).
      return s.value === 'readyForUser'
        ? go(s, 'streaming', { steps: 1, truncations: 0, inbox: 0, queuedUser: 0, batch: null })
        : { ...s, queuedUser: s.queuedUser + 1 };
    case 'tick':
      if (s.value === 'nudged') {
        // §1: the reminder is appended, then the session streams again: one more request (§6).
        return go(s, 'streaming', { steps: s.steps + 1 });
      }
      if (s.value === 'starting' || (s.value === 'readyForUser' && (s.inbox > 0 || s.queuedUser > 0))) {
        // §4: at the boundary the inbox (and queued user messages) become one turn; a new turn's count starts.
        return go(s, 'streaming', { steps: 1, truncations: 0, inbox: 0, queuedUser: 0 });
      }
      return s;
    case 'model.starting':
      // Issue 15 §2: results that arrived before the turn's first request left join that turn.
      return s.value === 'streaming' && s.steps === 1 && s.inbox > 0 ? { ...s, inbox: 0, queuedUser: 0 } : s;
    case 'approval.answer': {
      // Issue 17: nothing of the batch runs until every waiting call is answered; a denied call is
      // answered (an error result) and never runs, an approved one runs with the rest of the batch.
      if (s.value !== 'awaitingApproval' || !s.batch) return s;
      const batch = { ...s.batch, awaiting: s.batch.awaiting - 1, pending: s.batch.pending - (event.decision === 'deny' ? 1 : 0) };
      return batch.awaiting === 0 ? go(s, 'dispatchingBatch', { batch }) : { ...s, batch };
    }
    case 'model.error':
      // §5: a fault that is not retried (or retries exhausted) fails the session.
      return s.value === 'streaming' ? go(s, 'failed', { batch: null }) : s;
    case 'tool.settled':
      return s.value === 'dispatchingBatch' && s.batch ? { ...s, batch: { ...s.batch, pending: s.batch.pending - 1 } } : s;
    case 'batch.drained': {
      if (s.value !== 'dispatchingBatch' || !s.batch) return s;
      // §3: a staged reply ends a sub-agent after its batch, truncated or not; its children are cancelled.
      if (s.batch.reply !== 'none') return go(s, 'replied', { batch: null, kids: 0, outcome: s.batch.reply === 'empty' ? 'empty' : 'replied' });
      // Issue 15: a wait whose condition does not hold yet ends the step without a request.
      if (!waitHolds(s.batch.wait, s.kids, s.inbox)) return go(s, 'waitingForAgents');
      return afterBatch(s, limits);
    }
    case 'model.done': {
      if (s.value !== 'streaming') return s;
      const r = event.response;
      if (r.stopReason === 'refusal' || r.stopReason === 'model_context_window_exceeded') return go(s, 'failed', { batch: null });
      const complete = r.calls.filter((c) => !r.cutOff.includes(c.id));
      if (r.calls.length > 0) {
        // §2: `reply` only for sub-agents (the root's is refused); the first complete one stands (§3).
        const reply = s.kind === 'sub' ? complete.find((c) => c.name === 'reply') : undefined;
        const spawned = complete.filter((c) => c.name === 'agent').length;
        const runs = complete.filter((c) => !['reply', 'agent', 'cancel_agent', 'wait_for_agents'].includes(c.name)).length;
        // Issue 15: wait_for_agents is offered where `agent` is; with no sub-agent running it answers at once.
        const waitCall = complete.find((c) => c.name === 'wait_for_agents');
        const until =
          waitCall && typeof waitCall.input === 'object' && waitCall.input !== null && (waitCall.input as { until?: unknown }).until === 'any' ? 'any' : 'all';
        const kids = s.kids + spawned;
        const awaiting = complete.filter(
          (c) => !['reply', 'agent', 'cancel_agent', 'wait_for_agents'].includes(c.name) && (limits.approve?.(c.input) ?? false),
        ).length;
        return go(s, awaiting > 0 ? 'awaitingApproval' : 'dispatchingBatch', {
          kids,
          batch: {
            awaiting,
            pending: runs,
            reply: reply === undefined ? 'none' : payloadIsEmpty(reply.input) ? 'empty' : 'content',
            truncated: r.stopReason === 'max_tokens',
            wait: waitCall !== undefined && kids > 0 ? until : null,
          },
        });
      }
      if (r.stopReason === 'max_tokens') return truncated(s, limits);
      if (r.stopReason === 'pause_turn') return goOn(s, 'streaming', limits);
      // end_turn, stop_sequence: the turn ends (§5).
      if (s.kind === 'root') return go(s, 'readyForUser');
      // §3: a sub-agent waits for its children's results like the root; only when quiet is it reminded once, then empty.
      // Issue 17: a message sent to it that waits makes its next turn, as a result would.
      if (s.kids > 0 || s.inbox > 0 || s.queuedUser > 0) return go(s, 'readyForUser');
      if (!s.reminded) return goOn(s, 'nudged', limits, { reminded: true });
      return go(s, 'finishedWithoutReply', { batch: null });
    }
  }
}
