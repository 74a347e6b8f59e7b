import type { InspectionEvent } from 'xstate';
import type { SessionInput } from '../../machines/sessionTypes.js';
import { ExarchError } from '../engine/exarchError.js';
import type { RunRow, RunOwner } from '../store/runStore.js';
import type { JobStore } from '../store/jobStore.js';
import type { RunEventListener } from '../watch/observe/events.js';
import type PgBoss from 'pg-boss';
import type { RemoteWatch } from './remoteWatch.js';
import type { SessionLeases } from './sessionLeases.js';
import type { StoredSpans } from './storedSpans.js';

/** How a session job ended here. */
export type SessionJobEnd = 'ended' | 'parked' | 'handed-back';

/** The live half a worker runs a run's sessions with, made once per run and shared by its sessions here. */
export interface RunSessions {
  readonly input: Omit<SessionInput, 'task' | 'agent' | 'restore' | 'journal' | 'history'>;
  readonly inspect?: (event: InspectionEvent) => void;
  /** The host's listener of the run's events, and the spans its exporter reads and records (with `--otel`). */
  readonly events?: RunEventListener;
  readonly spans?: StoredSpans;
}

/** What a worker gives each session job it runs: the store and queue, its owner and lease, its watch, and its slots' bookkeeping. */
export interface SessionJobContext {
  /** The one interface a job talks to the store through (claim, read, look, commit, release). */
  readonly store: JobStore;
  readonly boss: PgBoss;
  readonly owner: RunOwner;
  readonly leaseMs: number;
  /** The worker's sessions' leases, renewed together while their jobs hold them. */
  readonly leases: SessionLeases;
  readonly watch: RemoteWatch;
  /** The run's sessions' live half; released once the session stops here. */
  acquire(row: RunRow): Promise<RunSessions>;
  release(row: RunRow): void;
  /** Jobs were queued (a sub-agent, a parent's wake): idle slots here may fetch them at once. */
  queued(): void;
  /** Registers a session in progress, so a stopping worker can hand it back. */
  track(session: { readonly result: Promise<unknown>; interrupt(): void }): () => void;
  draining(): boolean;
}

/** A session job offered again while the session is still held under it: it fails, and the queue offers it again later. */
export class SessionHeld extends ExarchError<'held'> {
  constructor(
    message: string,
    readonly runId: string,
  ) {
    super('held', message);
  }
}

/** A session handed back by a stopping worker: its job fails, and the queue offers it again. */
export class SessionHandedBack extends ExarchError<'handed-back'> {
  constructor(message: string) {
    super('handed-back', message);
  }
}
