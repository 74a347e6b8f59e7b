import type { InspectionEvent } from 'xstate';
import type { DurableRun, DurableSessionInput } from '../run/durableRun.js';
import type { RunRow } from '../store/runStore.js';
import type { RunEventListener } from '../watch/observe/events.js';
import type { SpanDirectory } from '../watch/otel/exporterOptions.js';
import type { SessionJobEnd } from './jobContext.js';
import type { QueuePolicy } from './runQueue.js';

/** What happened to a job, for the host's log (`exarch worker` prints one line each). */
export type WorkerEvent =
  | { readonly type: 'started'; readonly runId: string; readonly resumed: boolean }
  | { readonly type: 'finished'; readonly runId: string; readonly status: string }
  | { readonly type: 'held'; readonly runId: string; readonly detail: string }
  | { readonly type: 'handed-back'; readonly runId: string }
  /** A session of a run whose sessions are jobs of their own: taken, or left (parked to wait for its sub-agents, ended, handed back). */
  | { readonly type: 'session'; readonly runId: string; readonly session: string; readonly what: 'taken' | SessionJobEnd }
  | { readonly type: 'error'; readonly runId: string | undefined; readonly detail: string }
  /** A job whose payload is no run (see `MalformedJobError`): failed once, not offered again. */
  | { readonly type: 'malformed'; readonly job: string; readonly detail: string };

export interface WorkerOptions {
  /** The PostgreSQL URL of the run store and the queue. */
  readonly db: string;
  /** Runs this worker works on at once (default 1). */
  readonly concurrency?: number;
  /**
   * The live half of a run's sessions, rebuilt by the host from the stored run: provider, tools
   * (the same names the run was started with), logs, caps, approvals policy. Called once per run
   * taken; `close` (servers the host started for the run) is called once the run has stopped, or
   * could not start.
   */
  readonly session: (run: RunRow, place: WorkerRunPlace) => WorkerSession | Promise<WorkerSession>;
  /** The run lease (default 30 s): how soon another worker may resume a run this one stopped renewing. */
  readonly leaseMs?: number;
  /** How often an idle worker asks the queue for work (default 1 s, at least 0.5). */
  readonly pollingIntervalSeconds?: number;
  /** The queue's policy, set by this worker (see `QueuePolicy`); expired jobs are looked for every quarter of the expiry. */
  readonly policy?: QueuePolicy;
  readonly onEvent?: (event: WorkerEvent) => void;
  /**
   * What to do with a steering line sent to a run this worker runs (`exarch run --db --steer`:
   * `/cancel root/lead`, …), and the lines to answer with. Without it, lines wait for a worker
   * that has one.
   */
  readonly command?: (line: string, run: DurableRun) => readonly string[];
}

/** What a worker runs a run with. */
export interface WorkerSession {
  readonly input: DurableSessionInput;
  /** The host's own observer of the run's actors, beside the worker's (raw XState inspection, per actor system). */
  readonly inspect?: (event: InspectionEvent) => void;
  /**
   * The run's events as `RunObserver` decodes them (an `OtelRunExporter`'s `onEvent`, say): of
   * every job of the run this worker runs, each job's actors decoded by an observer of its own.
   */
  readonly events?: RunEventListener;
  close?(): Promise<void>;
}

/** What a worker tells the host about where a run's parts run: other workers and jobs keep their spans here. */
export interface WorkerRunPlace {
  /** The run's agent spans, shared with the other workers (pass it as an `OtelRunExporter`'s `directory`). */
  readonly spans: SpanDirectory;
}

export interface Worker {
  /**
   * Stops taking runs and drains: runs in progress get `timeoutMs` (default 30 s) to finish; those
   * still going are then interrupted (their journals say so) and handed back to the queue, where
   * another worker resumes them. Resolves once every run has ended or been handed back.
   */
  stop(options?: { readonly timeoutMs?: number }): Promise<void>;
  /** Runs in progress. */
  readonly active: number;
}
