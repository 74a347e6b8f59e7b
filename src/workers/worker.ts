import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type PgBoss from 'pg-boss';
import { isConnectionError } from '../store/postgresConnection.js';
import { openPostgresStore } from '../store/postgresStore.js';
import type { RunOwner, RunRow } from '../store/runStore.js';
import { failForGood, MalformedJobError, readRunJob, RUN_QUEUE, startBoss } from './runQueue.js';
import { HandedBack, runJob, type InProgress } from './runJob.js';
import { RunSetups } from './runSetups.js';
import { RemoteWatch } from './remoteWatch.js';
import { SessionLeases } from './sessionLeases.js';
import type { SessionJobContext } from './jobContext.js';
import type { Worker, WorkerEvent, WorkerOptions } from './workerOptions.js';

/**
 * A worker: takes runs from the pg-boss queue (`submitRun`) and runs each whole tree here, journaled
 * to the Postgres store, at most `concurrency` at once. Every run is taken as a resume takes it
 * (`resumeRun`): a new run has an empty journal, a run whose worker died is taken up with the
 * durable-run guarantees (no completed model or tool call repeated, a call in flight answered as
 * unknown).
 *
 * A worker has no one to ask for approvals: a run whose sessions have an `approve` policy goes on
 * until nothing in it can move without a person, then stops as `waiting` (its job done). Answers
 * recorded with `recordApproval` (`exarch approve --db`) are taken up by the next resume, here
 * once the run is queued again, or anywhere with `resumeRun`.
 *
 * @example
 * ```ts
 * const worker = await startWorker({ db: 'postgres://…', concurrency: 8, session: (run) => ({ input: { provider, tools } }) });
 * process.once('SIGTERM', () => void worker.stop({ timeoutMs: 20_000 }));
 * ```
 */
export async function startWorker(options: WorkerOptions): Promise<Worker> {
  // Two connections a slot, up to 32: with --spread a worker holds hundreds of small sessions, which wait on their model far more than on the store.
  const store = openPostgresStore(options.db, { poolSize: Math.min(32, Math.max(4, (options.concurrency ?? 1) * 2)) });
  // First use: a store that cannot be opened (or a newer schema) fails here, before any job is taken.
  await store.listRuns().catch(async (error: unknown) => {
    await store.close();
    throw error;
  });
  const expireInSeconds = options.policy?.expireInSeconds ?? 900;
  const boss = await startBoss(options.db, {
    maintenanceIntervalSeconds: Math.max(1, Math.min(120, Math.floor(expireInSeconds / 4))),
    policy: { expireInSeconds, ...(options.policy?.retryDelaySeconds === undefined ? {} : { retryDelaySeconds: options.policy.retryDelaySeconds }) },
  });
  const running = new Set<InProgress>();
  const owner: RunOwner = { host: hostname(), pid: process.pid, token: randomUUID() };
  const watch = new RemoteWatch(store);
  const setups = new RunSetups(options.session, store);
  const leaseMs = options.leaseMs ?? 30_000;
  const sessionJobs = {
    store,
    boss,
    owner,
    leaseMs,
    leases: new SessionLeases(store, leaseMs),
    watch,
    acquire: (row: RunRow) => setups.acquire(row),
    release: (row: RunRow) => setups.release(row.id),
    track: (session: InProgress) => {
      running.add(session);
      return () => running.delete(session);
    },
    draining: () => draining,
    queued: () => queuedHere.fire(),
  } satisfies SessionJobContext;
  let draining = false;
  const emit = (event: WorkerEvent): void => options.onEvent?.(event);
  // Wakes the slots waiting for the next poll when the worker stops (one listener for them all).
  let wake = (): void => undefined;
  const woken = new Promise<void>((resolve) => (wake = resolve));
  const pollMs = Math.max(500, (options.pollingIntervalSeconds ?? 1) * 1000);
  // Jobs this worker's sessions queue (a sub-agent, a parent's wake) are fetched at once by its idle slots, not at their next poll.
  const queuedHere = new Signal();
  const concurrency = options.concurrency ?? 1;
  const inFlight = new Set<Promise<void>>();
  const freed = new Signal();
  /**
   * Takes up to as many jobs as slots are free, in one fetch, and runs each: marks it done or failed
   * once it ends. One fetch loop rather than one per slot: with hundreds of slots (sessions are
   * small), idle slots polling one by one cost the server more than the work. By hand rather than
   * pg-boss's work(): that marks a job done or failed without waiting for the answer, so a Postgres
   * restart at that moment killed the worker with an unhandled rejection.
   */
  const fetchLoop = async (): Promise<void> => {
    // Fetches in a row that failed (the server restarting, say): the next is asked for after a
    // backoff, pollMs doubled each time up to FETCH_BACKOFF_CAP_MS, and at once after one that worked.
    let failed = 0;
    while (!draining) {
      const free = concurrency - inFlight.size;
      if (free <= 0) {
        await Promise.race([freed.next(), woken]);
        continue;
      }
      // Unknown: a job's payload is what anyone with the database's credentials put there (see readRunJob).
      const jobs = await boss.fetch<unknown>(RUN_QUEUE, { batchSize: free }).then(
        (found) => {
          failed = 0;
          return found;
        },
        (): PgBoss.Job<unknown>[] => {
          failed++;
          return [];
        },
      );
      if (jobs.length === 0) {
        await Promise.race([sleep(failed === 0 ? pollMs : Math.min(FETCH_BACKOFF_CAP_MS, pollMs * 2 ** failed)), woken, queuedHere.next()]);
        continue;
      }
      for (const job of jobs) {
        const task = (async () => {
          let failure: unknown;
          try {
            const payload = readRunJob(job.id, job.data);
            // Taken as the worker began to stop: offered again at once, untouched.
            if (draining) throw new HandedBack(`worker stopping; run ${payload.runId} not started`);
            await runJob(payload, job.id, store, options, running, () => draining, emit, sessionJobs);
          } catch (error) {
            if (error instanceof MalformedJobError) emit({ type: 'malformed', job: job.id, detail: error.message });
            failure = error;
          }
          await settleJob(boss, job.id, failure);
        })().finally(() => {
          inFlight.delete(task);
          freed.fire();
        });
        inFlight.add(task);
      }
    }
  };
  const fetching = fetchLoop();
  let stopped: Promise<void> | undefined;
  return {
    get active() {
      return running.size;
    },
    stop(stopOptions = {}) {
      stopped ??= (async () => {
        draining = true;
        wake();
        queuedHere.fire();
        const all = Promise.allSettled([...running].map((run) => run.result));
        const timeoutMs = stopOptions.timeoutMs ?? 30_000;
        let timer: NodeJS.Timeout | undefined;
        const late = await Promise.race([all.then(() => false), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), timeoutMs)))]);
        clearTimeout(timer);
        if (late) for (const run of running) run.interrupt();
        // Each job is marked (a handed-back one failed, so it is offered again) before its task ends.
        await fetching;
        await Promise.allSettled([...inFlight]);
        watch.stop();
        await setups.closeAll();
        await boss.stop({ graceful: true, wait: true, timeout: 10_000 });
        await store.close();
      })();
      return stopped;
    },
  };
}

/** How long a worker keeps trying to mark a job done or failed while the server is away. */
const SETTLE_MS = 60_000;

/** The longest a worker waits before it asks a server that failed its last fetches for jobs again. */
const FETCH_BACKOFF_CAP_MS = 10_000;

/**
 * Marks a job done, or failed (offered again after the queue's retry delay). A server that cannot
 * be reached is tried again for a minute, then left: the job, still active, expires and is
 * offered again, and the next worker finds in the run store what is left to do (nothing, for a
 * run that ended).
 */
async function settleJob(boss: PgBoss, id: string, failure: unknown): Promise<void> {
  const end = Date.now() + SETTLE_MS;
  for (;;) {
    try {
      if (failure === undefined) await boss.complete(RUN_QUEUE, id);
      else if (failure instanceof MalformedJobError) await failForGood(boss, id, failure.message);
      else await boss.fail(RUN_QUEUE, id, { message: failure instanceof Error ? failure.message : String(failure) });
      return;
    } catch (error) {
      if (!isConnectionError(error) || Date.now() > end) return;
      await sleep(1_000);
    }
  }
}

/** What the fetch loop waits on: `next` settles at the next `fire`, or at once if one came since the last wait. */
class Signal {
  private waiting: { promise: Promise<void>; resolve: () => void } | undefined;
  private fired = false;

  next(): Promise<void> {
    if (this.fired) {
      this.fired = false;
      return Promise.resolve();
    }
    if (!this.waiting) {
      let resolve = (): void => undefined;
      const promise = new Promise<void>((done) => (resolve = done));
      this.waiting = { promise, resolve };
    }
    return this.waiting.promise;
  }

  fire(): void {
    if (!this.waiting) {
      this.fired = true;
      return;
    }
    this.waiting.resolve();
    this.waiting = undefined;
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
