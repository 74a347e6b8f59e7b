import type { ApprovalDecision } from '../approvals.js';
import { RunError } from '../store/durableRun.js';
import { recordApproval } from '../store/runApprovals.js';
import { EXIT } from './run.js';
import { openExistingStore } from './storeTarget.js';

export interface ApproveIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly cwd: string;
}

/**
 * `exarch approve RUN_ID CALL_ID [--always]` and `exarch deny RUN_ID CALL_ID ["reason"]`: record a
 * person's answer to a call a stopped run waits on. Nothing runs: `exarch resume` takes it up.
 */
export async function answerCommand(
  runId: string,
  callId: string,
  answer: { readonly decision: ApprovalDecision; readonly reason?: string },
  storeFile: string | undefined,
  io: ApproveIo,
): Promise<number> {
  const store = await openExistingStore(io.cwd, storeFile === undefined ? {} : { store: storeFile });
  if (!store) {
    io.stderr.write(`exarch: no run ${runId} (there is no run store here yet)\n`);
    return EXIT.fatal;
  }
  try {
    const call = await recordApproval(store, runId, { callId, ...answer });
    const what = answer.decision === 'deny' ? 'denied' : answer.decision === 'always' ? `approved, with every later ${call.tool} call of the run,` : 'approved';
    const resume = `exarch resume ${runId}${storeFile === undefined ? '' : ` --store ${storeFile}`}`;
    io.stderr.write(`exarch: ${call.tool} call ${callId} of ${call.agent} ${what}; it takes effect when the run continues: ${resume}\n`);
    return EXIT.ok;
  } catch (error) {
    if (!(error instanceof RunError)) throw error;
    io.stderr.write(`exarch: ${error.message}\n`);
    return EXIT.fatal;
  } finally {
    store.close();
  }
}
