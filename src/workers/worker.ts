import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type PgBoss from 'pg-boss';
import type { InspectionEvent } from 'xstate';
import { ApprovalStop } from '../engine/approvalStop.js';
import { ExarchError } from '../engine/exarchError.js';
import { reportedStatus } from '../store/memoryStore.js';
import { resumeRun, RunError, type DurableRun, type DurableSessionInput } from '../run/durableRun.js';
import { isConnectionError } from '../store/postgresConnection.js';
import { openPostgresStore, type PostgresRunStore } from '../store/postgresStore.js';
import type { RunOwner, RunRow } from '../store/runStore.js';
import { failForGood, MalformedJobError, readRunJob, RUN_QUEUE, startBoss, type QueuePolicy, type RunJob } from './runQueue.js';
import { createRunObserver } from '../watch/observe/runObserver.js';
import type { RunEventListener } from '../watch/observe/events.js';
import type { SpanDirectory } from '../watch/otel/otelExporter.js';
import { StoredSpans } from './storedSpans.js';
import { RemoteWatch, runSessionJob, SessionHandedBack, SessionHeld, type RunSessions, type SessionJobContext, type SessionJobEnd } from './sessionJob.js';
import { withMcpTools } from '../tools/mcp/mcpOption.js';

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

/** A run handed back on stop: the job fails, and pg-boss offers it again after its retry delay. */
class HandedBack extends ExarchError<'handed-back'> {
  constructor(message: string) {
    super('handed-back', message);
  }
}

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
  const sessionJobs = {
    store,
    boss,
    owner,
    leaseMs: options.leaseMs ?? 30_000,
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

/** How often a worker asks the store for steering lines sent to a run it runs. */
const COMMAND_POLL_MS = 250;

/**
 * Takes the steering lines sent to a run while this worker runs it, acts on each once, and
 * stores what it said. Polled, not notified: a quarter of a second is soon enough for a person,
 * and one small query per run that often is little next to the run's own writes. A store that
 * cannot be reached is asked again at the next poll; a line whose answer was lost is answered
 * again with what was said, not acted on twice. When the run stops here, the lines taken and not
 * acted on are let go, for the worker that takes the run up next.
 */
function steerFromStore(
  store: PostgresRunStore,
  runId: string,
  run: DurableRun,
  command: (line: string, run: DurableRun) => readonly string[],
): { stop(): Promise<void> } {
  const taker = `${hostname()}:${process.pid}:${randomUUID()}`;
  const said = new Map<number, string>();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let polling: Promise<void> = Promise.resolve();
  const act = (line: string): string => {
    try {
      return command(line, run).join('\n');
    } catch (error) {
      return `exarch: the worker could not act on the line: ${error instanceof Error ? error.message : String(error)}`;
    }
  };
  const poll = async (): Promise<void> => {
    try {
      for (const { seq, line } of await store.takeCommands(runId, taker)) {
        if (stopped) break;
        const answer = said.get(seq) ?? act(line);
        said.set(seq, answer);
        await store.answerCommand(seq, answer);
      }
    } catch {
      // Asked again at the next poll.
    }
    if (!stopped) timer = setTimeout(() => (polling = poll()), COMMAND_POLL_MS);
  };
  polling = poll();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await polling;
      await store.releaseCommands(runId, taker, [...said.keys()]).catch(() => undefined);
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

/** A run, or a session of a spread run, in progress here: what a stopping worker waits for, then hands back. */
interface InProgress {
  readonly result: Promise<unknown>;
  interrupt(): void;
}

async function runJob(
  job: RunJob,
  jobId: string,
  store: PostgresRunStore,
  options: WorkerOptions,
  running: Set<InProgress>,
  draining: () => boolean,
  emit: (event: WorkerEvent) => void,
  sessionJobs: SessionJobContext,
): Promise<void> {
  const runId = job.runId;
  const row = await store.getRun(runId);
  if (!row) {
    // Its store was emptied, or the job belongs to another database's store: nothing to run.
    emit({ type: 'error', runId, detail: 'no such run in the store' });
    return;
  }
  // Before the host builds the sessions (starting servers, maybe): a run held or ended needs none.
  if (row.status === 'done' || row.status === 'capped' || row.status === 'failed') {
    if (job.session === undefined) emit({ type: 'finished', runId, status: row.status });
    return;
  }
  if (job.session !== undefined || row.options['spread'] === true) {
    const session = job.session ?? 'root';
    emit({ type: 'session', runId, session, what: 'taken' });
    try {
      const how = await runSessionJob(job, jobId, row, sessionJobs);
      emit({ type: 'session', runId, session, what: how });
      if (session === 'root' && how === 'ended') emit({ type: 'finished', runId, status: (await store.getRun(runId))?.status ?? 'done' });
    } catch (error) {
      if (error instanceof SessionHandedBack) emit({ type: 'session', runId, session, what: 'handed-back' });
      else if ((error instanceof RunError && error.kind === 'held') || error instanceof SessionHeld) emit({ type: 'held', runId, detail: error.message });
      else emit({ type: 'error', runId, detail: error instanceof Error ? error.message : String(error) });
      // Held: its holder takes what this job was for (see runSessionJob), or, if it dies, its own job is offered again.
      if (error instanceof RunError) return;
      throw error;
    }
    return;
  }
  if (reportedStatus(row, Date.now()) === 'running' && row.owner) {
    const held = new RunError(`run ${runId} is being run by process ${row.owner.pid} on ${row.owner.host}`, 'held', runId);
    emit({ type: 'held', runId, detail: held.message });
    throw held;
  }
  let run: Awaited<ReturnType<typeof resumeRun>>;
  let setup: WorkerSession | undefined;
  const approvals = new ApprovalStop();
  // Read before the run starts writing to it: a run with a journal was started before.
  const resumed = (await store.journal(runId)).length > 0;
  try {
    const spans = new StoredSpans(store, runId);
    setup = await options.session(row, { spans });
    // A run taken up again continues its trace: the spans its earlier processes opened, read first.
    if (setup.events) await spans.load();
    const observer = setup.events ? createRunObserver() : undefined;
    if (setup.events) observer?.subscribe(setup.events);
    run = await resumeRun(runId, setup.input, {
      store,
      cwd: row.cwd,
      actor: { inspect: withHost(withHost(approvals.inspect, setup.inspect), observer?.inspect) },
      ...(options.leaseMs === undefined ? {} : { leaseMs: options.leaseMs }),
    });
  } catch (error) {
    await setup?.close?.();
    if (error instanceof RunError && error.kind === 'held') {
      // A live worker has it (this job expired under it): offered again later, until it ends.
      emit({ type: 'held', runId, detail: error.message });
      throw error;
    }
    emit({ type: 'error', runId, detail: error instanceof Error ? error.message : String(error) });
    // Another directory, other tools: no worker will do better; the job is not retried.
    if (error instanceof RunError) return;
    throw error;
  }
  if ('finished' in run) {
    await setup.close?.();
    emit({ type: 'finished', runId, status: run.status });
    return;
  }
  running.add(run);
  const steering = options.command ? steerFromStore(store, runId, run, options.command) : undefined;
  try {
    approvals.watch(run);
    emit({ type: 'started', runId, resumed });
    const result = await run.result;
    if (result.status === 'interrupted' && draining()) {
      emit({ type: 'handed-back', runId });
      throw new HandedBack(`run ${runId} handed back by a stopping worker`);
    }
    emit({ type: 'finished', runId, status: result.status });
  } finally {
    await steering?.stop();
    approvals.close();
    running.delete(run);
    await setup.close?.();
  }
}

/** How long a run's sessions' live half (its MCP servers, say) outlives its last session here: the next is often moments away. */
const SETUP_IDLE_MS = 5_000;

/**
 * The live half of each spread run's sessions on this worker, made once (the host's builder, the
 * run's MCP servers connected) and shared by the run's sessions here; closed once none has run
 * for a while, and when the worker stops.
 */
class RunSetups {
  private readonly made = new Map<string, { ready: Promise<RunSessions & { close(): Promise<void> }>; users: number; idle: NodeJS.Timeout | undefined }>();

  constructor(
    private readonly build: WorkerOptions['session'],
    private readonly store: PostgresRunStore,
  ) {}

  async acquire(row: RunRow): Promise<RunSessions> {
    let entry = this.made.get(row.id);
    if (!entry) {
      const ready = this.make(row);
      entry = { ready, users: 0, idle: undefined };
      this.made.set(row.id, entry);
      ready.catch(() => this.made.delete(row.id));
    }
    entry.users++;
    clearTimeout(entry.idle);
    try {
      return await entry.ready;
    } catch (error) {
      entry.users--;
      throw error;
    }
  }

  release(runId: string): void {
    const entry = this.made.get(runId);
    if (!entry || --entry.users > 0) return;
    entry.idle = setTimeout(() => {
      if (entry.users > 0) return;
      this.made.delete(runId);
      void entry.ready.then((made) => made.close()).catch(() => undefined);
    }, SETUP_IDLE_MS);
    entry.idle.unref();
  }

  async closeAll(): Promise<void> {
    const entries = [...this.made.values()];
    this.made.clear();
    await Promise.allSettled(
      entries.map(async (entry) => {
        clearTimeout(entry.idle);
        await (await entry.ready).close();
      }),
    );
  }

  private async make(row: RunRow): Promise<RunSessions & { close(): Promise<void> }> {
    const spans = new StoredSpans(this.store, row.id);
    const built = await this.build(row, { spans });
    const mcp = await withMcpTools(built.input).catch(async (error: unknown) => {
      await built.close?.();
      throw error;
    });
    const tools = (mcp.input.tools ?? []).map((tool) => tool.name).sort();
    if (tools.join('\n') !== [...row.options.tools].sort().join('\n')) {
      await mcp.close();
      await built.close?.();
      throw new RunError(`run ${row.id} was started with the tools [${row.options.tools.join(', ')}], not [${tools.join(', ')}]`, 'tools-differ', row.id);
    }
    return {
      input: mcp.input,
      ...(built.inspect ? { inspect: built.inspect } : {}),
      ...(built.events ? { events: built.events, spans } : {}),
      close: async () => {
        await mcp.close();
        await built.close?.();
      },
    };
  }
}

/** The worker's observer, and the host's after it when there is one. */
function withHost(own: (event: InspectionEvent) => void, host: ((event: InspectionEvent) => void) | undefined): (event: InspectionEvent) => void {
  if (!host) return own;
  return (event) => {
    own(event);
    host(event);
  };
}
