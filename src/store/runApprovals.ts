import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { ApprovalAnswer } from '../engine/approvals.js';
import { restoreRun } from './restoreRun.js';
import type { JournalRecord } from '../engine/log/journalRecord.js';
import type { RestoredSession } from './restoredSession.js';
import type { JournalRow, RunStatus, RunStore } from './runStore.js';
import { RunError } from './runError.js';

/** A call of a stopped run that waits for a person, as its journal holds it. */
export interface WaitingCall {
  readonly callId: string;
  readonly tool: string;
  readonly input: Readonly<Record<string, unknown>>;
  /** The id of the agent whose call it is (`root/lead/scribe`). */
  readonly agent: string;
  /** That agent's task (the root's: the run's). */
  readonly task: string;
}

/** Calls of a run (not running now) that wait for approval, in tree order. */
export async function waitingCalls(store: RunStore, runId: string): Promise<WaitingCall[]> {
  const [rows, run] = await Promise.all([store.journal(runId), store.getRun(runId)]);
  return waitingCallsIn(rows, run?.task ?? '');
}

/** The calls a run's journal (`rows`, all of it) leaves waiting for approval, in tree order; `task`: the run's. */
export function waitingCallsIn(rows: readonly JournalRow[], task: string): WaitingCall[] {
  const restored = restoreRun(rows);
  return restored.kind === 'resumable' ? callsOf(restored.root, task) : [];
}

function callsOf(session: RestoredSession, task: string): WaitingCall[] {
  const out: WaitingCall[] = [];
  const batch = session.batch;
  if (session.state === 'awaitingApproval' && batch) {
    for (const callId of batch.awaiting ?? []) {
      const block = batch.content.find((b) => b.type === 'tool_use' && b.id === callId);
      if (block?.type === 'tool_use') out.push({ callId, tool: block.name, input: block.input, agent: session.agent.id, task });
    }
  }
  for (const child of session.children) if (child.restore) out.push(...callsOf(child.restore, child.task));
  return out;
}

/**
 * Records a person's answer to a waiting call of a stopped run (`exarch approve|deny`): nothing
 * runs now; the next resume takes the answer up. The run must not be held by a live process.
 * Throws `RunError` for an unknown run, a run held elsewhere, or a call that does not wait.
 */
export async function recordApproval(store: RunStore, runId: string, answer: ApprovalAnswer): Promise<WaitingCall> {
  const row = await store.getRun(runId);
  if (!row) throw new RunError(`no run with id ${runId}`, 'unknown-run', runId);
  // Its sessions are held one by one, by the workers: `recordSpreadApproval` answers there.
  if (row.options['spread'] === true) throw new RunError(`run ${runId} is spread over workers: answer it with exarch approve --db`, 'spread', runId);
  const owner = { host: hostname(), pid: process.pid, token: randomUUID() };
  const claim = await store.claim(runId, owner, 30_000);
  if (!claim.ok)
    throw new RunError(
      `run ${runId} is being run by process ${claim.holder.pid} on ${claim.holder.host}; answer in its terminal, or once it has stopped`,
      'held',
      runId,
    );
  // A run whose process died while `running` is `interrupted` (as `exarch runs` shows it).
  const status: RunStatus = row.status === 'running' ? 'interrupted' : row.status;
  try {
    const rows = await store.journal(runId);
    const { call, record } = answering(waitingCallsIn(rows, row.task), runId, answer);
    await store.append([{ runId, seq: (rows.at(-1)?.seq ?? 0) + 1, session: call.agent, ts: Date.now(), record }]);
    return call;
  } finally {
    await store.release(runId, owner, status);
  }
}

/**
 * The waiting call `answer` names, and the `approval` record that answers it; throws `RunError`
 * (`not-waiting`, naming the calls that do wait) when no such call waits.
 */
export function answering(
  waiting: readonly WaitingCall[],
  runId: string,
  answer: ApprovalAnswer,
): { readonly call: WaitingCall; readonly record: Extract<JournalRecord, { type: 'approval' }> } {
  const call = waiting.find((c) => c.callId === answer.callId);
  if (!call) {
    const which = waiting.length === 0 ? 'no call of it waits for approval' : `the calls waiting are ${waiting.map((c) => c.callId).join(', ')}`;
    throw new RunError(`call ${answer.callId} of run ${runId} does not wait for approval (${which})`, 'not-waiting', runId);
  }
  const reason = answer.reason === undefined || answer.reason.trim() === '' ? {} : { reason: answer.reason.trim() };
  return { call, record: { type: 'approval', callId: call.callId, tool: call.tool, decision: answer.decision, ...reason } };
}
