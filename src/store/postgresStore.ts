import type pg from 'pg';
import type { JobStore, Look, Looked, Queued, SessionClaim, SessionLease, SessionRecords, SessionRef, SessionSignal, WatchedSession } from './jobStore.js';
import { PostgresConnection, type PostgresStoreOptions } from './postgresConnection.js';
import { append, appendShared, commit, journalAfter } from './postgresJournal.js';
import { claimSession, releaseSession, renewSessions } from './postgresLeases.js';
import { claim, createRun, endRun, getRun, listRuns, release, renew } from './postgresRuns.js';
import { recordSpan, spansOf } from './postgresSpans.js';
import {
  answerCommand,
  answers,
  cancelRequests,
  releaseCommands,
  requestCancel,
  sendCommand,
  sendMessage,
  sessionSignals,
  takeCommands,
  withdrawCommands,
} from './postgresSteering.js';
import {
  approvedAlways,
  hasBegun,
  liveSubAgents,
  look,
  outcomes,
  queuedAfter,
  readSession,
  sessionJournal,
  spawnsOf,
  spreadWaiting,
} from './postgresWorkerQueries.js';
import { jobsByQueue, SharedCommits } from './sharedCommits.js';
import type { ClaimResult, JournalRow, NewRun, RunListing, RunOwner, RunRow, RunStatus, RunStore } from './runStore.js';

/**
 * Runs in PostgreSQL: the store a pool of workers shares. Same contract as `SqliteRunStore`
 * (every method answers with a promise): the schema is created or brought up to date on first
 * use, and a database written by a newer exarch is refused (`StoreError` 'newer-schema') without
 * a byte written. What is written is redacted, as in the SQLite store.
 *
 * A call that finds the server gone (restarting) is tried again until `reconnectMs`; an append
 * whose commit was lost with the connection is recognised on the retry (its rows are there, as
 * written) and not reported as a conflict.
 *
 * This class is the store's face; each method's SQL is kept with its concern: runs and their
 * leases (postgresRuns.ts), the journal (postgresJournal.ts), sessions' claims
 * (postgresLeases.ts), the two steering channels (postgresSteering.ts), span records
 * (postgresSpans.ts) and the queries of a spread run's workers (postgresWorkerQueries.ts), all
 * through one `PostgresConnection` (postgresConnection.ts) on the schema of postgresSchema.ts. A
 * spread run's jobs see it as a `JobStore` (jobStore.ts): claim, read, look, commit, release.
 */
export class PostgresRunStore implements RunStore, JobStore {
  /** The URL without its secrets (`redactUrl`): what messages name. */
  readonly file: string;
  readonly pool: pg.Pool;
  private readonly conn: PostgresConnection;
  private readonly commits: SharedCommits;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    const conn = new PostgresConnection(url, options);
    this.conn = conn;
    this.file = conn.file;
    this.pool = conn.pool;
    this.commits = new SharedCommits((rows, queued) =>
      appendShared(
        conn,
        rows,
        queued.length === 0
          ? undefined
          : async (db) => {
              for (const [queue, jobs] of jobsByQueue(queued)) await queue.insert(jobs, { db });
            },
      ),
    );
  }

  /**
   * Connects and creates or checks the schema now, rather than at the first call: a command that
   * must not go on without the store (one that queues a run next) hears the store's one line first.
   */
  async open(): Promise<void> {
    await this.conn.schema();
  }

  close(): Promise<void> {
    return this.conn.close();
  }

  createRun(run: NewRun): Promise<void> {
    return createRun(this.conn, run);
  }

  getRun(id: string): Promise<RunRow | undefined> {
    return getRun(this.conn, id);
  }

  listRuns(): Promise<RunListing[]> {
    return listRuns(this.conn);
  }

  /** The run's row locked (FOR UPDATE) while the holder is judged: two claimants never both win. */
  claim(runId: string, owner: RunOwner, leaseMs: number): Promise<ClaimResult> {
    return claim(this.conn, runId, owner, leaseMs);
  }

  renew(runId: string, owner: RunOwner, leaseMs: number): Promise<boolean> {
    return renew(this.conn, runId, owner, leaseMs);
  }

  /** Lets go of the run and writes its totals (summed by the server), so `listRuns` need not sum them again. */
  release(runId: string, owner: RunOwner, status: RunStatus): Promise<void> {
    return release(this.conn, runId, owner, status);
  }

  /** Ends a run whose sessions ran as jobs of their own (no process holds the run as a whole); see postgresRuns.ts. */
  endRun(runId: string, status: RunStatus): Promise<void> {
    return endRun(this.conn, runId, status);
  }

  /** One INSERT of the whole batch: a taken (run, seq) rolls all of it back. */
  append(rows: readonly JournalRow[]): Promise<void> {
    return append(this.conn, rows);
  }

  /** Appends a job's records with the jobs they start and the session they let go, in one transaction (`JobStore.commit`). */
  commit(rows: readonly JournalRow[], queued?: Queued, releasing?: { readonly session: string; readonly owner: RunOwner }): Promise<void> {
    // A release is the caller's own transaction; every other commit of this turn goes in one (group commit).
    return releasing ? commit(this.conn, rows, queued, releasing) : this.commits.commit(rows, queued);
  }

  journal(runId: string): Promise<JournalRow[]> {
    return journalAfter(this.conn, runId, 0);
  }

  /** The run's records after `afterSeq`, in order: what a follower polls for. */
  journalAfter(runId: string, afterSeq: number): Promise<JournalRow[]> {
    return journalAfter(this.conn, runId, afterSeq);
  }

  /** Takes one session of a run for `owner`, as `claim` takes a run; see postgresLeases.ts. */
  claimSession(runId: string, session: string, owner: RunOwner, leaseMs: number, job?: string): Promise<SessionClaim> {
    return claimSession(this.conn, runId, session, owner, leaseMs, job);
  }

  /** Extends these leases (of any runs) in one statement; returns those no longer held by their token. */
  renewSessions(leases: readonly SessionLease[], leaseMs: number): Promise<SessionLease[]> {
    return renewSessions(this.conn, leases, leaseMs);
  }

  /** Lets go of a session `owner` holds. */
  releaseSession(runId: string, session: string, owner: RunOwner): Promise<void> {
    return releaseSession(this.conn, runId, session, owner);
  }

  /** Sends a steering line to whichever worker runs the run; returns its number. See postgresSteering.ts. */
  sendCommand(runId: string, line: string): Promise<number> {
    return sendCommand(this.conn, runId, line);
  }

  /** The run's unanswered steering lines, now taken by `taker`, in the order sent. */
  takeCommands(runId: string, taker: string): Promise<{ readonly seq: number; readonly line: string }[]> {
    return takeCommands(this.conn, runId, taker);
  }

  /** What the worker said to a steering line. */
  answerCommand(seq: number, answer: string): Promise<void> {
    return answerCommand(this.conn, seq, answer);
  }

  /** Lets go of `taker`'s unanswered lines but `keep`. */
  releaseCommands(runId: string, taker: string, keep: readonly number[]): Promise<void> {
    return releaseCommands(this.conn, runId, taker, keep);
  }

  /** The answers given so far to the lines `seqs`. */
  answers(seqs: readonly number[]): Promise<{ readonly seq: number; readonly answer: string }[]> {
    return answers(this.conn, seqs);
  }

  /** Takes back the lines of `seqs` that no worker took; returns how many. */
  withdrawCommands(seqs: readonly number[]): Promise<number> {
    return withdrawCommands(this.conn, seqs);
  }

  /** Asks that a session be cancelled, wherever it runs or next runs; the first reason stands. `queued` (its wake) in the same transaction. */
  requestCancel(runId: string, session: string, reason: string, queued?: Queued): Promise<void> {
    return requestCancel(this.conn, runId, session, reason, queued);
  }

  /** Sends a user message to `session` of a spread run from elsewhere; see postgresSteering.ts. */
  sendMessage(runId: string, session: string, host: string, text: string, queued?: Queued): Promise<void> {
    return sendMessage(this.conn, runId, session, host, text, queued);
  }

  /** What was asked of these sessions (of any runs) from elsewhere, in one statement; see postgresSteering.ts. */
  sessionSignals(sessions: readonly WatchedSession[]): Promise<SessionSignal[]> {
    return sessionSignals(this.conn, sessions);
  }

  /** The cancels asked of these sessions, by session. */
  cancelRequests(runId: string, sessions: readonly string[]): Promise<Map<string, string>> {
    return cancelRequests(this.conn, runId, sessions);
  }

  /** Records the span a session's agent span was opened as (`traceparent`); the first one recorded stands. */
  recordSpan(runId: string, session: string, traceparent: string): Promise<void> {
    return recordSpan(this.conn, runId, session, traceparent);
  }

  /** The spans recorded for these sessions (all of the run's without `sessions`), by session. */
  spansOf(runId: string, sessions?: readonly string[]): Promise<Map<string, string>> {
    return spansOf(this.conn, runId, sessions);
  }

  /** What a session of a spread run is restored from (`JobStore.readSession`). */
  readSession(runId: string, session: string, options: { readonly subtree: boolean }): Promise<SessionRecords> {
    return readSession(this.conn, runId, session, options);
  }

  /** What came to a session from elsewhere (`JobStore.look`). */
  look(runId: string, session: string, asked: Look): Promise<Looked> {
    return look(this.conn, runId, session, asked);
  }

  /** One session's records, in order; with `subtree`, those of every session below it too. */
  sessionJournal(runId: string, session: string, options: { readonly subtree?: boolean } = {}): Promise<JournalRow[]> {
    return sessionJournal(this.conn, runId, session, options);
  }

  /** The sub-agents of a run started and not ended, in the order they were started. */
  liveSubAgents(runId: string): Promise<string[]> {
    return liveSubAgents(this.conn, runId);
  }

  /** Whether a session has begun (its `session` record is in the journal). */
  hasBegun(runId: string, session: string): Promise<boolean> {
    return hasBegun(this.conn, runId, session);
  }

  /** The `queued` records (user messages) of a session, with `subtree` of every session below it too, after seq `after`. */
  queuedAfter(runId: string, session: string, after: number, options: { readonly subtree?: boolean } = {}): Promise<JournalRow[]> {
    return queuedAfter(this.conn, runId, session, after, options);
  }

  /** The `spawn` records that started these sessions (each in its parent's journal), in order. */
  spawnsOf(runId: string, sessions: readonly string[]): Promise<JournalRow[]> {
    return spawnsOf(this.conn, runId, sessions);
  }

  /** The `outcome` records of those of `sessions` (of any runs) that ended, in one statement. */
  outcomes(sessions: readonly SessionRef[]): Promise<JournalRow[]> {
    return outcomes(this.conn, sessions);
  }

  /** Whether nothing in a spread run can move until a person answers; see postgresWorkerQueries.ts. */
  spreadWaiting(runId: string): Promise<boolean> {
    return spreadWaiting(this.conn, runId);
  }

  /** The tools a person approved for the rest of a run (`always`), in any session's journal. */
  approvedAlways(runId: string): Promise<Set<string>> {
    return approvedAlways(this.conn, runId);
  }
}

/** Opens a store on the server at `url` (connecting lazily, on first use); see `PostgresRunStore`. */
export function openPostgresStore(url: string, options: PostgresStoreOptions = {}): PostgresRunStore {
  return new PostgresRunStore(url, options);
}
