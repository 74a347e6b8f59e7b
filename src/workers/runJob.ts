import type { InspectionEvent } from 'xstate';
import { ApprovalStop } from '../engine/approvalStop.js';
import { ExarchError } from '../engine/exarchError.js';
import { resumeRun, RunError } from '../run/durableRun.js';
import { reportedStatus } from '../store/memoryStore.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import { createRunObserver } from '../watch/observe/runObserver.js';
import { SessionHandedBack, SessionHeld, type SessionJobContext } from './jobContext.js';
import type { RunJob } from './runQueue.js';
import { steerFromStore } from './runCommands.js';
import { runSessionJob } from './sessionJob.js';
import { StoredSpans } from './storedSpans.js';
import type { WorkerEvent, WorkerOptions, WorkerSession } from './workerOptions.js';

/** A run handed back on stop: the job fails, and pg-boss offers it again after its retry delay. */
export class HandedBack extends ExarchError<'handed-back'> {
  constructor(message: string) {
    super('handed-back', message);
  }
}

/** A run, or a session of a spread run, in progress here: what a stopping worker waits for, then hands back. */
export interface InProgress {
  readonly result: Promise<unknown>;
  interrupt(): void;
}

export async function runJob(
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

/** The worker's observer, and the host's after it when there is one. */
function withHost(own: (event: InspectionEvent) => void, host: ((event: InspectionEvent) => void) | undefined): (event: InspectionEvent) => void {
  if (!host) return own;
  return (event) => {
    own(event);
    host(event);
  };
}
