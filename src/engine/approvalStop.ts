import type { AnyActorRef } from 'xstate';
import { blockedOnApprovals, type ApprovalRequest, type ApprovalRoot } from './approvals.js';

/** What an `ApprovalStop` needs of a run: its root, and a way to stop it as `waiting`. */
export interface SuspendableRun {
  readonly actor: AnyActorRef & ApprovalRoot;
  /** Stops the run to wait for approvals (`DurableRun.suspend`). */
  suspend(): void;
}

/**
 * Stops a run once nothing in it can move until a person answers (`blockedOnApprovals`), for a
 * host with no one to ask: a worker, or the CLI without a terminal. The rest of the tree finishes
 * what it can first. Checked at most once per turn of the event loop, and only while a call
 * waits: pass `inspect` as the root actor's inspect option (it sees every state change), and
 * `watch` the run once it exists.
 *
 * @example
 * ```ts
 * const stop = new ApprovalStop();
 * const run = await resumeRun(id, session, { store, actor: { inspect: stop.inspect } });
 * stop.watch(run);
 * const { status } = await run.result; // 'waiting' when it stopped for approvals
 * stop.close();
 * ```
 */
export class ApprovalStop {
  /** The calls the run was waiting on when it was stopped (empty if it was not). */
  readonly waiting: ApprovalRequest[] = [];
  private run: SuspendableRun | undefined;
  private scheduled: NodeJS.Immediate | undefined;
  private stopped = false;

  /** Pass as the root actor's `inspect` option (or call from it), and from `onApprovalRequest`. */
  readonly inspect = (): void => {
    const { run } = this;
    if (!run || this.stopped || this.scheduled !== undefined) return;
    if (run.actor.getSnapshot().context.options.approvals.waiting().length > 0) this.scheduled = setImmediate(this.check);
  };

  /** Starts watching `run`. */
  watch(run: SuspendableRun): void {
    this.run = run;
    this.inspect();
  }

  /** Stops watching (the run ended, or a person took over). */
  close(): void {
    this.stopped = true;
    if (this.scheduled) clearImmediate(this.scheduled);
    this.scheduled = undefined;
  }

  private readonly check = (): void => {
    this.scheduled = undefined;
    const { run } = this;
    if (!run || this.stopped || !blockedOnApprovals(run.actor)) return;
    this.stopped = true;
    this.waiting.push(...run.actor.getSnapshot().context.options.approvals.waiting());
    run.suspend();
  };
}
