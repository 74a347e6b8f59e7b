import type { ApprovalDecision } from '../engine/approvals.js';
import { RunError } from '../run/durableRun.js';
import { recordApproval, waitingCalls } from '../store/runApprovals.js';
import { targetFlags } from './runChecks.js';
import { EXIT } from './runIo.js';
import { openExistingStore, storeName, type StoreTarget } from './storeTarget.js';

export interface ApproveIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly cwd: string;
}

/**
 * `exarch approve RUN_ID CALL_ID [--always]` and `exarch deny RUN_ID CALL_ID ["reason"]`: record a
 * person's answer to a call a stopped run waits on. Nothing runs here: `exarch resume` takes it
 * up. With `--db`, once no call of the run waits any more, the run is queued again and a worker
 * continues it (or `exarch resume --db` here, whichever comes first); a spread run's answer wakes
 * the session that asked at once, on a worker (`recordSpreadApproval`).
 */
export async function answerCommand(
  runId: string,
  callId: string,
  answer: { readonly decision: ApprovalDecision; readonly reason?: string },
  target: StoreTarget,
  io: ApproveIo,
): Promise<number> {
  const store = await openExistingStore(io.cwd, target);
  if (!store) {
    io.stderr.write(`exarch: no run ${runId} in ${storeName(io.cwd, target)} (there is no run store there yet)\n`);
    return EXIT.fatal;
  }
  try {
    // A spread run's sessions are held one by one: the answer wakes the one that asked, in its own transaction.
    const spreadDb = target.db !== undefined && (await store.getRun(runId))?.options['spread'] === true ? target.db : undefined;
    const call =
      spreadDb === undefined
        ? await recordApproval(store, runId, { callId, ...answer })
        : await (await import('../workers/spreadApprovals.js')).recordSpreadApprovalAt(spreadDb, runId, { callId, ...answer });
    const what = answer.decision === 'deny' ? 'denied' : answer.decision === 'always' ? `approved, with every later ${call.tool} call of the run,` : 'approved';
    const resume = `exarch resume ${runId}${targetFlags(target)}`;
    const left = spreadDb === undefined ? (await waitingCalls(store, runId)).length : 0;
    let next: string;
    // With calls still waiting, a worker would only stop again: the run is queued once all are answered.
    if (spreadDb !== undefined) next = `the agent that asked goes on on the workers (follow it with exarch runs${targetFlags(target)})`;
    else if (left > 0)
      next = `it takes effect when the run continues (${left} other call${left === 1 ? ' still waits' : 's still wait'}${target.db === undefined ? '' : '; the workers continue it once all are answered'}): ${resume}`;
    else if (target.db === undefined) next = `it takes effect when the run continues: ${resume}`;
    else {
      // Loaded only here: an answer in a SQLite store never pays for pg-boss.
      const { requeueRun } = await import('../workers/runQueue.js');
      await requeueRun(target.db, runId);
      next = `no call of the run waits any more: it is queued for the workers (or continue it here: ${resume})`;
    }
    io.stderr.write(`exarch: ${call.tool} call ${callId} of ${call.agent} ${what}; ${next}\n`);
    return EXIT.ok;
  } catch (error) {
    if (!(error instanceof RunError)) throw error;
    io.stderr.write(`exarch: ${error.message}\n`);
    return EXIT.fatal;
  } finally {
    await store.close();
  }
}
