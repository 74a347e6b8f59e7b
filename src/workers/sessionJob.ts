import { randomUUID } from 'node:crypto';
import type PgBoss from 'pg-boss';
import { createActor, type InspectionEvent } from 'xstate';
import { sessionMachine } from '../../machines/session.js';
import type { SessionInput } from '../../machines/sessionTypes.js';
import { stopOrphansOf } from '../../machines/crew.js';
import { ExarchError } from '../engine/exarchError.js';
import { childIdentity } from '../engine/identity.js';
import { childOptions, inheritOptions, resolveOptions, type ResolvedOptions } from '../session/options.js';
import type { RemoteChild, RemoteChildren, RemoteChildSpec } from '../engine/remoteChildren.js';
import type { SessionSnapshot } from '../run/runtime.js';
import { blockedOnApprovals } from '../engine/approvals.js';
import type { AgentIdentity, AgentResult } from '../engine/types.js';
import { RunError } from '../run/durableRun.js';
import type { JournalRecord } from '../engine/log/journalRecord.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import { liveChildrenOf, restoreAlone } from '../store/restoreRun.js';
import type { RestoredSession } from '../store/restoredSession.js';
import { RunJournal } from '../store/runJournal.js';
import type { JournalRow, RunOwner, RunRow, RunStatus } from '../store/runStore.js';
import type { RunEventListener } from '../watch/observe/events.js';
import { RUN_QUEUE, type RunJob, type SpawnedSession } from './runQueue.js';
import type { StoredSpans } from './storedSpans.js';
import { createRunObserver } from '../watch/observe/runObserver.js';
import { cancelAgent, findAgent } from '../engine/steering.js';

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

export interface SessionJobContext {
  readonly store: PostgresRunStore;
  readonly boss: PgBoss;
  readonly owner: RunOwner;
  readonly leaseMs: number;
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

/** The agent id of a session's parent (ids are paths). */
function parentOf(session: string): string {
  return session.slice(0, session.lastIndexOf('/'));
}

/**
 * Runs one session of a run whose sessions are jobs of their own, from where its journal left it,
 * until it ends or has nothing to do but wait for sub-agents running elsewhere; it then parks:
 * its actor stops, its claim is let go, its job is done, and the journal record that delivers a
 * sub-agent's result queues the job that wakes it (`jobsStartedBy`). Its sub-agents are started as jobs
 * the same way, in the transaction of the records that start them, so a started sub-agent always
 * has a job, and one whose parent crashed before the records were written never ran.
 *
 * A sub-agent given a budget runs its whole subtree here (a budget is kept in one process).
 */
export async function runSessionJob(offered: RunJob, jobId: string, row: RunRow, ctx: SessionJobContext): Promise<SessionJobEnd> {
  const { store, boss, leaseMs } = ctx;
  // A token per job: two slots of one worker never both hold a session (a holder may claim again).
  const owner: RunOwner = { ...ctx.owner, token: randomUUID() };
  const runId = row.id;
  const id = offered.session ?? 'root';
  const claim = await store.claimSession(runId, id, owner, leaseMs, jobId);
  if (!claim.ok) {
    const held = `session ${id} of run ${runId} is being run by process ${claim.holder.pid} on ${claim.holder.host}`;
    // This very job again (it expired under its holder, which may have died on another host):
    // offered again until the holder ends or its lease runs out. Any other job (a wake, a cancel)
    // is left to the holder, which looks for results once more as it lets go.
    if (claim.job === jobId) throw new SessionHeld(held, runId);
    throw new RunError(held, 'held', runId);
  }
  const renew = setInterval(() => void store.renewSessions(runId, [id], owner, leaseMs).catch(() => undefined), Math.max(1, Math.floor(leaseMs / 3)));
  renew.unref();
  try {
    // A wake carries no spawn: what started the session is in its ancestors' journals.
    const spawn = offered.spawn ?? (id === 'root' ? undefined : await spawnFromJournal(store, runId, id));
    const job: RunJob = spawn ? { ...offered, spawn } : offered;
    // A session with a budget keeps its subtree here: it is restored with it, as a resume restores a tree.
    const keepsSubtree = job.spawn?.budget !== undefined;
    const rows = await store.sessionJournal(runId, id, { subtree: keepsSubtree });
    const own = rows.filter((r) => r.session === id).map((r) => r.record);
    const delivered = keepsSubtree ? [] : await store.outcomes(runId, liveChildrenOf(own));
    const restored = restoreAlone(
      [...rows, ...delivered].sort((a, b) => a.seq - b.seq),
      id,
    );
    // Every record it is restored from, messages included: a message after these is new to it.
    const seen = { seq: rows.at(-1)?.seq ?? 0 };
    if (restored.kind === 'ended') {
      // Ended before (its outcome's commit queued its parent's wake): only a root's run is left to close.
      if (id === 'root') await store.endRun(runId, statusOf(restored.result));
      return 'ended';
    }
    if (id !== 'root' && !job.spawn && restored.kind === 'empty') throw new Error(`exarch: session ${id} of run ${runId} has no records and no spawn`);
    let left: { how: SessionJobEnd; waitingOn: readonly string[]; cancelTaken?: boolean };
    if (!keepsSubtree && restored.kind === 'resumable' && waitsForAll(restored.session) && (await store.cancelRequests(runId, [id])).size === 0) {
      // Woken by one result while it waits for them all: nothing for it to do yet; the results wait in
      // the journal and are taken together once the last one is there (no actor made, nothing written).
      // (Not so for a subtree kept here: its sub-agents run here, and it was woken for one of them.)
      left = { how: 'parked', waitingOn: restored.session.children.map((child) => child.agent.id) };
    } else {
      const sessions = await ctx.acquire(row);
      try {
        left = await runHere(job, row, id, restored.kind === 'resumable' ? restored.session : undefined, sessions, ctx, seen);
      } finally {
        ctx.release(row);
      }
    }
    if (left.how === 'parked') {
      clearInterval(renew);
      await store.releaseSession(runId, id, owner);
      // A wake that came while this job held the session was dropped (see the worker): a result or
      // a cancel that arrived between the last look and the release is looked for once more, now
      // that a new wake would find the session free.
      const [results, cancels, messages] = await Promise.all([
        store.outcomes(runId, left.waitingOn),
        store.cancelRequests(runId, [id]),
        store.queuedAfter(runId, id, seen.seq, { subtree: keepsSubtree }),
      ]);
      if (results.length > 0 || (cancels.size > 0 && left.cancelTaken !== true) || messages.length > 0) {
        await boss.send(RUN_QUEUE, { runId, session: id } satisfies RunJob);
        ctx.queued();
      }
    }
    return left.how;
  } finally {
    clearInterval(renew);
    await store.releaseSession(runId, id, owner).catch(() => undefined);
  }
}

async function runHere(
  job: RunJob,
  row: RunRow,
  id: string,
  restore: RestoredSession | undefined,
  sessions: RunSessions,
  ctx: SessionJobContext,
  /** The last seq of the journal the session was restored from: messages after it are new to it. */
  seen: { seq: number },
): Promise<{ how: SessionJobEnd; waitingOn: readonly string[]; cancelTaken: boolean }> {
  const { store, boss } = ctx;
  const runId = row.id;
  const spawn = job.spawn;
  const keepsSubtree = spawn?.budget !== undefined;
  // The declared type this session's untyped sub-agents are bound by.
  const scope = spawn ? (spawn.profile ?? spawn.scope) : undefined;
  let storeFailure: Error | undefined;
  let stopNow = (): void => undefined;
  const journal = new RunJournal(
    {
      append: async (rows) => {
        const jobs = jobsStartedBy(runId, id, keepsSubtree, scope, rows);
        if (jobs.length === 0) return store.appendShared(rows);
        // A sub-agent's job finds this session's span: written before the record that starts it.
        await sessions.spans?.written();
        await store.appendShared(rows, (db) => boss.insert(jobs, { db: db as unknown as PgBoss.Db }));
        ctx.queued();
      },
    },
    runId,
    1,
    (error) => {
      storeFailure = error;
      stopNow();
    },
  );
  const abort = new AbortController();
  const remoteChildren: RemoteChildren = {
    start: (child, signal) =>
      ctx.watch.child(runId, child, signal, async (reason) => {
        await requestCancel(store, boss, runId, child.agent.id, reason);
        ctx.queued();
      }),
  };
  const runOptions = resolveOptions({ ...sessions.input, journal, remoteChildren });
  // Tools a person approved for the rest of the run, in any session: its calls of them wait for no one.
  if (sessions.input.approve !== undefined) runOptions.approvals.approveAlways(await store.approvedAlways(runId));
  const input = sessionInputOf(runOptions, row, restore, spawn);
  // A subtree kept here moves below the session without changing its snapshot: with calls that may
  // wait for a person, every change in the tree is a moment it may have come to rest.
  let treeMoved = (): void => undefined;
  // The host's run events come from an observer of this job's actors (each job is an actor system of its own).
  const observer = sessions.events ? createRunObserver() : undefined;
  if (sessions.events) observer?.subscribe(sessions.events);
  // The spans of this session (opened by an earlier job), of its parent and of a subtree kept here.
  if (sessions.events) await sessions.spans?.load([id, ...(id === 'root' ? [] : [parentOf(id)]), ...(keepsSubtree && restore ? subtreeOf(restore) : [])]);
  const hosts = [sessions.inspect, observer?.inspect].filter((f): f is (event: InspectionEvent) => void => f !== undefined);
  const watchTree = keepsSubtree && sessions.input.approve !== undefined;
  const inspect =
    hosts.length > 0 || watchTree
      ? (event: InspectionEvent): void => {
          for (const host of hosts) host(event);
          if (watchTree && event.type === '@xstate.snapshot') treeMoved();
        }
      : undefined;
  const actor = createActor(sessionMachine, { input, ...(inspect ? { inspect } : {}) });
  let handedBack = false;
  const ended = new Promise<SessionJobEnd>((resolve, reject) => {
    let parkCheck: NodeJS.Timeout | undefined;
    let settledWith: SessionJobEnd | undefined;
    const settle = (how: SessionJobEnd): void => {
      if (settledWith) return;
      settledWith = how;
      clearTimeout(parkCheck);
      subscription.unsubscribe();
      resolve(how);
    };
    stopNow = () => settle('handed-back');
    const consider = (): void => {
      if (parkCheck || settledWith || !parkable(actor, keepsSubtree)) return;
      // Parks once the state has held for a moment: results that arrive together are taken first.
      const check = (afterMs: number): void => {
        parkCheck = setTimeout(() => {
          void (async () => {
            if (!parkable(actor, keepsSubtree) || settledWith) {
              parkCheck = undefined;
              return;
            }
            // A sub-agent that ended since the last poll: its result is on its way here; stay for
            // it, and look again later (a store that did not answer, likewise). A call of a tool
            // approved for the rest of the run elsewhere since this job began is taken as approved.
            const live = [...actor.getSnapshot().context.children.values()].map((child) => child.agent.id);
            const [waiting, approved, messages] = await Promise.all([
              store.outcomes(runId, live).catch(() => [null]),
              approvalsWait(actor) ? store.approvedAlways(runId).catch(() => new Set<string>()) : new Set<string>(),
              // A message sent meanwhile is taken here first (the watch hands it over within a poll).
              store.queuedAfter(runId, id, seen.seq, { subtree: keepsSubtree }).catch(() => [null]),
            ]);
            if (settledWith) return;
            if (approved.size > 0 && takeApproved(actor, approved)) return check(500);
            if (waiting.length > 0 || messages.length > 0 || !parkable(actor, keepsSubtree)) return check(500);
            settle('parked');
          })();
        }, afterMs);
      };
      check(50);
    };
    treeMoved = consider;
    const subscription = actor.subscribe({
      next: (snapshot) => {
        if (snapshot.status === 'done') return settle('ended');
        if (id === 'root' && atRest(snapshot)) return settle('ended');
        consider();
      },
      error: (error) => reject(error),
    });
  });
  const untrack = ctx.track({
    result: ended.catch(() => undefined),
    interrupt: () => {
      handedBack = true;
      stopNow();
    },
  });
  // Messages sent from elsewhere (steering) are in the journal already: handed to the session (or
  // to one of the subtree it keeps here) without being written again, each once, in order.
  const takeMessages = async (): Promise<void> => {
    const rows = await store.queuedAfter(runId, id, seen.seq, { subtree: keepsSubtree });
    for (const { seq, session, record } of rows) {
      if (seq <= seen.seq || record.type !== 'queued') continue;
      seen.seq = seq;
      const target = session === id ? actor : findAgent(actor, session);
      target?.send({ type: 'user.message', text: record.text, journaled: true });
    }
  };
  let taking: Promise<void> = Promise.resolve();
  // A cancel asked before this job began is taken at once: the session must not park before it
  // sees it (the watch's first look may be a poll away).
  const askedBefore = (await store.cancelRequests(runId, [id])).get(id);
  let cancelTaken = false;
  const cancel = (reason: string): void => {
    if (cancelTaken) return;
    cancelTaken = true;
    actor.send({ type: 'cancel', reason });
  };
  ctx.watch.steering(runId, id, abort.signal, {
    subtree: keepsSubtree,
    onCancel: (reason, session) => (session === id ? cancel(reason) : cancelAgent(actor, session, reason)),
    onMessages: () => {
      taking = taking.then(takeMessages).catch(() => undefined);
    },
  });
  let how: SessionJobEnd = 'handed-back';
  try {
    actor.start();
    if (askedBefore !== undefined) cancel(askedBefore);
    how = await ended;
  } catch {
    // The session's actor crashed: stopping it below records it failed (`stopOrphansOf` closes its
    // log), and that outcome wakes its parent.
    how = 'ended';
  } finally {
    abort.abort();
    untrack();
    // Parked or handed back, it is set down where its journal stands: its stop records nothing.
    if (how !== 'ended') journal.seal();
    actor.stop();
    stopOrphansOf(actor);
    // Sessions close their logs on the next microtasks; their last records go in the last burst.
    await new Promise((resolve) => setImmediate(resolve));
    await journal.flush();
  }
  if (storeFailure) throw storeFailure;
  if (how === 'handed-back' || handedBack) throw new SessionHandedBack(`session ${id} of run ${runId} handed back by a stopping worker`);
  const snapshot = actor.getSnapshot();
  if (how === 'ended' && id === 'root') {
    await store.endRun(runId, snapshot.status === 'done' && snapshot.output ? statusOf(snapshot.output) : snapshot.status === 'error' ? 'failed' : 'done');
  }
  return { how, waitingOn: how === 'parked' ? [...snapshot.context.children.values()].map((child) => child.agent.id) : [], cancelTaken };
}

/** The session's input: the root's from the run, a sub-agent's from its job, bound as its parent's options bound it. */
function sessionInputOf(runOptions: ResolvedOptions, row: RunRow, restore: Parameters<typeof runHere>[3], spawn: SpawnedSession | undefined): SessionInput {
  if (!spawn) return inheritOptions(runOptions, restore ? { restore } : { task: row.task });
  const above = spawn.scope === undefined ? runOptions : childOptions(runOptions, spawn.scope);
  const options = childOptions(above, spawn.profile);
  const budget = spawn.budget === undefined ? {} : { subtreeBudget: spawn.budget };
  return inheritOptions(options, restore ? { agent: spawn.agent, restore, ...budget } : { agent: spawn.agent, task: spawn.task, ...budget });
}

/** A session waiting in `wait_for_agents` for all its sub-agents, some still running. */
function waitsForAll(session: RestoredSession): boolean {
  if (session.state !== 'waitingForAgents' || session.children.length === 0) return false;
  const wait = session.batch?.content.find((block) => block.type === 'tool_use' && block.name === 'wait_for_agents');
  return wait?.type === 'tool_use' && wait.input['until'] !== 'any';
}

/**
 * A session with nothing to do but wait for sub-agents that run elsewhere, or for a person to
 * answer its calls. One that keeps its subtree here (a budget) waits for sub-agents that run here:
 * it parks only once nothing in its subtree can move without a person.
 */
function parkable(actor: SessionActor, keepsSubtree: boolean): boolean {
  if (keepsSubtree) return approvalsWait(actor) && blockedOnApprovals(actor);
  const snapshot = actor.getSnapshot();
  if (snapshot.status !== 'active') return false;
  if (snapshot.value === 'awaitingApproval') return true;
  const { context } = snapshot;
  if (context.children.size === 0) return false;
  if (snapshot.value === 'waitingForAgents') return true;
  if (snapshot.value !== 'readyForUser') return false;
  const turnInput = context.pendingUser.length > 0 || (context.inbox.length > 0 && context.options.wake === 'each');
  return !turnInput;
}

/** Whether a call of the session (or of its subtree here) waits for a person. */
function approvalsWait(actor: SessionActor): boolean {
  return actor.getSnapshot().context.options.approvals.waiting().length > 0;
}

/** Approves the waiting calls of `tools` (approved `always` elsewhere in the run); true if there were any. */
function takeApproved(actor: SessionActor, tools: ReadonlySet<string>): boolean {
  const desk = actor.getSnapshot().context.options.approvals;
  const calls = desk.waiting().filter((request) => tools.has(request.tool));
  desk.approveAlways(tools);
  for (const { callId } of calls) desk.respond({ callId, decision: 'approve' });
  return calls.length > 0;
}

type SessionActor = ReturnType<typeof createActor<typeof sessionMachine>>;

/** The agent ids of a restored session's subtree (itself included). */
function subtreeOf(session: RestoredSession): string[] {
  return [session.agent.id, ...session.children.flatMap((child) => (child.restore ? subtreeOf(child.restore) : [child.agent.id]))];
}

/** The root at rest with nothing left: the run is done. */
function atRest(snapshot: SessionSnapshot): boolean {
  const { context } = snapshot;
  return (
    snapshot.status === 'active' &&
    snapshot.value === 'readyForUser' &&
    context.children.size === 0 &&
    context.inbox.length === 0 &&
    context.pendingUser.length === 0
  );
}

function statusOf(result: AgentResult): RunStatus {
  return result.outcome === 'capped' ? 'capped' : result.outcome === 'failed' ? 'failed' : result.outcome === 'cancelled' ? 'interrupted' : 'done';
}

/**
 * The jobs a burst of records starts, to be queued in the burst's own transaction: a sub-agent for
 * each `spawn` of this session (not of the subtree a budget keeps here), and its parent's wake for
 * this session's `outcome`.
 */
function jobsStartedBy(runId: string, id: string, keepsSubtree: boolean, scope: string | undefined, rows: readonly JournalRow[]): PgBoss.JobInsert<RunJob>[] {
  const jobs: PgBoss.JobInsert<RunJob>[] = [];
  let self: AgentIdentity | undefined;
  for (const { session, record } of rows) {
    if (session !== id) continue;
    if (record.type === 'session') self = record.agent;
    else if (record.type === 'spawn' && !keepsSubtree)
      jobs.push({ name: RUN_QUEUE, data: { runId, session: record.id, spawn: spawnOf(record, self ?? agentOfId(id), scope) } });
    else if (record.type === 'outcome' && id !== 'root') jobs.push({ name: RUN_QUEUE, data: { runId, session: parentOf(id) } });
  }
  return jobs;
}

function spawnOf(record: Extract<JournalRecord, { type: 'spawn' }>, parent: AgentIdentity, scope: string | undefined): SpawnedSession {
  return {
    agent: { ...childIdentity(parent, record.name), id: record.id },
    actorId: record.actorId,
    task: record.task,
    ...(record.profile === undefined ? {} : { profile: record.profile }),
    ...(record.budget === undefined ? {} : { budget: record.budget }),
    ...(scope === undefined ? {} : { scope }),
  };
}

/**
 * What a sub-agent's first job said of it, rebuilt from the `spawn` records of it and its
 * ancestors: the declared type it is bound by is the nearest ancestor's (`scope`).
 */
async function spawnFromJournal(store: PostgresRunStore, runId: string, id: string): Promise<SpawnedSession> {
  const parts = id.split('/');
  const lineage = parts.slice(2).map((_, i) => parts.slice(0, i + 2).join('/'));
  const spawns = new Map<string, Extract<JournalRecord, { type: 'spawn' }>>();
  for (const { record } of await store.spawnsOf(runId, [...lineage, id])) if (record.type === 'spawn') spawns.set(record.id, record);
  const own = spawns.get(id);
  if (!own) throw new Error(`exarch: session ${id} of run ${runId} has no spawn record`);
  const scope = lineage.map((ancestor) => spawns.get(ancestor)?.profile).reduce<string | undefined>((nearest, profile) => profile ?? nearest, undefined);
  return spawnOf(own, agentOfId(parentOf(id)), scope);
}

/** An agent's identity from its id alone: the path is the id's parts, without the `#2` of a reused name. */
function agentOfId(id: string): AgentIdentity {
  const path = id.split('/').map((part) => part.replace(/#\d+$/, ''));
  return { name: path.at(-1) ?? id, path, depth: path.length - 1, id };
}

/** Asks a sub-agent elsewhere to stop, and queues its job so that a parked one wakes to do so. */
async function requestCancel(store: PostgresRunStore, boss: PgBoss, runId: string, session: string, reason: string): Promise<void> {
  await store.requestCancel(runId, session, reason, (db) =>
    boss.insert([{ name: RUN_QUEUE, data: { runId, session } satisfies RunJob }], { db: db as unknown as PgBoss.Db }),
  );
}

/** How often a worker looks for results of, and cancels of, the sessions it waits on or runs. */
const WATCH_MS = 200;

/**
 * The worker's eyes on the store for its sessions: the results of the sub-agents they wait on
 * (each `outcome` record of one), and the cancels asked of them. Polled: a fifth of a second is
 * soon enough next to a model's seconds, one query per run and kind covers every session, and a
 * server restart needs no re-subscribing.
 */
export class RemoteWatch {
  private readonly children = new Map<string, Map<string, (outcome: Extract<JournalRecord, { type: 'outcome' }>) => void>>();
  private readonly steered = new Map<string, Map<string, SteeringWatch>>();
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly store: PostgresRunStore) {}

  /** Waits for `child`'s result (a stand-in for it in its parent's crew). */
  child(runId: string, spec: RemoteChildSpec, signal: AbortSignal, cancel: (reason: string) => Promise<void>): RemoteChild {
    const id = spec.agent.id;
    const result = new Promise<AgentResult>((resolve) => {
      let waiting = this.children.get(runId);
      if (!waiting) this.children.set(runId, (waiting = new Map()));
      waiting.set(id, (outcome) => resolve(resultOf(spec.agent.name, outcome)));
      signal.addEventListener('abort', () => this.children.get(runId)?.delete(id), { once: true });
    });
    this.arm();
    return {
      result,
      cancel: (reason) => {
        void cancel(reason).catch(() => undefined);
      },
    };
  }

  /**
   * While `signal` is not aborted: calls `onCancel` once if a cancel is asked of `session`, and
   * `onMessages` with the seq of the last message sent to it from elsewhere whenever that grows.
   */
  steering(runId: string, session: string, signal: AbortSignal, watch: Omit<SteeringWatch, 'messageSeq' | 'cancelled'>): void {
    let watched = this.steered.get(runId);
    if (!watched) this.steered.set(runId, (watched = new Map()));
    watched.set(session, { ...watch, messageSeq: 0, cancelled: new Set() });
    signal.addEventListener('abort', () => this.steered.get(runId)?.delete(session), { once: true });
    this.arm();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private arm(): void {
    if (this.timer || this.stopped) return;
    // The first look at once: a cancel asked before the session started, a result already there.
    this.timer = setTimeout(() => void this.poll(), 0);
  }

  private async poll(): Promise<void> {
    try {
      for (const [runId, waiting] of [...this.children]) {
        if (waiting.size === 0) {
          this.children.delete(runId);
          continue;
        }
        for (const { session, record } of await this.store.outcomes(runId, [...waiting.keys()])) {
          const resolve = waiting.get(session);
          if (!resolve || record.type !== 'outcome') continue;
          waiting.delete(session);
          resolve(record);
        }
      }
      for (const [runId, watched] of [...this.steered]) {
        if (watched.size === 0) {
          this.steered.delete(runId);
          continue;
        }
        const subtrees = [...watched].filter(([, watch]) => watch.subtree).map(([session]) => session);
        for (const [session, { cancel, messageSeq }] of await this.store.sessionSignals(runId, [...watched.keys()], subtrees)) {
          // The session's own watch, or that of the job that keeps its subtree.
          const top = watched.has(session) ? session : subtrees.find((root) => session.startsWith(`${root}/`));
          const watch = top === undefined ? undefined : watched.get(top);
          if (!watch) continue;
          if (session === top && messageSeq !== undefined && messageSeq > watch.messageSeq) {
            watch.messageSeq = messageSeq;
            watch.onMessages(messageSeq);
          }
          if (cancel !== undefined && !watch.cancelled.has(session)) {
            watch.cancelled.add(session);
            watch.onCancel(cancel, session);
          }
        }
      }
    } catch {
      // Looked at again at the next poll.
    }
    this.timer = undefined;
    if (!this.stopped && (this.children.size > 0 || this.steered.size > 0)) this.timer = setTimeout(() => void this.poll(), WATCH_MS);
  }
}

/** What a running session is told of what was asked of it from elsewhere. */
interface SteeringWatch {
  /** Also the sessions below it: a subtree kept in its job (a budget). */
  readonly subtree: boolean;
  /** A cancel asked of `session` (the watched one, or one of its subtree). */
  onCancel(reason: string, session: string): void;
  onMessages(upTo: number): void;
  messageSeq: number;
  readonly cancelled: Set<string>;
}

/** A sub-agent's result from its `outcome` record, as its session's `done` output has it. */
function resultOf(name: string, outcome: Extract<JournalRecord, { type: 'outcome' }>): AgentResult {
  return {
    name,
    outcome: outcome.outcome,
    text: outcome.text,
    ...(outcome.reason === undefined ? {} : { reason: outcome.reason }),
    ...('value' in outcome ? { value: outcome.value } : {}),
    usage: outcome.totalUsage,
  };
}
