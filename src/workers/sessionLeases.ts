import type { JobStore, SessionLease } from '../store/jobStore.js';

/**
 * The leases of the sessions a worker's jobs hold, renewed together: every third of the lease,
 * one statement renews them all, of every run (a timer and a statement per session cost the
 * server more than the work once a worker holds thousands). A session held is renewed within a
 * third of its lease of its claim, as a timer of its own would; one let go is renewed no more.
 * What the renewal answers (leases no longer held) is not acted on, as when each job renewed its own.
 */
export class SessionLeases {
  private readonly held = new Map<string, SessionLease>();
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: Pick<JobStore, 'renewSessions'>,
    private readonly leaseMs: number,
  ) {}

  /** Keeps the lease of `session` that the job with `token` claimed, until the function returned is called. */
  hold(runId: string, session: string, token: string): () => void {
    this.held.set(token, { runId, session, token });
    if (!this.timer) {
      this.timer = setInterval(() => this.renew(), Math.max(1, Math.floor(this.leaseMs / 3)));
      this.timer.unref();
    }
    return () => {
      this.held.delete(token);
      if (this.held.size > 0) return;
      clearInterval(this.timer);
      this.timer = undefined;
    };
  }

  private renew(): void {
    void this.store.renewSessions([...this.held.values()], this.leaseMs).catch(() => undefined);
  }
}
