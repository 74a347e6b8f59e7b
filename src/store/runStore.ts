import type { JournalRecord } from '../engine/log/journalRecord.js';

/**
 * Where durable runs are kept: the embedded SQLite file by default (`SqliteRunStore`), any other
 * backend behind the same interface. A store keeps, per run, one row describing it and one
 * append-only journal of records (see `JournalRecord`); everything a resume needs is derived
 * from the journal, so a store never rewrites what it wrote.
 *
 * `append` is on the hot path (once per burst of state changes, before any effect they start
 * runs): an embedded store answers synchronously; a networked one may return a promise, and the
 * session then starts its effects once it settles.
 */
export interface RunStore {
  /** Records a new run. Throws if the id is taken. */
  createRun(run: NewRun): void | Promise<void>;
  /** One run, or undefined for an unknown id. A row that cannot be read back throws `StoreError` (`damaged`). */
  getRun(id: string): RunRow | undefined | Promise<RunRow | undefined>;
  /**
   * Every run, newest first, with the totals `exarch runs` shows; a run whose row the store
   * cannot read back is listed as `UnreadableRun`, and the others as usual.
   */
  listRuns(): RunListing[] | Promise<RunListing[]>;
  /** Appends journal rows atomically: after a crash either all of them are there or none. */
  append(rows: readonly JournalRow[]): void | Promise<void>;
  /** The run's journal in `seq` order. A record that cannot be read back throws `StoreError` (`damaged`). */
  journal(runId: string): JournalRow[] | Promise<JournalRow[]>;
  /**
   * Takes the run for `owner` if no live process holds it: the run has no owner, its lease has
   * expired, or (on the same host) its owner's process is gone. Returns the live holder otherwise.
   */
  claim(runId: string, owner: RunOwner, leaseMs: number): ClaimResult | Promise<ClaimResult>;
  /** Extends `owner`'s lease; false if it no longer holds the run. */
  renew(runId: string, owner: RunOwner, leaseMs: number): boolean | Promise<boolean>;
  /** Sets the status and lets go of the run (owner cleared). */
  release(runId: string, owner: RunOwner, status: RunStatus): void | Promise<void>;
  close(): void | Promise<void>;
}

/**
 * `running` while a process works on it (or, after SIGKILL, until a resume takes it: `listRuns`
 * reports a `running` run whose owner is dead as `interrupted`). `waiting`: stopped because tool
 * calls wait for a person's approval and no one was there to ask; resumable once they are answered.
 */
export type RunStatus = 'running' | 'done' | 'capped' | 'failed' | 'interrupted' | 'waiting';

export const RUN_STATUSES: readonly RunStatus[] = ['running', 'done', 'capped', 'failed', 'interrupted', 'waiting'];

/** Who is running a run: a process on a host. `token` tells two owners with the same pid apart. */
export interface RunOwner {
  readonly host: string;
  readonly pid: number;
  readonly token: string;
}

/**
 * What a run needs to be rebuilt: never an API key or any other secret. `options` is the
 * host's or CLI's own (model, caps, flags); exarch reads the fields it knows.
 */
export interface NewRun {
  readonly id: string;
  readonly task: string;
  /** Absolute working directory: a run is resumed only there. */
  readonly cwd: string;
  readonly options: RunOptionsRecord;
  /** Milliseconds since the epoch. */
  readonly startedAt: number;
  readonly owner: RunOwner;
  readonly leaseMs: number;
}

/** The options a run is rebuilt with (JSON). */
export interface RunOptionsRecord {
  readonly model?: string;
  readonly maxSteps?: number;
  readonly maxDepth?: number;
  readonly replyCap?: number;
  readonly allowWrite?: boolean;
  /** `true`: sandboxed (bubblewrap); `'unsandboxed'`: asked for by name. */
  readonly allowShell?: boolean | 'unsandboxed';
  readonly allowNetwork?: boolean;
  readonly logDir?: string;
  /** Names of the host tools every agent was offered (protocol tools excluded). */
  readonly tools: readonly string[];
  /** Names of the declared agent types (`agents`), when there were any: a resume must declare the same. */
  readonly agentTypes?: readonly string[];
  readonly [key: string]: unknown;
}

export interface RunRow {
  readonly id: string;
  readonly task: string;
  readonly cwd: string;
  readonly options: RunOptionsRecord;
  readonly startedAt: number;
  readonly status: RunStatus;
  readonly owner: RunOwner | null;
  /** Milliseconds since the epoch; 0 without an owner. */
  readonly leaseUntil: number;
  readonly endedAt: number | null;
}

export interface RunSummary extends RunRow {
  /** Sessions in the tree (the root included). */
  readonly agents: number;
  /** Model responses committed. */
  readonly requests: number;
  readonly usage: {
    readonly inputTokens: number;
    readonly outputTokens: number;
    readonly cacheCreationInputTokens: number;
    readonly cacheReadInputTokens: number;
  };
}

/**
 * A run whose row a store cannot read back (a column of the wrong type, options that are not a
 * JSON object, a journal that cannot be totalled): what `listRuns` shows of it. It cannot be
 * resumed or viewed; the store's other runs can.
 */
export interface UnreadableRun {
  readonly id: string;
  readonly status: 'unreadable';
  /** What is wrong with it, one line: `its options are not JSON`. */
  readonly problem: string;
  /** When the row says, if it can be read. */
  readonly startedAt?: number;
  readonly task?: string;
}

/** One entry of `listRuns`. */
export type RunListing = RunSummary | UnreadableRun;

/** One journal record of one session (`session` is the agent id; '' for run-level markers). */
export interface JournalRow {
  readonly runId: string;
  /** 1, 2, 3, … per run, in the order the records were made. */
  readonly seq: number;
  readonly session: string;
  /** Milliseconds since the epoch. */
  readonly ts: number;
  readonly record: JournalRecord;
}

export type ClaimResult = { readonly ok: true } | { readonly ok: false; readonly holder: RunOwner; readonly leaseUntil: number };
