import { hostname } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import PgBoss from 'pg-boss';
import { newRunId } from '../store/durableRun.js';
import { RUN_QUEUE, type PostgresRunStore } from '../store/postgresStore.js';
import type { RunOptionsRecord } from '../store/runStore.js';
import type { AgentBudget } from '../engine/budget.js';
import type { AgentIdentity } from '../engine/types.js';

export { RUN_QUEUE };

/**
 * What a sub-agent's job says about it: what its parent's `spawn` record says, plus the declared
 * type whose tools it is bound by (a profile's restriction holds for the subtree below it).
 */
export interface SpawnedSession {
  readonly agent: AgentIdentity;
  readonly actorId: string;
  readonly task: string;
  readonly profile?: string;
  readonly budget?: AgentBudget;
  /** The nearest declared type above it (itself excluded), whose tools its untyped self is given. */
  readonly scope?: string;
}

/**
 * What a job carries: the run's id; for a run whose sessions are jobs of their own (`spread`), the
 * session to run (default: the root), and for a sub-agent's first job what its parent's `spawn`
 * record says of it. Everything else is in the run store.
 */
export interface RunJob {
  readonly runId: string;
  readonly session?: string;
  readonly spawn?: SpawnedSession;
}

/**
 * How the queue hands runs out. A job whose worker died (SIGKILL) stays `active` until it
 * expires; pg-boss then offers it again, and the next worker resumes the run from the store. A
 * worker that finds the run still held by a live one fails the job, and it is offered again after
 * `retryDelay`, until the holder finishes or dies.
 */
export interface QueuePolicy {
  /** Seconds a job may stay with one worker before pg-boss offers it to another (default 900). */
  readonly expireInSeconds?: number;
  /** Seconds before a handed-back or refused job is offered again (default 2). */
  readonly retryDelaySeconds?: number;
}

/**
 * A pg-boss instance on the store's server, with the run queue created. With a `policy`, the
 * queue's defaults are set to it (a worker sets them; a submitter leaves them as they are).
 */
export async function startBoss(url: string, options: { readonly maintenanceIntervalSeconds?: number; readonly policy?: QueuePolicy } = {}): Promise<PgBoss> {
  const boss = new PgBoss({
    connectionString: url,
    // Few connections: a worker's sessions talk to the run store's pool, not to the queue's.
    max: 4,
    // exarch schedules nothing: no cron clock polling the database.
    schedule: false,
    ...(options.maintenanceIntervalSeconds === undefined ? {} : { maintenanceIntervalSeconds: options.maintenanceIntervalSeconds }),
  });
  // pg-boss reports a lost connection (a server restart) as an event and carries on polling.
  boss.on('error', () => {});
  await boss.start();
  const policy = {
    name: RUN_QUEUE,
    // A run is handed back on SIGTERM and refused while held: it must be offered again, many times if need be.
    retryLimit: 1000,
    expireInSeconds: options.policy?.expireInSeconds ?? 900,
    retryDelay: options.policy?.retryDelaySeconds ?? 2,
  };
  if (!(await boss.getQueue(RUN_QUEUE))) await boss.createQueue(RUN_QUEUE, policy).catch(() => undefined);
  if (options.policy) await boss.updateQueue(RUN_QUEUE, policy);
  return boss;
}

export interface Submission {
  readonly task: string;
  /** Absolute working directory the run's tools work in (workers must see the same path). */
  readonly cwd: string;
  /** The options the workers rebuild the run with (model, flags, tool names). Never a secret. */
  readonly record: RunOptionsRecord;
}

/**
 * Records a run in the store and queues it for the workers; returns its id. A job takes the
 * queue's expiry and retries as they are when it is queued: before any worker has started on the
 * database, pg-boss's defaults (15 minutes). The run is recorded
 * with an owner whose lease has already run out, so the first worker to take the job claims it,
 * exactly as a resume claims a run whose process died: `exarch runs` lists it as interrupted
 * until then.
 */
export async function submitRun(store: PostgresRunStore, boss: PgBoss, submission: Submission): Promise<string> {
  const id = newRunId();
  const owner = { host: hostname(), pid: process.pid, token: `submitted-${randomUUID()}` };
  await store.createRun({ id, task: submission.task, cwd: path.resolve(submission.cwd), options: submission.record, startedAt: Date.now(), owner, leaseMs: 0 });
  await queueRun(boss, id);
  return id;
}

/**
 * Offers a stored run to the workers (again): one that stopped `waiting` and whose calls have been
 * answered, say. The worker that takes it resumes it; a run another process holds is offered again
 * later, one that has ended is left as it is.
 */
export async function queueRun(boss: PgBoss, runId: string): Promise<void> {
  // Expiry and retries: the queue's, as the workers set them.
  await boss.send(RUN_QUEUE, { runId } satisfies RunJob, { singletonKey: runId });
}

/** `queueRun` from a command that has no queue of its own open (`exarch approve --db`, a follower that took the answers). */
export async function requeueRun(url: string, runId: string): Promise<void> {
  const boss = await startBoss(url);
  try {
    await queueRun(boss, runId);
  } finally {
    await boss.stop({ graceful: false, wait: true });
  }
}
