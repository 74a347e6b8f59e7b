import type { AgentIdentity, AgentResult, Message, ToolSpec } from './types.js';
import type { Admission } from './admission.js';
import type { BudgetScope } from './budget.js';
import type { BudgetMeter, BudgetWaiter } from './budgetMeter.js';
import { byteLength, RequestSizer } from './requestSize.js';

/**
 * One session's way to its budgets: the admission of its next model request (`BudgetMeter.admit`),
 * and its place in the meter's queue while it waits for room (the session is then `queued`). The
 * session machine asks it as a request is about to leave; its effects release what it admitted
 * when the request ends.
 */
export class RequestAdmitter {
  private sizer: RequestSizer | undefined;
  private waiter: BudgetWaiter | undefined;
  /** Room the meter took for its next request (at once, or while it was queued), until that request takes it. */
  private granted: Admission | undefined;
  /** The results waiting for it, measured so far (they are appended in place: see `inboxBytes`). */
  private inboxSeen: { list: readonly AgentResult[]; counted: number; bytes: number } | undefined;

  constructor(
    private readonly meter: BudgetMeter,
    private readonly agent: AgentIdentity,
    private readonly scope: BudgetScope | undefined,
    private readonly model: string | undefined,
    private readonly system: string,
    private readonly tools: readonly ToolSpec[],
  ) {}

  /**
   * Asks room for a request with `messages` as its history: `'admitted'` (the request takes it with
   * `take`; room handed over while it was queued counts), `'wait'` (call `wait`), or `'spent'` (it
   * never can have any: see `BudgetMeter.admit`).
   */
  ask(messages: readonly Message[]): 'admitted' | 'wait' | 'spent' {
    if (this.granted) return 'admitted';
    const answer = this.meter.admit(this.agent, this.scope, this.model, () => this.bytes(messages));
    if (typeof answer === 'string') return answer;
    this.granted = answer;
    return 'admitted';
  }

  /** The room granted for the request about to leave (undefined: none was). */
  take(): Admission | undefined {
    const granted = this.granted;
    this.granted = undefined;
    return granted;
  }

  /**
   * Waits in the meter's queue: `room` is called when the meter took room for it (granted: the next
   * `ask` says `'admitted'`), `refused` when it never can have any.
   */
  wait(messages: readonly Message[], room: () => void, refused: () => void): void {
    const waiter: BudgetWaiter = {
      agent: this.agent,
      scope: this.scope,
      admitted: (admission) => {
        // It left the queue (cancelled, stopped) before the meter's word came: the room goes back.
        if (this.waiter !== waiter) {
          admission.release();
          return;
        }
        this.waiter = undefined;
        this.granted = admission;
        room();
      },
      refused: () => {
        if (this.waiter !== waiter) return;
        this.waiter = undefined;
        refused();
      },
    };
    this.waiter = waiter;
    this.meter.wait(waiter, this.model, this.bytes(messages));
  }

  /**
   * It stops waiting: out of the queue, and room granted and never used is given back (a queued
   * session cancelled, ended by its budget, or stopped). With `keepRoom`, granted room stays for
   * the request it goes on to make.
   */
  leave(keepRoom = false): void {
    if (this.waiter) this.meter.leave(this.waiter);
    this.waiter = undefined;
    if (keepRoom) return;
    this.granted?.release();
    this.granted = undefined;
  }

  /** The bytes of a request with `messages` as its history and `extra` bytes still to join it. */
  bytes(messages: readonly Message[], extra = 0): number {
    this.sizer ??= new RequestSizer(this.system, this.tools);
    return this.sizer.bytes(messages, extra);
  }

  /**
   * The bytes of the next request of a session at rest with `messages`, `inbox` results and
   * `pending` user messages waiting: what the tree keeps room for when this is the root.
   */
  nextRequestBytes(messages: readonly Message[], inbox: readonly AgentResult[], pending: readonly string[]): number {
    let extra = this.inboxBytes(inbox);
    for (const text of pending) extra += byteLength(text);
    return this.bytes(messages, extra);
  }

  /** The inbox is appended in place and emptied by a new array: each result is measured once. */
  private inboxBytes(inbox: readonly AgentResult[]): number {
    let seen = this.inboxSeen;
    if (!seen || seen.list !== inbox || seen.counted > inbox.length) seen = this.inboxSeen = { list: inbox, counted: 0, bytes: 0 };
    for (; seen.counted < inbox.length; seen.counted++) {
      const result = inbox[seen.counted];
      // The rendered tag and reason around the text (see renderInbox), counted generously.
      if (result) seen.bytes += byteLength(result.text) + byteLength(result.name) + byteLength(result.reason ?? '') + 64;
    }
    return seen.bytes;
  }
}
