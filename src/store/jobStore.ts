import type { JournalRow, RunOwner, RunStatus } from './runStore.js';

/**
 * The store as one job of a spread run uses it (src/workers/sessionJob.ts): each session of the
 * run is a job of its own, and its job talks to the store in a straight line.
 *
 * 1. **claim** the session for the job (`claimSession`), its lease kept while the job runs
 *    (`renewSessions`, all of a worker's leases in one statement). A claim refused names its
 *    holder and the job it holds it for.
 * 2. **read** what the session is restored from (`readSession`): its records, or its subtree's,
 *    with the outcomes of its sub-agents that ended meanwhile; for a wake, what started it
 *    (`spawnsOf`, the `spawn` records of its lineage).
 * 3. while it runs, **look** for what came to it from elsewhere (`look`: its sub-agents' results,
 *    a cancel, messages, tools approved for the rest of the run) and **commit** its records
 *    (`commit`), with the jobs they start queued in the same transaction; ask a sub-agent
 *    elsewhere to stop (`requestCancel`, with its wake); record its spans (`recordSpan`).
 * 4. **release** the session (`releaseSession`); a parked one looks once more, and the root's job
 *    that ended ends the run (`endRun`).
 *
 * The worker's watch, shared by the sessions a worker runs, asks for all of them, of every run, at
 * once (`outcomes`, `sessionSignals`): one statement each per poll, however many runs. The store
 * answers and never calls the worker back: the jobs a write queues are data, written through the
 * queue's own `insert` with the write's connection (`Queued`). The guarantees are the store's: a
 * session is taken from its holder only once its lease ran out or its process is gone, a commit is
 * all or nothing, and a commit retried after a lost connection is not written twice.
 */
export interface JobStore {
  /**
   * Takes one session of a run for `owner` (for the queue's job `job`) when no live process holds
   * it; refused, the holder, its lease, and the job it took the session for.
   */
  claimSession(runId: string, session: string, owner: RunOwner, leaseMs: number, job?: string): Promise<SessionClaim>;
  /** Extends these leases, of any runs, in one statement; returns those no longer held by their token. */
  renewSessions(leases: readonly SessionLease[], leaseMs: number): Promise<SessionLease[]>;
  /** What a session is restored from; with `subtree`, every session below it too (a budget keeps its subtree in one job). */
  readSession(runId: string, session: string, options: { readonly subtree: boolean }): Promise<SessionRecords>;
  /** The `spawn` records that started these sessions (each in its parent's journal), in order. */
  spawnsOf(runId: string, sessions: readonly string[]): Promise<JournalRow[]>;
  /** What came to a session from elsewhere, of what is asked (each part asked in parallel; a part not asked is empty). */
  look(runId: string, session: string, asked: Look): Promise<Looked>;
  /**
   * Appends records of sessions that other jobs append to as well (numbered in commit order),
   * with `queued` jobs and `releasing` a session `owner` holds, in one transaction: all of it is
   * committed, or none.
   */
  commit(rows: readonly JournalRow[], queued?: Queued, releasing?: { readonly session: string; readonly owner: RunOwner }): Promise<void>;
  /** Asks that a session be cancelled, wherever it runs or next runs (the first reason stands), with `queued` (its wake) in one transaction. */
  requestCancel(runId: string, session: string, reason: string, queued?: Queued): Promise<void>;
  /** Records the span a session's agent span was opened as (`traceparent`); the first one recorded stands. */
  recordSpan(runId: string, session: string, traceparent: string): Promise<void>;
  /** The spans recorded for these sessions (all of the run's without `sessions`), by session. */
  spansOf(runId: string, sessions?: readonly string[]): Promise<Map<string, string>>;
  /** Lets go of a session `owner` holds. */
  releaseSession(runId: string, session: string, owner: RunOwner): Promise<void>;
  /** Ends a run whose sessions ran as jobs of their own: its status, and its totals written. A run already ended is left as it is. */
  endRun(runId: string, status: RunStatus): Promise<void>;
  /**
   * The `outcome` records of those of `sessions` (of any runs) that ended, in one statement: the
   * watch's look for the results its sessions wait on. In seq order within each run.
   */
  outcomes(sessions: readonly SessionRef[]): Promise<JournalRow[]>;
  /**
   * What was asked from elsewhere of these sessions (of any runs; with `subtree`, of every session
   * below it too), in one statement: a cancel, the seq of the last message. Only sessions asked something.
   */
  sessionSignals(sessions: readonly WatchedSession[]): Promise<SessionSignal[]>;
}

/** One session of one run. */
export interface SessionRef {
  readonly runId: string;
  readonly session: string;
}

/** A session's lease, as the job holding it knows it: by its claim's token. */
export interface SessionLease extends SessionRef {
  readonly token: string;
}

/** A session the worker's watch looks at; with `subtree`, every session below it too (a subtree kept in one job). */
export interface WatchedSession extends SessionRef {
  readonly subtree: boolean;
}

/** What was asked of a session from elsewhere: a cancel (its reason), the seq of the last message sent to it. */
export interface SessionSignal extends SessionRef {
  readonly cancel?: string;
  readonly messageSeq?: number;
}

/** A claim of one session: when refused, the job its holder took it for, if it said. */
export type SessionClaim = { readonly ok: true } | { readonly ok: false; readonly holder: RunOwner; readonly leaseUntil: number; readonly job?: string };

/** What a session is restored from (`JobStore.readSession`). */
export interface SessionRecords {
  /** Its records (its subtree's too, if asked), with the `outcome` records of its sub-agents not yet delivered to it, in seq order. */
  readonly rows: JournalRow[];
  /** The seq of the last record read of it (or of its subtree), 0 for none: a message after it is new to it. */
  readonly lastSeq: number;
}

/** What `JobStore.look` is asked for. */
export interface Look {
  /** The sub-agents whose `outcome` records are asked for. */
  readonly results?: readonly string[];
  /** Whether a cancel asked of the session is asked for. */
  readonly cancel?: boolean;
  /** The messages (`queued` records) to the session after this seq; with `subtree`, to every session below it too. */
  readonly messagesAfter?: number;
  readonly subtree?: boolean;
  /** Whether the tools a person approved for the rest of the run (`always`) are asked for. */
  readonly approved?: boolean;
}

/** What `JobStore.look` found. */
export interface Looked {
  readonly results: JournalRow[];
  /** The reason of the cancel asked of the session, if one was. */
  readonly cancel: string | undefined;
  readonly messages: JournalRow[];
  readonly approved: Set<string>;
}

/** A job to queue: its queue's name and its payload (pg-boss's `JobInsert`, as far as exarch uses it). */
export interface QueuedJob {
  readonly name: string;
  readonly data: object;
}

/** The queue a write's jobs go to (pg-boss): `insert` given the write's own connection, so the jobs commit with the write. */
export interface JobQueue {
  insert(jobs: QueuedJob[], options: { db: SqlExecutor }): Promise<unknown>;
}

/** Jobs a write queues in its own transaction: both are committed, or neither. */
export interface Queued {
  readonly queue: JobQueue;
  readonly jobs: QueuedJob[];
}

/** Runs SQL in a store's transaction: the shape pg-boss takes as its `db` option. */
export interface SqlExecutor {
  executeSql(text: string, values: unknown[]): Promise<{ rows: unknown[] }>;
}
