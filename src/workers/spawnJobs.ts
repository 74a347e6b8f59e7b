import { childIdentity } from '../engine/identity.js';
import type { JournalRecord } from '../engine/log/journalRecord.js';
import type { AgentIdentity } from '../engine/types.js';
import type { JobQueue, JobStore, QueuedJob } from '../store/jobStore.js';
import type { JournalRow } from '../store/runStore.js';
import { RUN_QUEUE, type RunJob, type SpawnedSession } from './runQueue.js';

/** The agent id of a session's parent (ids are paths). */
export function parentOf(session: string): string {
  return session.slice(0, session.lastIndexOf('/'));
}

/**
 * The jobs a burst of records starts, to be queued in the burst's own transaction: a sub-agent for
 * each `spawn` of this session (not of the subtree a budget keeps here), and its parent's wake for
 * this session's `outcome`.
 */
export function jobsStartedBy(
  runId: string,
  id: string,
  keepsSubtree: boolean,
  scope: string | undefined,
  rows: readonly JournalRow[],
): (QueuedJob & { readonly data: RunJob })[] {
  const jobs: (QueuedJob & { readonly data: RunJob })[] = [];
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
export async function spawnFromJournal(store: JobStore, runId: string, id: string): Promise<SpawnedSession> {
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
export async function requestCancel(store: JobStore, queue: JobQueue, runId: string, session: string, reason: string): Promise<void> {
  await store.requestCancel(runId, session, reason, { queue, jobs: [{ name: RUN_QUEUE, data: { runId, session } satisfies RunJob }] });
}
