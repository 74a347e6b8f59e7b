import { hostname } from 'node:os';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import PgBoss from 'pg-boss';
import { newRunId } from '../run/durableRun.js';
import { RUN_QUEUE } from '../store/postgresSchema.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import type { RunOptionsRecord } from '../store/runStore.js';
import type { AgentBudget } from '../engine/budget.js';
import { ExarchError } from '../engine/exarchError.js';
import { clip } from '../engine/render.js';
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
 * A job on the run queue whose payload is no run (null, no object, no run id): anything with the
 * database's credentials can send one. No worker could do better with it, so it is failed once,
 * never offered again (`failForGood`), and said in one line.
 */
export class MalformedJobError extends ExarchError<'malformed-job'> {
  constructor(
    /** The queue's id of the job. */
    readonly job: string,
    message: string,
  ) {
    super('malformed-job', message);
  }
}

/** Longest payload quoted in a `MalformedJobError`'s line. */
const QUOTED_PAYLOAD = 80;

/**
 * A job's payload as a `RunJob`, or a `MalformedJobError` naming the job and what is wrong with it.
 * A `spawn` that is not what this exarch writes is left out: the session's job then reads what
 * started it from its parent's journal, as a wake does (the journal, not the job, is the record).
 */
export function readRunJob(job: string, data: unknown): RunJob {
  const malformed = (why: string): MalformedJobError =>
    new MalformedJobError(job, `its payload ${clip(JSON.stringify(data) ?? String(data), QUOTED_PAYLOAD)} is not a run (${why})`);
  if (typeof data !== 'object' || data === null || Array.isArray(data)) throw malformed('not an object');
  const { runId, session, spawn } = data as Readonly<Record<string, unknown>>;
  if (typeof runId !== 'string' || runId === '') throw malformed('no runId string');
  if (session !== undefined && (typeof session !== 'string' || session === '')) throw malformed('its session is not a session id');
  return { runId, ...(session === undefined ? {} : { session }), ...(isSpawnedSession(spawn) ? { spawn } : {}) };
}

/** Whether `value` has the shape `jobsStartedBy` gives a sub-agent's first job (the fields a session is built from). */
function isSpawnedSession(value: unknown): value is SpawnedSession {
  if (typeof value !== 'object' || value === null) return false;
  const spawn = value as Readonly<Record<string, unknown>>;
  const agent = spawn['agent'] as Readonly<Record<string, unknown>> | null | undefined;
  const optionalString = (key: string): boolean => spawn[key] === undefined || typeof spawn[key] === 'string';
  return (
    typeof agent === 'object' &&
    agent !== null &&
    typeof agent['name'] === 'string' &&
    typeof agent['id'] === 'string' &&
    Number.isSafeInteger(agent['depth']) &&
    Array.isArray(agent['path']) &&
    agent['path'].every((name) => typeof name === 'string') &&
    typeof spawn['actorId'] === 'string' &&
    typeof spawn['task'] === 'string' &&
    optionalString('profile') &&
    optionalString('scope') &&
    (spawn['budget'] === undefined || isAgentBudget(spawn['budget']))
  );
}

function isAgentBudget(value: unknown): value is AgentBudget {
  if (typeof value !== 'object' || value === null) return false;
  const { tokens, cost } = value as Readonly<Record<string, unknown>>;
  const amount = (n: unknown): boolean => n === undefined || (typeof n === 'number' && Number.isFinite(n) && n > 0);
  return amount(tokens) && amount(cost);
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

/**
 * Fails a job for good: pg-boss fails a job into `retry` while it has retries left (the run queue
 * gives a thousand), so it is left none first. The same statement's effect as pg-boss's `fail`
 * on a job whose retry limit was reached.
 */
export async function failForGood(boss: PgBoss, id: string, message: string): Promise<void> {
  await boss.getDb().executeSql('UPDATE pgboss.job SET retry_limit = retry_count WHERE name = $1 AND id = $2', [RUN_QUEUE, id]);
  await boss.fail(RUN_QUEUE, id, { message });
}
