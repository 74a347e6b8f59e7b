import { randomFillSync, randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import path from 'node:path';
import { ulid } from 'ulid';
import type { ActorOptions } from 'xstate';
import type { SessionMachine } from '../../machines/session.js';
import type { SessionInput } from '../../machines/sessionTypes.js';
import { finalAssistantText } from '../engine/history.js';
import { sendFromOutside } from '../engine/inspection.js';
import { createSessionActor, isSettled, runResultOf, waitForSettled, type RunResult, type SessionActor, type SessionSnapshot } from './runtime.js';
import { stopOrphansOf } from '../../machines/crew.js';
import type { Message } from '../engine/types.js';
import { withMcpTools, type McpOption } from '../tools/mcp/mcpOption.js';
import { restoreRun, type RestoredRun } from '../store/restoreRun.js';
import { RunJournal } from '../store/runJournal.js';
import { RunError } from '../store/runError.js';
import type { JournalRow, RunListing, RunOptionsRecord, RunOwner, RunRow, RunStatus, RunStore } from '../store/runStore.js';

// Kept in a file of its own so that what this file imports can throw it too; exported from here as before.
export { RunError, type RunErrorKind } from '../store/runError.js';

/**
 * What a durable run's sessions run with: a session's input minus what the run itself provides,
 * plus the run's MCP servers (connected when the run starts or resumes, closed when it stops).
 */
export type DurableSessionInput = Omit<SessionInput, 'task' | 'agent' | 'restore' | 'journal' | 'history'> & McpOption;

export interface DurableRunOptions {
  readonly store: RunStore;
  /** The working directory the run belongs to (default `process.cwd()`); a resume elsewhere is refused. */
  readonly cwd?: string;
  /** What the host needs to rebuild the run besides tools (model, flags); stored as JSON. Never put a secret here. */
  readonly record?: Omit<RunOptionsRecord, 'tools'>;
  /** How long a lease lasts without renewal (default 30 s; renewed every third of it). */
  readonly leaseMs?: number;
  /** The new run's id (`startRun` only; default `newRunId()`): a caller that announces the id before the run starts makes it first. */
  readonly id?: string;
  /** Passed to the root actor (`inspect`, …). */
  readonly actor?: Omit<ActorOptions<SessionMachine>, 'input' | 'snapshot'>;
  /**
   * Called once the run is claimed and its root made, just before the root starts: a caller that
   * announces the run (`exarch: run … resumed`) does so before anything the root reports.
   */
  readonly onStart?: () => void;
}

/** A durable run in progress. */
export interface DurableRun {
  readonly id: string;
  readonly actor: SessionActor;
  /** Settles when the root does; the run's status is written by then and the tree stopped. */
  readonly result: Promise<DurableRunResult>;
  /**
   * Stops the run so that it can be resumed (Ctrl-C): the tree is cancelled (pending calls are
   * answered `cancelled` in the logs), and a resume undoes those cancellations.
   */
  interrupt(): void;
  /**
   * Stops the run to wait for approvals no one is there to give: as `interrupt`, but the run's
   * status is `waiting`. Its waiting calls stay open in the journal (`exarch approve`, then a resume).
   */
  suspend(): void;
  /**
   * Stops the run for good: the tree is cancelled with `reason`, and the run is `failed`, which
   * a resume does not take up (unlike `interrupt`, nothing is marked to be undone). For a run that
   * cannot go on as itself: a replay whose request left its recording, where whatever followed,
   * now or on a resume, would not be the recorded run.
   */
  fail(reason: string): void;
}

export interface DurableRunResult extends RunResult {
  readonly status: RunStatus;
  /** Set when the store could not be written: the run was cancelled and is `failed`. */
  readonly storeError?: Error;
}

/** A resume of a run that has nothing left to do. */
export interface FinishedRun {
  readonly id: string;
  readonly finished: true;
  readonly status: RunStatus;
  /** The root's last assistant text. */
  readonly text: string;
  /** Why the root failed or was capped, when it was. */
  readonly reason?: string;
}

const DEFAULT_LEASE_MS = 30_000;

/** Random bytes for run ids, drawn from the OS a pool at a time. */
const randomPool = new Uint8Array(256);
let poolAt = randomPool.length;

/**
 * ulid's PRNG: one random byte over 256, as its own default, which asks the OS for each byte
 * (16 calls an id, 80 µs of a durable run's start, measured); this takes them from a pool.
 */
function pooledRandom(): number {
  if (poolAt === randomPool.length) {
    randomFillSync(randomPool);
    poolAt = 0;
  }
  return (randomPool[poolAt++] as number) / 256;
}

/** A new run id: a ULID, so ids sort by the time the runs started. */
export function newRunId(): string {
  return ulid(undefined, pooledRandom);
}

/**
 * Starts a root agent on `task` as a durable run: every session of its tree is journaled to
 * `store` as it goes, and `resumeRun` takes it up again after a crash.
 *
 * @example
 * ```ts
 * const store = openSqliteStore('.exarch/exarch.db');
 * const run = await startRun('Summarise the README', { provider, tools }, { store });
 * console.log(run.id); // resume it later with resumeRun(store, run.id, { provider, tools })
 * const { text, status } = await run.result;
 * ```
 */
export async function startRun(task: string, session: DurableSessionInput, options: DurableRunOptions): Promise<DurableRun> {
  const { store } = options;
  const id = options.id ?? newRunId();
  const owner = newOwner();
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const cwd = path.resolve(options.cwd ?? process.cwd());
  const agentTypes = agentTypesOf(session);
  const mcp = await withMcpTools(session);
  try {
    // The MCP tools' names are recorded with the host's: a resume must be offered them again.
    const record = { ...options.record, tools: toolNames(mcp.input), ...(agentTypes.length > 0 ? { agentTypes } : {}) };
    await store.createRun({ id, task, cwd, options: record, startedAt: Date.now(), owner, leaseMs });
  } catch (error) {
    await mcp.close();
    throw error;
  }
  return launch(store, id, owner, leaseMs, 1, { ...mcp.input, task }, options, false, mcp.close);
}

/**
 * Takes up a run that did not finish (its process crashed, was killed or interrupted), with the
 * same tools it was started with; the provider and other live options are the host's again.
 * Returns a `FinishedRun` when there is nothing left to do. Throws `RunError` for an unknown run,
 * a run another live process holds, another working directory or other tools.
 */
export async function resumeRun(runId: string, session: DurableSessionInput, options: DurableRunOptions): Promise<DurableRun | FinishedRun> {
  const { store } = options;
  const row = await store.getRun(runId);
  if (!row) throw new RunError(`no run with id ${runId}`, 'unknown-run', runId);
  const cwd = path.resolve(options.cwd ?? process.cwd());
  if (row.cwd !== cwd) throw new RunError(`run ${runId} belongs to ${row.cwd}: resume it from there`, 'wrong-directory', runId);
  if (row.status !== 'running' && row.status !== 'interrupted' && row.status !== 'waiting') return finished(row, await store.journal(runId));
  // Its sessions are claimed one by one by the workers: a whole-tree resume here would run them beside those.
  if (row.options['spread'] === true) {
    throw new RunError(
      `run ${runId} runs on the workers a session at a time (--spread): queue its sessions again for them with requeueSpreadRun (exarch resume ${runId} --db)`,
      'spread',
      runId,
    );
  }
  // The run's MCP servers are connected again (and closed again on any way out but a launch).
  const mcp = await withMcpTools(session);
  let launched = false;
  try {
    const run = await resumeConnected(store, row, mcp.input, options, mcp.close);
    launched = !('finished' in run);
    return run;
  } finally {
    if (!launched) await mcp.close();
  }
}

async function resumeConnected(
  store: RunStore,
  row: RunRow,
  session: Omit<DurableSessionInput, 'mcp'>,
  options: DurableRunOptions,
  closeMcp: () => Promise<void>,
): Promise<DurableRun | FinishedRun> {
  const runId = row.id;
  const tools = toolNames(session);
  if (tools.join('\n') !== [...row.options.tools].sort().join('\n')) {
    throw new RunError(`run ${runId} was started with the tools [${row.options.tools.join(', ')}], not [${tools.join(', ')}]`, 'tools-differ', runId);
  }
  // Declared agents are not stored (they hold schemas and functions): the host passes the same ones
  // again, and their names are checked, since the journal starts sub-agents by type name.
  const recordedTypes = Array.isArray(row.options['agentTypes']) ? row.options['agentTypes'].map(String) : [];
  const agentTypes = agentTypesOf(session);
  if (agentTypes.join('\n') !== [...recordedTypes].sort().join('\n')) {
    throw new RunError(
      `run ${runId} was started with the agent types [${recordedTypes.join(', ')}], not [${agentTypes.join(', ')}]: resume it with the same agents`,
      'agents-differ',
      runId,
    );
  }
  const owner = newOwner();
  const leaseMs = options.leaseMs ?? DEFAULT_LEASE_MS;
  const claim = await store.claim(runId, owner, leaseMs);
  if (!claim.ok) {
    throw new RunError(`run ${runId} is being run by process ${claim.holder.pid} on ${claim.holder.host}; try again once it has stopped`, 'held', runId);
  }
  const rows = await store.journal(runId);
  const restored = restoreRun(rows);
  if (restored.kind === 'ended' || restored.kind === 'settled') {
    // The last process died after the root settled but before it released the run.
    const status = statusOf(restored);
    await store.release(runId, owner, status);
    const reason = restored.kind === 'ended' ? restored.result.reason : undefined;
    return { id: runId, finished: true, status, text: finalAssistantText(restored.messages), ...(reason === undefined ? {} : { reason }) };
  }
  const nextSeq = (rows.at(-1)?.seq ?? 0) + 1;
  const input: SessionInput = restored.kind === 'resumable' ? { ...session, restore: restored.root } : { ...session, task: row.task };
  return launch(store, runId, owner, leaseMs, nextSeq, input, options, true, closeMcp);
}

/** Every run in the store, newest first (`exarch runs`); one the store cannot read back is an `UnreadableRun`. */
export async function listRuns(store: RunStore): Promise<RunListing[]> {
  return store.listRuns();
}

function finished(row: RunRow, rows: readonly JournalRow[]): FinishedRun {
  const restored = restoreRun(rows);
  const messages: readonly Message[] =
    restored.kind === 'ended' || restored.kind === 'settled' ? restored.messages : restored.kind === 'resumable' ? restored.root.messages : [];
  return { id: row.id, finished: true, status: row.status, text: finalAssistantText(messages) };
}

function statusOf(restored: Extract<RestoredRun, { kind: 'ended' | 'settled' }>): RunStatus {
  if (restored.kind === 'settled') return 'done';
  const outcome = restored.result.outcome;
  return outcome === 'capped' ? 'capped' : outcome === 'cancelled' ? 'interrupted' : outcome === 'failed' ? 'failed' : 'done';
}

function newOwner(): RunOwner {
  return { host: hostname(), pid: process.pid, token: randomUUID() };
}

/** The declared agent types' names, sorted: what a resume must declare again. */
function agentTypesOf(session: Omit<DurableSessionInput, 'mcp'>): string[] {
  return Object.keys(session.agents ?? {}).sort();
}

/** The host tools' names, sorted: what a resume must offer again. */
function toolNames(session: Omit<DurableSessionInput, 'mcp'>): string[] {
  return (session.tools ?? []).map((tool) => tool.name).sort();
}

/** Starts the root; from here on the run owns `closeMcp` and calls it once the tree has stopped. */
function launch(
  store: RunStore,
  id: string,
  owner: RunOwner,
  leaseMs: number,
  nextSeq: number,
  input: SessionInput,
  options: DurableRunOptions,
  resuming: boolean,
  closeMcp: () => Promise<void>,
): DurableRun {
  let storeFailure: Error | undefined;
  let interrupted = false;
  let suspended = false;
  /** Why the run was stopped for good (`fail`), if it was. */
  let failure: string | undefined;
  /** Set once the root settled: an interrupt then comes too late, and must not touch the run. */
  let settled = false;
  // Assigned below; the journal reports a failed write only from a later microtask or promise.
  let actor: SessionActor | undefined;
  const journal = new RunJournal(store, id, nextSeq, (error) => {
    storeFailure = error;
    if (actor) sendFromOutside(actor, { type: 'cancel', reason: `the run store could not be written: ${error.message}` });
  });
  try {
    actor = createSessionActor({ ...input, journal }, options.actor ?? {});
  } catch (error) {
    // Nothing ran: let go of the run, as it was, rather than hold it until this process exits.
    void Promise.resolve(store.release(id, owner, resuming ? 'interrupted' : 'failed')).catch(() => undefined);
    void closeMcp();
    throw error;
  }
  if (resuming) journal.mark({ type: 'resume' });
  const root = actor;
  const renew = setInterval(
    () => {
      void Promise.resolve(store.renew(id, owner, leaseMs)).catch(() => undefined);
    },
    Math.max(1, Math.floor(leaseMs / 3)),
  );
  renew.unref();
  options.onStart?.();
  root.start();
  const result = (async (): Promise<DurableRunResult> => {
    // A root that crashed rejects here: the run is failed.
    let status: RunStatus = 'failed';
    let ended: DurableRunResult;
    try {
      const snapshot = await waitForSettled(root);
      settled = true;
      status = storeFailure || failure !== undefined ? 'failed' : suspended ? 'waiting' : interrupted ? 'interrupted' : statusOfSnapshot(snapshot);
      ended = { ...runResultOf(snapshot, storeFailure ? `the run store could not be written: ${storeFailure.message}` : failure), status };
    } finally {
      settled = true;
      clearInterval(renew);
      root.stop();
      stopOrphansOf(root);
      // Sessions close their logs on the next microtasks; their last records go in the last burst.
      await new Promise((resolve) => setImmediate(resolve));
      try {
        await journal.flush();
        if (!storeFailure) await store.release(id, owner, status);
      } catch (error) {
        // Its end could not be recorded (a full disk): the run stays `running`, its owner this
        // process, for a resume to take up once there is room. Said as any store failure is.
        storeFailure ??= error instanceof Error ? error : new Error(String(error));
      } finally {
        await closeMcp();
      }
    }
    // The last burst (flushed above) may have failed too: the result says so.
    return storeFailure ? { ...ended, storeError: storeFailure } : ended;
  })();
  return {
    id,
    actor: root,
    result,
    interrupt() {
      if (interrupted || settled || failure !== undefined) return;
      interrupted = true;
      journal.mark({ type: 'interrupt' });
      sendFromOutside(root, { type: 'cancel', reason: 'interrupted' });
    },
    suspend() {
      if (interrupted || settled || failure !== undefined) return;
      interrupted = suspended = true;
      // The same undoable cancel as an interrupt: a resume takes every session up where it was.
      journal.mark({ type: 'interrupt' });
      sendFromOutside(root, { type: 'cancel', reason: 'waiting for approval' });
    },
    fail(reason) {
      if (interrupted || settled || failure !== undefined) return;
      failure = reason;
      sendFromOutside(root, { type: 'cancel', reason });
    },
  };
}

function statusOfSnapshot(snapshot: SessionSnapshot): RunStatus {
  if (snapshot.status === 'active') return isSettled(snapshot) ? 'done' : 'interrupted';
  if (snapshot.status !== 'done') return 'failed';
  const outcome = snapshot.output?.outcome;
  return outcome === 'capped' ? 'capped' : outcome === 'failed' ? 'failed' : outcome === 'cancelled' ? 'interrupted' : 'done';
}
