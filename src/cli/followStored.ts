import type PgBoss from 'pg-boss';
import { finalAssistantText } from '../engine/history.js';
import { describeError } from '../engine/model/errors.js';
import type { ApprovalAnswer } from '../engine/approvals.js';
import { estimateCost } from '../engine/pricing.js';
import { RunError } from '../run/durableRun.js';
import { DEFAULTS } from '../session/options.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import { restoreRun } from '../store/restoreRun.js';
import { recordApproval, waitingCalls } from '../store/runApprovals.js';
import type { RunRow } from '../store/runStore.js';
import { JournalTraceStream } from '../watch/trace/fromJournal.js';
import { askApproval } from './approvalPrompt.js';
import { JournalProgress } from './journalProgress.js';
import type { CliUi } from './liveUi.js';
import { ProgressBoard } from './progress.js';
import { targetFlags, type PostgresTarget } from './runChecks.js';
import { budgetLine, listWaiting, storedTotals, writeSummary } from './runEnding.js';
import { EXIT, type RunIo } from './runIo.js';
import type { CliRunRecord } from './runRecord.js';
import { defaultLogDir } from './runSession.js';
import { TerminalInput } from './terminalInput.js';

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

/**
 * Steering a run the workers run: the lines typed (on a terminal, or from stdin with `--steer`) go
 * to the run's worker through the store, and what it said comes back the same way.
 */
class StoredSteering {
  /** What the person types, read as a run here reads it; the approval questions share it. Undefined without a terminal or `--steer`. */
  readonly input: TerminalInput | undefined;
  /** Lines sent whose answer is not shown yet. */
  private readonly sent = new Set<number>();
  /** One at a time, in the order typed: the worker acts on lines in the order the store numbered them. */
  private sending: Promise<void> = Promise.resolve();
  /** A spread run's steering queues jobs: a queue opened on the first line, stopped at the end. */
  private boss: Promise<PgBoss> | undefined;

  constructor(
    private readonly store: PostgresRunStore,
    private readonly id: string,
    private readonly db: string,
    private readonly board: ProgressBoard,
    io: RunIo,
    { onTerminal, steer, spread }: { readonly onTerminal: boolean; readonly steer: boolean; readonly spread: boolean },
  ) {
    this.input =
      io.stdin && (onTerminal || steer)
        ? new TerminalInput({
            input: io.stdin,
            output: io.stderr,
            terminal: onTerminal,
            onCommand: (line) => this.send(line, spread),
            onRefused: (answer) => board.print(answer),
            onCommandOpen: () => board.pause(),
            onCommandClose: () => board.resume(),
            // Raw mode keeps Ctrl-C from the terminal's signal: raised here as the terminal would.
            onInterrupt: () => process.kill(process.pid, 'SIGINT'),
          })
        : undefined;
  }

  private send(line: string, spread: boolean): void {
    const { store, id, board } = this;
    if (line.trim() === '') return;
    if (spread) {
      // Acted on through the store at once, wherever the agent runs or waits (`steerSpreadRun`).
      this.sending = this.sending.then(async () => {
        try {
          const { steerSpreadRun } = await import('../workers/spreadSteering.js');
          for (const answer of await steerSpreadRun(store, await this.steeringBoss(), id, line)) board.print(answer);
        } catch (error) {
          board.print(`exarch: the line was not sent to the run: ${describeError(error)}`);
        }
      });
      return;
    }
    this.sending = this.sending.then(() =>
      store.sendCommand(id, line).then(
        (number) => void this.sent.add(number),
        (error: unknown) => board.print(`exarch: the line was not sent to the run: ${describeError(error)}`),
      ),
    );
  }

  private steeringBoss(): Promise<PgBoss> {
    this.boss ??= import('../workers/runQueue.js').then(({ startBoss }) => startBoss(this.db));
    return this.boss;
  }

  /** Prints the worker's answers to the lines sent, as they have come back. */
  async showAnswers(): Promise<void> {
    for (const { seq: number, answer } of await this.store.answers([...this.sent])) {
      this.sent.delete(number);
      for (const line of answer.split('\n')) this.board.print(line);
    }
  }

  /** Once the run has stopped: the lines being sent are in, the answers given shown, and the lines no worker took withdrawn (how many). */
  async settle(): Promise<number> {
    // Lines still being sent, and answers given as the run ended, are in by now.
    await this.sending;
    await this.showAnswers();
    return this.store.withdrawCommands([...this.sent]);
  }

  /** Waits for the lines being sent, and stops the steering queue if one was opened. */
  async finish(): Promise<void> {
    await this.sending;
    if (this.boss) await (await this.boss).stop({ graceful: false, wait: true });
  }
}

/**
 * How a run followed from the store ends once its worker set its last status, as a run here ends:
 * the summary, then the calls that wait (exit 4), the failure, or the root's answer on stdout with
 * the budget's and the step cap's lines.
 */
async function storedEnding(
  store: PostgresRunStore,
  id: string,
  run: RunRow,
  record: CliRunRecord,
  board: ProgressBoard,
  target: string,
  io: RunIo,
): Promise<number> {
  const { model, maxSteps } = record;
  const stored = await storedTotals(store, id);
  const totals = board.totals();
  const logDir = record.logDir ?? defaultLogDir(run.cwd, run.startedAt);
  const summary = (): void =>
    writeSummary(
      io.stderr,
      stored ? { ...totals, agents: stored.agents, steps: stored.requests, usage: stored.usage } : totals,
      model,
      `${logDir} (on the workers)`,
    );
  if (run.status === 'waiting') {
    summary();
    const calls = await waitingCalls(store, id);
    listWaiting(
      io.stderr,
      id,
      calls.map((call) => ({ callId: call.callId, tool: call.tool, agent: call.agent, input: call.input })),
      target,
      true,
    );
    return EXIT.waiting;
  }
  const restored = restoreRun(await store.journal(id));
  const messages = restored.kind === 'ended' || restored.kind === 'settled' ? restored.messages : restored.kind === 'resumable' ? restored.root.messages : [];
  if (run.status === 'failed') {
    summary();
    io.stderr.write(`exarch: the root agent failed: ${(restored.kind === 'ended' ? restored.result.reason : undefined) ?? 'unknown reason'}\n`);
    return EXIT.fatal;
  }
  const text = finalAssistantText(messages);
  if (text) io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  summary();
  // The budget's meter was on the worker; what it counted, the journal's usage says.
  const usage = stored?.usage ?? totals.usage;
  const tokens = usage.inputTokens + usage.outputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens;
  const cost = estimateCost(model, usage) ?? 0;
  if ((record.maxTokens !== undefined && tokens >= record.maxTokens) || (record.maxCost !== undefined && cost >= record.maxCost)) {
    io.stderr.write(budgetLine(tokens, cost, run.status === 'capped'));
    if (run.status === 'capped') return EXIT.capped;
  }
  if (run.status === 'capped') {
    io.stderr.write(`exarch: the root agent stopped at its step cap (${maxSteps ?? DEFAULTS.maxSteps} model requests in one turn)\n`);
    return EXIT.capped;
  }
  return EXIT.ok;
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
 * Asks about each call of a stopped run that waits and was not asked about before, and records
 * each answer in the store as `exarch approve|deny` would. Returns how many answers it recorded,
 * once no call waits any more; undefined if stdin closed first, or a call still waits that was
 * asked about (the store refused its answer, and said why).
 */
/**
 * The run's row, its status as a person sees it: a spread run (`approvals`: with an approval
 * policy) is `waiting` once nothing in it can move without an answer, though no worker stopped it.
 */
async function statusOf(store: PostgresRunStore, id: string, approvals: boolean): Promise<RunRow | undefined> {
  const run = await store.getRun(id);
  if (run?.status !== 'running' || !approvals || !(await store.spreadWaiting(id))) return run;
  return { ...run, status: 'waiting' };
}

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
