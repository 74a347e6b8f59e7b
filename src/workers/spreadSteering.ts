import type PgBoss from 'pg-boss';
import { steer, steeringAnswers } from '../engine/steeringLine.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import { RUN_QUEUE, type RunJob } from './runQueue.js';
import { jobSessionOf } from './spreadApprovals.js';

/**
 * One steering line (`/cancel PATH`, `/msg PATH TEXT`, `/help`) for a run spread over workers,
 * acted on through the store alone, wherever the agent runs or waits: a cancel is stored and the
 * job that runs the sub-agent woken to act on it; a message is appended to the agent's journal as
 * its `queued` record, with the wake of the job that runs it, in one transaction (a running job
 * hands it to the session without writing it again; a parked one is woken and takes it up with
 * its journal). Returns the lines to answer with, as `steeringCommand` answers them for a tree
 * run here.
 *
 * @example
 * ```ts
 * for (const line of await steerSpreadRun(store, boss, runId, '/msg root/lead also check the README')) console.error(line);
 * ```
 */
export async function steerSpreadRun(store: PostgresRunStore, boss: PgBoss, runId: string, line: string): Promise<string[]> {
  /** The wake of the job that runs `host`, queued in the transaction that stores what it is to act on. */
  const wake = (host: string) => ({ queue: boss, jobs: [{ name: RUN_QUEUE, data: { runId, session: host } satisfies RunJob }] });
  return steer(line, 'followed', {
    help: async () => steeringAnswers.help(await running(store, runId), 'followed'),
    cancel: async (agent) => {
      const live = await store.liveSubAgents(runId);
      if (!live.includes(agent)) return steeringAnswers.noSubAgent(agent, await running(store, runId, live));
      const host = jobSessionOf(agent, await store.spawnsOf(runId, lineageOf(agent)));
      await store.requestCancel(runId, agent, 'cancelled from the terminal', wake(host));
      return steeringAnswers.cancelling(agent);
    },
    message: async (agent, text) => {
      const live = await store.liveSubAgents(runId);
      const runs = agent === 'root' ? await rootRuns(store, runId) : live.includes(agent);
      // One that has not begun has no journal to take a message into yet.
      if (!runs || !(await store.hasBegun(runId, agent))) return steeringAnswers.noAgent(agent, await running(store, runId, live));
      const host = jobSessionOf(agent, await store.spawnsOf(runId, lineageOf(agent)));
      await store.sendMessage(runId, agent, host, text, wake(host));
      return steeringAnswers.messaged(agent);
    },
    said: async (lines) => lines,
  });
}

/** The run's agents running now, root first (none once the run has ended). */
async function running(store: PostgresRunStore, runId: string, live?: readonly string[]): Promise<string[]> {
  if (!(await rootRuns(store, runId))) return [];
  return ['root', ...(live ?? (await store.liveSubAgents(runId)))];
}

async function rootRuns(store: PostgresRunStore, runId: string): Promise<boolean> {
  const status = (await store.getRun(runId))?.status;
  return status === 'running' || status === 'waiting' || status === 'interrupted';
}

/** `root/a/b` → `root/a`, `root/a/b`: the sub-agents whose spawns decide which job runs it. */
function lineageOf(agent: string): string[] {
  const parts = agent.split('/');
  return parts.slice(1).map((_, i) => parts.slice(0, i + 2).join('/'));
}
