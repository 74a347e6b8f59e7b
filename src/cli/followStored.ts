import type { ApprovalAnswer } from '../engine/approvals.js';
import { RunError } from '../run/durableRun.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import { recordApproval, waitingCalls } from '../store/runApprovals.js';
import type { RunRow } from '../store/runStore.js';
import { JournalTraceStream } from '../watch/trace/fromJournal.js';
import { askApproval } from './approvalPrompt.js';
import { JournalProgress } from './journalProgress.js';
import type { CliUi } from './liveUi.js';
import { ProgressBoard } from './progress.js';
import { targetFlags, type PostgresTarget } from './runChecks.js';
import { EXIT, type RunIo } from './runIo.js';
import type { CliRunRecord } from './runRecord.js';
import { storedEnding } from './storedEnding.js';
import { StoredSteering } from './storedSteering.js';
import type { TerminalInput } from './terminalInput.js';

/** How often a follower reads the store for what the workers did. */
const FOLLOW_POLL_MS = 200;

/**
 * Follows a run the workers run, from its journal in the store: the same progress on stderr as a
 * run here (fed by `JournalTraceStream` as each poll brings new records), then the root's answer
 * on stdout, the summary and the exit code a run here would end with. A run that stops `waiting`
 * is asked about at the terminal (stdin and stderr, without `--no-wait`): each waiting call once,
 * the answers recorded as `exarch approve` would, then the run queued again and followed on.
 * Without a terminal it lists its calls with the commands that answer them (exit 4). A worker has
 * no one to ask, so the questions come once the run has done all it could without the answers.
 * Steering lines (read as a run here reads them) go to the run's worker through the store, and its
 * answers are printed as they come back. Ctrl-C stops following only.
 */
export async function followStored(
  store: PostgresRunStore,
  id: string,
  record: CliRunRecord,
  where: PostgresTarget,
  { noWait, steer, spread }: { readonly noWait: boolean; readonly steer: boolean; readonly spread: boolean },
  io: RunIo,
  ui?: CliUi,
): Promise<number> {
  const color = io.stderr.isTTY === true && !io.env['NO_COLOR'] && !io.env['CI'];
  const board = new ProgressBoard({ out: io.stderr, live: color, color });
  const progress = new JournalProgress(board);
  const trace = new JournalTraceStream(`exarch run ${id}`, (record) => {
    progress.onRecord(record);
    ui?.onRecord(record);
    if (record.kind === 'event' && record.type === 'resume') board.print(`exarch: run ${id} taken up again by a worker`);
  });
  let seq = 0;
  const read = async (): Promise<void> => {
    const rows = await store.journalAfter(id, seq);
    seq = rows.at(-1)?.seq ?? seq;
    trace.push(rows);
  };
  const { db } = where;
  const target = targetFlags(where);
  const onTerminal = io.stdin?.isTTY === true && io.stderr.isTTY === true;
  let ask = !noWait && onTerminal;
  const steering = new StoredSteering(store, id, db, board, io, { onTerminal, steer, spread });
  const terminal = steering.input;
  terminal?.start();
  const closeTerminal = (): void => terminal?.close();
  io.interrupt.addEventListener('abort', closeTerminal, { once: true });
  /** Calls asked about (each once); the journal's last seq when the questions were last gone through. */
  const asked = new Set<string>();
  let answeredAt: number | undefined;
  try {
    for (;;) {
      if (io.interrupt.aborted) {
        board.stop();
        io.stderr.write(`exarch: stopped following run ${id}; it goes on on the workers (exarch runs${target}, exarch view ${id}${target})\n`);
        return EXIT.interrupted;
      }
      await read();
      await steering.showAnswers();
      const run = await statusOf(store, id, spread && record.approve !== undefined);
      // Waiting, on a terminal: asked about once the journal has moved since the questions were
      // last gone through (a worker took the run and stopped again; reading the whole journal on
      // every poll would cost a long run dearly).
      if (run?.status === 'waiting' && ask && terminal && answeredAt !== seq) {
        // A spread run's answer wakes the session that asked, in the answer's own transaction.
        const answerCall = spread
          ? async (answer: ApprovalAnswer) => (await import('../workers/spreadApprovals.js')).recordSpreadApprovalAt(db, id, answer)
          : (answer: ApprovalAnswer) => recordApproval(store, id, answer);
        const answered = await answerWaiting(store, id, terminal, board, io.stderr, asked, answerCall);
        if (io.interrupt.aborted) continue;
        // Input ended, or a call the store would not take an answer for: listed below as without a terminal.
        if (answered === undefined) ask = false;
        else {
          // The approvals just appended are part of the journal the next poll reads.
          answeredAt = seq + answered;
          if (answered > 0 && spread) board.print(`exarch: run ${id} answered; the sessions that asked go on on the workers`);
          else if (answered > 0) {
            // Loaded only here, as for `exarch approve --db`.
            const { requeueRun } = await import('../workers/runQueue.js');
            await requeueRun(db, id);
            board.print(`exarch: run ${id} answered; queued for the workers again`);
          }
        }
      }
      if (run?.status === 'waiting' && ask && terminal) {
        await pause(FOLLOW_POLL_MS, io.interrupt);
        continue;
      }
      if (run && (run.status === 'done' || run.status === 'capped' || run.status === 'failed' || run.status === 'waiting')) {
        // Everything its worker wrote is in by the time it set the status.
        await read();
        const withdrawn = await steering.settle();
        trace.end();
        ui?.end();
        board.stop();
        if (withdrawn > 0)
          io.stderr.write(`exarch: ${withdrawn} steering line${withdrawn === 1 ? ' was' : 's were'} not taken before the run stopped (withdrawn)\n`);
        return await storedEnding(store, id, run, record, board, target, io);
      }
      await pause(FOLLOW_POLL_MS, io.interrupt);
    }
  } finally {
    io.interrupt.removeEventListener('abort', closeTerminal);
    terminal?.close();
    board.stop();
    await steering.finish();
  }
}

/** Waits `ms`, or less if `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The run's row, its status as a person sees it: a spread run (`approvals`: with an approval
 * policy) is `waiting` once nothing in it can move without an answer, though no worker stopped it.
 */
async function statusOf(store: PostgresRunStore, id: string, approvals: boolean): Promise<RunRow | undefined> {
  const run = await store.getRun(id);
  if (run?.status !== 'running' || !approvals || !(await store.spreadWaiting(id))) return run;
  return { ...run, status: 'waiting' };
}

/**
 * Asks about each call of a stopped run that waits and was not asked about before, and records
 * each answer in the store as `exarch approve|deny` would. Returns how many answers it recorded,
 * once no call waits any more; undefined if stdin closed first, or a call still waits that was
 * asked about (the store refused its answer, and said why).
 */
async function answerWaiting(
  store: PostgresRunStore,
  id: string,
  terminal: TerminalInput,
  board: ProgressBoard,
  out: NodeJS.WritableStream,
  asked: Set<string>,
  answerCall: (answer: ApprovalAnswer) => Promise<unknown>,
): Promise<number | undefined> {
  const calls = (await waitingCalls(store, id)).filter((call) => !asked.has(call.callId));
  let recorded = 0;
  if (calls.length > 0) {
    board.pause();
    try {
      for (const call of calls) {
        const answer = await askApproval(terminal, out, { callId: call.callId, tool: call.tool, input: call.input, agentId: call.agent, task: call.task });
        if (answer === undefined) return undefined;
        asked.add(call.callId);
        try {
          await answerCall(answer);
          recorded++;
        } catch (error) {
          // Answered meanwhile with `exarch approve`, or the run taken up: the store says which.
          if (!(error instanceof RunError)) throw error;
          out.write(`exarch: ${error.message}\n`);
        }
      }
    } finally {
      board.resume();
    }
  }
  return (await waitingCalls(store, id)).length === 0 ? recorded : undefined;
}
