import type { JournalRecord } from '../engine/log/journalRecord.js';
import type { RemoteChild, RemoteChildSpec } from '../engine/remoteChildren.js';
import type { AgentResult } from '../engine/types.js';
import type { JobStore } from '../store/jobStore.js';

/** How often a worker looks for results of, and cancels of, the sessions it waits on or runs. */
const WATCH_MS = 200;

/**
 * The worker's eyes on the store for its sessions: the results of the sub-agents they wait on
 * (each `outcome` record of one), and the cancels asked of them. Polled: a fifth of a second is
 * soon enough next to a model's seconds, one statement of each kind covers every session of every
 * run (not one per run: a worker may hold hundreds of runs' sessions), and a server restart needs
 * no re-subscribing.
 */
export class RemoteWatch {
  private readonly children = new Map<string, Map<string, (outcome: Extract<JournalRecord, { type: 'outcome' }>) => void>>();
  private readonly steered = new Map<string, Map<string, SteeringWatch>>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly store: JobStore) {}

  /** Waits for `child`'s result (a stand-in for it in its parent's crew). */
  child(runId: string, spec: RemoteChildSpec, signal: AbortSignal, cancel: (reason: string) => Promise<void>): RemoteChild {
    const id = spec.agent.id;
    const result = new Promise<AgentResult>((resolve) => {
      let waiting = this.children.get(runId);
      if (!waiting) this.children.set(runId, (waiting = new Map()));
      waiting.set(id, (outcome) => resolve(resultOf(spec.agent.name, outcome)));
      signal.addEventListener('abort', () => this.children.get(runId)?.delete(id), { once: true });
    });
    this.arm();
    return {
      result,
      cancel: (reason) => {
        void cancel(reason).catch(() => undefined);
      },
    };
  }

  /**
   * While `signal` is not aborted: calls `onCancel` once if a cancel is asked of `session`, and
   * `onMessages` with the seq of the last message sent to it from elsewhere whenever that grows.
   */
  steering(runId: string, session: string, signal: AbortSignal, watch: Omit<SteeringWatch, 'messageSeq' | 'cancelled'>): void {
    let watched = this.steered.get(runId);
    if (!watched) this.steered.set(runId, (watched = new Map()));
    watched.set(session, { ...watch, messageSeq: 0, cancelled: new Set() });
    signal.addEventListener('abort', () => this.steered.get(runId)?.delete(session), { once: true });
    this.arm();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private arm(): void {
    if (this.timer || this.stopped) return;
    // The first look at once: a cancel asked before the session started, a result already there.
    this.timer = setTimeout(() => void this.poll(), 0);
  }

  private async poll(): Promise<void> {
    try {
      for (const [runId, waiting] of this.children) if (waiting.size === 0) this.children.delete(runId);
      for (const [runId, watched] of this.steered) if (watched.size === 0) this.steered.delete(runId);
      // One statement of each kind for every run: a worker holds hundreds of runs' sessions.
      const waited = [...this.children].flatMap(([runId, waiting]) => [...waiting.keys()].map((session) => ({ runId, session })));
      const watched = [...this.steered].flatMap(([runId, ofRun]) => [...ofRun].map(([session, watch]) => ({ runId, session, subtree: watch.subtree })));
      const [outcomes, signals] = await Promise.all([this.store.outcomes(waited), this.store.sessionSignals(watched)]);
      for (const { runId, session, record } of outcomes) {
        const waiting = this.children.get(runId);
        const resolve = waiting?.get(session);
        if (!resolve || record.type !== 'outcome') continue;
        waiting?.delete(session);
        resolve(record);
      }
      for (const { runId, session, cancel, messageSeq } of signals) {
        const ofRun = this.steered.get(runId);
        if (!ofRun) continue;
        // The session's own watch, or that of the job that keeps its subtree.
        const top = ofRun.has(session) ? session : [...ofRun].find(([root, watch]) => watch.subtree && session.startsWith(`${root}/`))?.[0];
        const watch = top === undefined ? undefined : ofRun.get(top);
        if (!watch) continue;
        if (session === top && messageSeq !== undefined && messageSeq > watch.messageSeq) {
          watch.messageSeq = messageSeq;
          watch.onMessages(messageSeq);
        }
        if (cancel !== undefined && !watch.cancelled.has(session)) {
          watch.cancelled.add(session);
          watch.onCancel(cancel, session);
        }
      }
    } catch {
      // Looked at again at the next poll.
    }
    this.timer = undefined;
    if (!this.stopped && (this.children.size > 0 || this.steered.size > 0)) this.timer = setTimeout(() => void this.poll(), WATCH_MS);
  }
}

/** What a running session is told of what was asked of it from elsewhere. */
interface SteeringWatch {
  /** Also the sessions below it: a subtree kept in its job (a budget). */
  readonly subtree: boolean;
  /** A cancel asked of `session` (the watched one, or one of its subtree). */
  onCancel(reason: string, session: string): void;
  onMessages(upTo: number): void;
  messageSeq: number;
  readonly cancelled: Set<string>;
}

/** A sub-agent's result from its `outcome` record, as its session's `done` output has it. */
function resultOf(name: string, outcome: Extract<JournalRecord, { type: 'outcome' }>): AgentResult {
  return {
    name,
    outcome: outcome.outcome,
    text: outcome.text,
    ...(outcome.reason === undefined ? {} : { reason: outcome.reason }),
    ...('value' in outcome ? { value: outcome.value } : {}),
    usage: outcome.totalUsage,
  };
}
