import { DEFAULTS } from '../session/options.js';
import { describeError } from '../engine/model/errors.js';
import { createSessionActor, isSettled, runResultOf, waitForSettled, type RunResult, type SessionActor } from '../run/runtime.js';
import { newRunId, resumeRun, RunError, startRun, type DurableSessionInput, type FinishedRun } from '../run/durableRun.js';
import type { RunRow, RunStore, RunSummary } from '../store/runStore.js';
import { finalAssistantText } from '../engine/history.js';
import { restoreRun } from '../store/restoreRun.js';
import type { Submission } from '../workers/runQueue.js';
import { checkStoreApart, checkTarget, openExistingStore, openStore, storeName, StoreTargetError, type StoreTarget } from './storeTarget.js';
import { redactUrl } from '../engine/urlSecrets.js';
import { agentsSource } from './agentsConfig.js';
import type { Provider } from '../engine/types.js';
import { RunObserver } from '../watch/observe/runObserver.js';
import type { InspectionEvent } from 'xstate';
import { TraceRecorder } from '../watch/trace/recorder.js';
import { OtelRunExporter } from '../watch/otel/otelExporter.js';
import type { OtlpExport } from './otlpExport.js';
import { respond, type ApprovalAnswer, type ApprovalRequest } from '../engine/approvals.js';
import { ApprovalStop } from '../engine/approvalStop.js';
import { ApprovalPrompt, askApproval } from './approvalPrompt.js';
import { steeringCommand } from './steeringCommands.js';
import { TerminalInput } from './terminalInput.js';
import { clip } from '../engine/render.js';
import { estimateCost } from '../engine/pricing.js';
import { agentSpendLines } from './agentSpend.js';
import { formatCount, ProgressBoard } from './progress.js';
import { CliUi } from './liveUi.js';
import { checkApproveNames, readRecord, recordFromFlags, storedRecord, type CliRunRecord, type RecordedFlags } from './runRecord.js';
import { buildRunSession, defaultLogDir, runToolsOf, type RunSession } from './runSession.js';
import { JournalProgress } from './journalProgress.js';
import { JournalTraceStream } from '../watch/trace/fromJournal.js';
import { recordApproval, waitingCalls } from '../store/runApprovals.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import type PgBoss from 'pg-boss';
import { UsageError } from './usageError.js';
import { checkSeal, sealingStore, sealRefusal } from './recordSeal.js';
import { runKey, runKeyFile } from './runKey.js';
import { SqliteRunStore } from '../store/sqliteStore.js';
import { resolve } from 'node:path';
import { WriteFaults } from './writeFaults.js';

/** `unwritable`: the run was stopped because a file it writes (a log, the trace, the recording, the store) could not be written; resumable once there is room. */
export const EXIT = { ok: 0, fatal: 1, usage: 2, capped: 3, waiting: 4, unwritable: 5, interrupted: 130 } as const;

export { UsageError } from './usageError.js';
export { RunSetupError } from './runSession.js';

export interface RunFlags extends RecordedFlags {
  readonly trace?: string;
  /** The run store file (default .exarch/exarch.db under the working directory). */
  readonly store?: string;
  /** A PostgreSQL run store (`postgres://…`) instead of the file. */
  readonly db?: string;
  /** `db` came from `EXARCH_DB_URL` (see `StoreTarget`). */
  readonly dbFromEnv?: boolean;
  /** Run without recording (no resume). */
  readonly noStore?: boolean;
  /** With `db`: print the run id and return once the run is queued, rather than follow it. */
  readonly detach?: boolean;
  /** With --db: each sub-agent a job of its own (`spread` in the run's record). */
  readonly spread?: boolean;
  /** Never ask at the terminal: stop as `waiting` (exit 4) once only approvals are left. */
  readonly noWait?: boolean;
  /** Read steering commands (`/cancel PATH`, `/msg PATH TEXT`, `/help`) from stdin, one a line, even when it is no terminal. */
  readonly steer?: boolean;
  /** Send the run's spans to the OTLP/HTTP collector at `OTEL_EXPORTER_OTLP_ENDPOINT` (see otlpExport.ts). */
  readonly otel?: boolean;
  /** Keep every model exchange in this file (src/replay/). */
  readonly record?: string;
  /** Answer from this recording instead of Claude: offline, no key. */
  readonly replay?: string;
  /** Serve the turn-flow viewer live while the run goes (see liveUi.ts), on `uiPort` if given. */
  readonly ui?: boolean;
  readonly uiPort?: string;
}

export interface RunIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Aborted on SIGINT: the tree is cancelled, pending calls answered, logs flushed. */
  readonly interrupt: AbortSignal;
  /** Where approvals are asked inline (a terminal); without one, a run with waiting calls stops as `waiting`. */
  readonly stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
  /** For tests: a provider instead of Claude. */
  readonly provider?: Provider;
  /** Another inspection observer (the live inspector). */
  readonly inspect?: (event: InspectionEvent) => void;
}

/** `--ui-port N`: a port number, given with `--ui`. */
export function uiPort(ui: boolean, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!ui) throw new UsageError('--ui-port needs --ui');
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port < 1 || port > 65535) throw new UsageError(`--ui-port must be a port number, got '${raw}'`);
  return port;
}

/**
 * `exarch run "<task>"` (CONTRACT §7): the root works on the task with Claude until it settles.
 * stdout gets the root's final answer only; stderr gets progress, the summary and errors. The run
 * is recorded in the run store (unless `--no-store`) and its id printed first, so that
 * `exarch resume` can take it up again after a crash or Ctrl-C.
 */
export async function runCommand(task: string, flags: RunFlags, io: RunIo): Promise<number> {
  if (task.trim() === '') throw new UsageError('the task is empty');
  if (flags.noStore && (flags.store !== undefined || flags.db !== undefined))
    throw new UsageError(`--${flags.db === undefined ? 'store' : 'db'} and --no-store cannot be used together`);
  usableTarget(flags);
  if (flags.detach && flags.db === undefined) throw new UsageError('--detach needs --db: only a run queued for workers goes on without this process');
  if (flags.spread && flags.db === undefined) throw new UsageError('--spread needs --db: sub-agents are spread over the workers of a database');
  if (flags.spread) {
    // A whole-tree budget is kept by the one process that runs the tree.
    const whole = flags.maxTokens !== undefined ? 'max-tokens' : flags.maxCost !== undefined ? 'max-cost' : undefined;
    if (whole) throw new UsageError(`--spread with --${whole}: such a run runs whole on one worker; leave out --spread`);
  }
  if (flags.record !== undefined && flags.replay !== undefined) throw new UsageError('--record and --replay cannot be used together');
  const port = uiPort(flags.ui === true, flags.uiPort);
  if (flags.db !== undefined) {
    if (flags.ui && flags.detach) throw new UsageError('--ui with --detach: nothing here follows the run; view it with exarch view RUN_ID --db URL');
    if (flags.steer && flags.detach) throw new UsageError('--steer with --detach: nothing here reads the lines; follow the run to steer it');
    if (flags.otel) throw new UsageError('--otel with --db: the workers run the agents and send the spans: start them with exarch worker --otel');
    if (flags.record !== undefined || flags.replay !== undefined)
      throw new UsageError(`--${flags.record === undefined ? 'replay' : 'record'} with --db: the workers make the model requests; run it here without --db`);
  }
  // The flags validated into the run's record: what this process, a resume and a worker build the sessions from.
  const record = recordFromFlags(flags, io.env, io.cwd);
  if (!flags.noStore) storeApart(io.cwd, flags, io.cwd, record);
  if (record.allowShell === 'unsandboxed') io.stderr.write(UNSANDBOXED_WARNING);
  const agentsSourceName = agentsSource(flags.agents);
  if (flags.db !== undefined) {
    const follow = {
      detach: flags.detach === true,
      noWait: flags.noWait === true,
      steer: flags.steer === true,
      spread: flags.spread === true,
      ...(flags.ui ? { ui: port === undefined ? {} : { port } } : {}),
    };
    return submitAndFollow({ db: flags.db, dbFromEnv: flags.dbFromEnv === true }, task, record, agentsSourceName, follow, io);
  }
  const diverged = new AbortController();
  const recording = {
    ...(flags.record === undefined ? {} : { record: flags.record }),
    ...(flags.replay === undefined ? {} : { replay: flags.replay, diverged }),
  };
  // The person's key, which signs the run's record as it is stored (made on first use): a key that
  // cannot be had stops the run here, before anything starts.
  const key = flags.noStore ? undefined : runKey(io.env, true, io.cwd);
  // A log, the trace or the recording that cannot be written stops the run, resumable (writeFaults.ts).
  const faults = new WriteFaults();
  // Before anything is recorded: no key, a server that does not start, a config or --approve naming
  // a tool the run does not have, a log directory that cannot be one: one line each.
  const built = await buildRunSession(
    { cwd: io.cwd, startedAt: Date.now(), record },
    {
      env: io.env,
      stderr: io.stderr,
      ...(io.provider ? { provider: io.provider } : {}),
      recording,
      agentsSource: agentsSourceName,
      protectedPaths: ownFiles(io.cwd, flags.noStore ? undefined : flags, [flags.trace, flags.record]),
      onFileFault: faults.report,
    },
  );
  let store: RunStore | undefined;
  let ui: CliUi | undefined;
  try {
    checkApproveNames(record.approve, built.tools);
    // No endpoint, or one that is not a URL, is one line (OtelSetupError, exit 1).
    const otel = flags.otel ? await (await import('./otlpExport.js')).startOtlpExport(io.env) : undefined;
    // A store that cannot be read stops the run before anything starts (StoreError: one line, exit 1).
    store = flags.noStore ? undefined : await openStore(io.cwd, flags);
    const { model, logDir, maxSteps } = built;
    const title = `exarch run: ${task.slice(0, 80)}`;
    if (flags.ui) ui = await CliUi.start({ title, model, ...(port === undefined ? {} : { port }) }, io.stderr);
    const output = new RunOutput(io, flags.trace, title, model, logDir, maxSteps, {
      noWait: flags.noWait === true,
      target: targetFlags(flags),
      steer: flags.steer === true,
      faults,
      ...(otel ? { otel } : {}),
      ...(flags.replay === undefined ? {} : { diverged: diverged.signal }),
      ...(ui ? { ui } : {}),
    });
    const session: DurableSessionInput = { ...built.session, ...(record.approve === undefined ? {} : { onApprovalRequest: output.onApprovalRequest }) };
    if (!store) return await output.follow(localRun(task, session, output.inspect), io.interrupt);
    const id = newRunId();
    io.stderr.write(`exarch: run ${id} started\n`);
    // Stored without an --mcp URL's secrets (this process connected with them; a resume reads them
    // from ${NAME}: see storedRecord), and signed as stored: a resume checks the record before it
    // takes any power from it.
    const recorded = key !== undefined && store instanceof SqliteRunStore ? sealingStore(store, key) : store;
    const run = await startRun(task, session, {
      store: recorded,
      id,
      cwd: io.cwd,
      record: { ...storedRecord(record), logDir },
      actor: { inspect: output.inspect },
    });
    return await output.follow(run, io.interrupt, store);
  } finally {
    await store?.close();
    await built.close();
    await ui?.finish(io.interrupt);
  }
}

/** How often a follower reads the store for what the workers did. */
const FOLLOW_POLL_MS = 200;

/**
 * `exarch run --db URL "task"`: the run is recorded and queued for the workers (`exarch worker`);
 * this process then follows it from the store (`followStored`: the progress, answer and summary of
 * a run here) or, with `--detach`, prints its id and returns. Ctrl-C stops following; the run goes
 * on on the workers.
 */
async function submitAndFollow(
  target: PostgresTarget,
  task: string,
  record: CliRunRecord,
  agentsSourceName: string,
  {
    detach,
    noWait,
    steer,
    spread,
    ui: uiOptions,
  }: { readonly detach: boolean; readonly noWait: boolean; readonly steer: boolean; readonly spread: boolean; readonly ui?: { readonly port?: number } },
  io: RunIo,
): Promise<number> {
  const { db } = target;
  // The tools checked as a run here checks them (the MCP servers started once, to list theirs),
  // and their names recorded: every worker that takes the run must offer the same.
  const tools = await runToolsOf({ cwd: io.cwd, record }, { env: io.env, stderr: io.stderr, agentsSource: agentsSourceName });
  let submission: Submission;
  try {
    checkApproveNames(record.approve, tools.tools);
    const agentTypes = Object.keys(tools.agents ?? {}).sort();
    submission = {
      task,
      cwd: io.cwd,
      record: {
        ...storedRecord(record),
        tools: tools.tools.map((tool) => tool.name).sort(),
        ...(agentTypes.length > 0 ? { agentTypes } : {}),
        // Each session a job of its own, spread over the workers (docs/scaling.md).
        ...(spread ? { spread: true } : {}),
      },
    };
  } finally {
    await tools.close();
  }
  // Loaded only here: a command without --db never pays for pg and pg-boss.
  const { openPostgresStore } = await import('../store/postgresStore.js');
  const { startBoss, submitRun } = await import('../workers/runQueue.js');
  // `--ui`: the page, fed the trace records the follower makes of the journal. Started before the
  // run is queued, as a run here starts it: a port in use stops the command with nothing queued.
  const ui = uiOptions ? await CliUi.startFed(uiOptions, io.stderr) : undefined;
  const store = openPostgresStore(db);
  try {
    // The store's line (a server that cannot be reached, a password not given) before pg-boss's words.
    await store.open();
    const boss = await startBoss(db);
    let id: string;
    try {
      id = await submitRun(store, boss, submission);
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
    if (detach) {
      io.stdout.write(`${id}\n`);
      io.stderr.write(`exarch: run ${id} queued for the workers; follow it with exarch runs --db, resume or view it by id\n`);
      return EXIT.ok;
    }
    io.stderr.write(`exarch: run ${id} started (queued for the workers)\n`);
    return await followStored(store, id, record, target, { noWait, steer, spread }, io, ui);
  } finally {
    await store.close();
    await ui?.finish(io.interrupt);
  }
}

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
async function followStored(
  store: PostgresRunStore,
  id: string,
  record: CliRunRecord,
  where: PostgresTarget,
  { noWait, steer, spread }: { readonly noWait: boolean; readonly steer: boolean; readonly spread: boolean },
  io: RunIo,
  ui?: CliUi,
): Promise<number> {
  const { model, maxSteps } = record;
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
  // Steering lines typed (on a terminal, or from stdin with --steer) go to the run's worker through
  // the store; what it said comes back the same way (`sent`: lines whose answer is not shown yet).
  const sent = new Set<number>();
  // One at a time, in the order typed: the worker acts on lines in the order the store numbered them.
  let sending: Promise<void> = Promise.resolve();
  const terminal =
    io.stdin && (onTerminal || steer)
      ? new TerminalInput({
          input: io.stdin,
          output: io.stderr,
          terminal: onTerminal,
          onCommand: (line) => {
            if (line.trim() === '') return;
            if (spread) {
              // Acted on through the store at once, wherever the agent runs or waits (`steerSpreadRun`).
              sending = sending.then(async () => {
                try {
                  const { steerSpreadRun } = await import('../workers/spreadSteering.js');
                  for (const answer of await steerSpreadRun(store, await steeringBoss(), id, line)) board.print(answer);
                } catch (error) {
                  board.print(`exarch: the line was not sent to the run: ${describeError(error)}`);
                }
              });
              return;
            }
            sending = sending.then(() =>
              store.sendCommand(id, line).then(
                (number) => void sent.add(number),
                (error: unknown) => board.print(`exarch: the line was not sent to the run: ${describeError(error)}`),
              ),
            );
          },
          onRefused: (answer) => board.print(answer),
          onCommandOpen: () => board.pause(),
          onCommandClose: () => board.resume(),
          // Raw mode keeps Ctrl-C from the terminal's signal: raised here as the terminal would.
          onInterrupt: () => process.kill(process.pid, 'SIGINT'),
        })
      : undefined;
  // A spread run's steering queues jobs: a queue opened on the first line, stopped at the end.
  let boss: Promise<PgBoss> | undefined;
  const steeringBoss = (): Promise<PgBoss> => {
    boss ??= import('../workers/runQueue.js').then(({ startBoss }) => startBoss(db));
    return boss;
  };
  terminal?.start();
  const closeTerminal = (): void => terminal?.close();
  io.interrupt.addEventListener('abort', closeTerminal, { once: true });
  /** Calls asked about (each once); the journal's last seq when the questions were last gone through. */
  const asked = new Set<string>();
  let answeredAt: number | undefined;
  const showAnswers = async (): Promise<void> => {
    for (const { seq: number, answer } of await store.answers([...sent])) {
      sent.delete(number);
      for (const line of answer.split('\n')) board.print(line);
    }
  };
  try {
    for (;;) {
      if (io.interrupt.aborted) {
        board.stop();
        io.stderr.write(`exarch: stopped following run ${id}; it goes on on the workers (exarch runs${target}, exarch view ${id}${target})\n`);
        return EXIT.interrupted;
      }
      await read();
      await showAnswers();
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
        // Lines still being sent, and answers given as the run ended, are in by now.
        await sending;
        await showAnswers();
        const withdrawn = await store.withdrawCommands([...sent]);
        trace.end();
        ui?.end();
        board.stop();
        if (withdrawn > 0)
          io.stderr.write(`exarch: ${withdrawn} steering line${withdrawn === 1 ? ' was' : 's were'} not taken before the run stopped (withdrawn)\n`);
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
        const messages =
          restored.kind === 'ended' || restored.kind === 'settled' ? restored.messages : restored.kind === 'resumable' ? restored.root.messages : [];
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
      await pause(FOLLOW_POLL_MS, io.interrupt);
    }
  } finally {
    io.interrupt.removeEventListener('abort', closeTerminal);
    terminal?.close();
    board.stop();
    await sending;
    if (boss) await (await boss).stop({ graceful: false, wait: true });
  }
}

/** The run's totals as its store counted them; undefined when the store has no readable row for it. */
async function storedTotals(store: Pick<RunStore, 'listRuns'>, id: string): Promise<RunSummary | undefined> {
  const listed = (await store.listRuns()).find((r) => r.id === id);
  return listed?.status === 'unreadable' ? undefined : listed;
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

export interface ResumeFlags {
  readonly store?: string;
  readonly db?: string;
  /** `db` came from `EXARCH_DB_URL` (see `StoreTarget`). */
  readonly dbFromEnv?: boolean;
  readonly trace?: string;
  /** As for `run`: stop as `waiting` rather than ask at the terminal. */
  readonly noWait?: boolean;
  /** As for `run`: the turn-flow viewer, live. */
  readonly ui?: boolean;
  readonly uiPort?: string;
  /** As for `run`: steering commands from stdin without a terminal. */
  readonly steer?: boolean;
}

/**
 * `exarch resume RUN_ID`: takes up a run that did not finish (killed, crashed or interrupted) in
 * the run store, with the options it was started with, and ends as `exarch run` would. A run
 * spread over the workers (`--spread`) is queued again for them and followed (`requeueAndFollow`).
 */
export async function resumeCommand(runId: string, flags: ResumeFlags, io: RunIo): Promise<number> {
  usableTarget(flags);
  const port = uiPort(flags.ui === true, flags.uiPort);
  const store = await openExistingStore(io.cwd, flags);
  if (!store) {
    io.stderr.write(`exarch: no run ${runId} in ${storeName(io.cwd, flags)} (there is no run store there yet)\n`);
    return EXIT.fatal;
  }
  let built: RunSession | undefined;
  let ui: CliUi | undefined;
  try {
    const row = await store.getRun(runId);
    if (!row) {
      io.stderr.write(`exarch: no run ${runId} in ${store.file}\n`);
      return EXIT.fatal;
    }
    if (row.status !== 'running' && row.status !== 'interrupted' && row.status !== 'waiting') {
      io.stderr.write(`exarch: run ${runId} is already finished (${row.status}); nothing to resume\n`);
      return EXIT.ok;
    }
    // A record kept in the file is taken only as exarch signed it: a record that grants a shell
    // without a sandbox, an MCP command or no approvals is refused here if anyone else wrote it.
    // (One in PostgreSQL is not signed: the database's access control keeps it.)
    if (flags.db === undefined) {
      const check = checkSeal(runKey(io.env, false, row.cwd), row);
      if (check !== 'signed') {
        io.stderr.write(`exarch: ${sealRefusal(runId, check, runKeyFile(io.env))}\n`);
        return EXIT.fatal;
      }
    }
    // The sessions as the run was started, from its record: the same servers started again (their tools must be the same: see resumeRun).
    const record = readRecord(row.options);
    storeApart(io.cwd, flags, row.cwd, record);
    if (record.allowShell === 'unsandboxed') io.stderr.write(UNSANDBOXED_WARNING);
    // A spread run is taken up where it runs: its sessions queued again for the workers, and followed.
    if (row.options['spread'] === true && flags.db !== undefined)
      return await requeueAndFollow({ db: flags.db, dbFromEnv: flags.dbFromEnv === true }, row.id, record, flags, io);
    const faults = new WriteFaults();
    built = await buildRunSession(
      { id: runId, cwd: row.cwd, startedAt: row.startedAt, record },
      {
        env: io.env,
        stderr: io.stderr,
        ...(io.provider ? { provider: io.provider } : {}),
        protectedPaths: ownFiles(io.cwd, flags, [flags.trace]),
        onFileFault: faults.report,
      },
    );
    const { model, logDir, maxSteps } = built;
    const title = `exarch resume ${runId}: ${row.task.slice(0, 80)}`;
    if (flags.ui) ui = await CliUi.start({ title, model, ...(port === undefined ? {} : { port }) }, io.stderr);
    const output = new RunOutput(io, flags.trace, title, model, logDir, maxSteps, {
      noWait: flags.noWait === true,
      target: targetFlags(flags),
      steer: flags.steer === true,
      faults,
      ...(ui ? { ui } : {}),
    });
    const session: DurableSessionInput = { ...built.session, ...(record.approve === undefined ? {} : { onApprovalRequest: output.onApprovalRequest }) };
    let run: Awaited<ReturnType<typeof resumeRun>>;
    try {
      run = await resumeRun(runId, session, { store, cwd: io.cwd, actor: { inspect: output.inspect } });
    } catch (error) {
      if (!(error instanceof RunError)) throw error;
      io.stderr.write(`exarch: ${error.message}\n`);
      return EXIT.fatal;
    }
    if ('finished' in run) {
      // Its last process died after the root settled, before it said so: end as that run would have.
      io.stderr.write(`exarch: run ${runId} had finished (${run.status}) when its process stopped\n`);
      return output.ended(run);
    }
    io.stderr.write(`exarch: run ${runId} resumed\n`);
    return await output.follow(run, io.interrupt, store);
  } finally {
    await store.close();
    await built?.close();
    await ui?.finish(io.interrupt);
  }
}

/**
 * `exarch resume RUN_ID --db URL` of a spread run: every session of it that has not ended is
 * queued again (`requeueSpreadRun`: one whose job was lost or gave up is taken up by a worker from
 * its journal), then the run is followed as `run --db` follows it.
 */
async function requeueAndFollow(target: PostgresTarget, id: string, record: CliRunRecord, flags: ResumeFlags, io: RunIo): Promise<number> {
  const { db } = target;
  const { openPostgresStore } = await import('../store/postgresStore.js');
  const { startBoss } = await import('../workers/runQueue.js');
  const { requeueSpreadRun } = await import('../workers/spreadResume.js');
  const port = uiPort(flags.ui === true, flags.uiPort);
  const ui = flags.ui ? await CliUi.startFed(port === undefined ? {} : { port }, io.stderr) : undefined;
  const store = openPostgresStore(db);
  try {
    const boss = await startBoss(db);
    let queued: string[];
    try {
      queued = await requeueSpreadRun(store, boss, id);
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
    io.stderr.write(`exarch: run ${id}: ${queued.length} session${queued.length === 1 ? '' : 's'} queued again for the workers (${queued.join(', ')})\n`);
    return await followStored(store, id, record, target, { noWait: flags.noWait === true, steer: flags.steer === true, spread: true }, io, ui);
  } finally {
    await store.close();
    await ui?.finish(io.interrupt);
  }
}

/** What `run`, `resume` and a worker that takes such a run say, on stderr, of a run whose shell commands have no sandbox. */
export const UNSANDBOXED_NOTE = '--allow-shell=unsandboxed: shell commands run without a sandbox, with your full access to files, processes and network';
const UNSANDBOXED_WARNING = `exarch: ${UNSANDBOXED_NOTE}\n`;

/**
 * This process's files in the working directory that agents may not change: the SQLite store (with
 * its WAL and shared memory), unless there is none or it is a database server, and the files named.
 */
function ownFiles(cwd: string, target: StoreTarget | undefined, files: readonly (string | undefined)[]): string[] {
  const store = target === undefined || target.db !== undefined ? [] : [storeName(cwd, target)];
  return [
    ...store.flatMap((file) => [file, `${file}-wal`, `${file}-shm`]),
    ...files.filter((file): file is string => file !== undefined).map((file) => resolve(cwd, file)),
  ];
}

/** A Postgres store as a command was given it: `--db URL`, or `EXARCH_DB_URL`. */
type PostgresTarget = StoreTarget & { readonly db: string };

/**
 * `--store FILE` or `--db URL` as the commands that answer a run must be given them: '' for the
 * default store and for `EXARCH_DB_URL` (which gives it to them as well); a `--db` URL with its
 * secrets masked (the person puts back what they typed, or sets EXARCH_DB_URL).
 */
export function targetFlags(target: StoreTarget): string {
  if (target.db !== undefined) return target.dbFromEnv ? '' : ` --db ${redactUrl(target.db)}`;
  return target.store === undefined ? '' : ` --store ${target.store}`;
}

/** `--store` and `--db` checked before anything opens: a mistake in them is a usage error. */
export function usableTarget(target: { readonly store?: string; readonly db?: string }): void {
  try {
    checkTarget(target);
  } catch (error) {
    if (error instanceof StoreTargetError) throw new UsageError(error.message);
    throw error;
  }
}

/** A `--store` the run's agents could reach (`checkStoreApart`), as a usage error. */
function storeApart(cwd: string, target: StoreTarget, workdir: string, record: Pick<CliRunRecord, 'allowWrite' | 'allowShell'>): void {
  if (target.store === undefined || target.db !== undefined) return;
  const writes = record.allowWrite || record.allowShell !== false;
  try {
    checkStoreApart(storeName(cwd, target), target.store, workdir, writes);
  } catch (error) {
    if (error instanceof StoreTargetError) throw new UsageError(error.message);
    throw error;
  }
}

/** What `follow` needs of a run: durable (`startRun`, `resumeRun`) or not (`--no-store`). */
interface FollowedRun {
  readonly id?: string;
  readonly actor: SessionActor;
  readonly result: Promise<RunResult & { readonly storeError?: Error; readonly status?: string }>;
  interrupt(): void;
  /** Stops the run to wait for approvals (a durable one is then `waiting`). */
  suspend(): void;
}

/** A run that is not recorded: the root actor alone. */
function localRun(task: string, session: DurableSessionInput, inspect: (event: InspectionEvent) => void): FollowedRun {
  const actor = createSessionActor({ ...session, task }, { inspect });
  actor.start();
  const result = (async () => {
    try {
      return runResultOf(await waitForSettled(actor));
    } finally {
      actor.stop();
      // Let stopped sessions close their logs (their teardown runs on the next microtasks).
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  const cancel = (reason: string) => (): void => actor.send({ type: 'cancel', reason });
  return { actor, result, interrupt: cancel('interrupted'), suspend: cancel('waiting for approval') };
}

/** Progress, trace and the ending of `run` and `resume`: stdout answer, summary, exit code. */
class RunOutput {
  private readonly board: ProgressBoard;
  private readonly recorder: TraceRecorder | undefined;
  private readonly observer = new RunObserver();
  /** Requests that arrived before `follow` took the run (kept for it), and the handler once it has. */
  private readonly early: ApprovalRequest[] = [];
  private onRequest: ((request: ApprovalRequest) => void) | undefined;
  /** Checks, once per turn of the event loop, whether only approvals are left (see `follow`). */
  private watch: (() => void) | undefined;
  /** `--otel`: the run's spans, and where they go. */
  private readonly spans: OtelRunExporter | undefined;

  constructor(
    private readonly io: RunIo,
    trace: string | undefined,
    title: string,
    private readonly model: string,
    private readonly logDir: string,
    private readonly maxSteps: number | undefined,
    private readonly approvals: {
      readonly noWait: boolean;
      readonly target: string;
      readonly steer: boolean;
      /** Where the run's files report a write that failed; the first stops the run (writeFaults.ts). */
      readonly faults: WriteFaults;
      readonly otel?: OtlpExport;
      readonly diverged?: AbortSignal;
      readonly ui?: CliUi;
    },
  ) {
    const color = io.stderr.isTTY === true && !io.env['NO_COLOR'] && !io.env['CI'];
    this.board = new ProgressBoard({ out: io.stderr, live: color, color });
    this.recorder = trace === undefined ? undefined : new TraceRecorder({ file: trace, title, model, onFault: approvals.faults.report });
    // One observer decodes the run for all of them.
    this.observer.subscribe(this.board.onEvent);
    if (this.recorder) this.observer.subscribe(this.recorder.onEvent);
    const otel = approvals.otel;
    this.spans = otel ? new OtelRunExporter({ tracer: otel.tracer, captureContent: otel.captureContent }) : undefined;
    if (this.spans) this.observer.subscribe(this.spans.onEvent);
    if (approvals.ui) this.observer.subscribe(approvals.ui.onEvent);
  }

  /** The root's `onApprovalRequest`. */
  readonly onApprovalRequest = (request: ApprovalRequest): void => {
    if (this.onRequest) this.onRequest(request);
    else this.early.push(request);
  };

  readonly inspect = (event: InspectionEvent): void => {
    this.watch?.();
    this.observer.inspect(event);
    this.io.inspect?.(event);
  };

  /** The ending of a run whose root had settled before its process stopped: stdout answer and exit code, no summary of work done now. */
  ended(run: FinishedRun): number {
    const { io } = this;
    if (run.status === 'failed') {
      io.stderr.write(`exarch: the root agent failed: ${run.reason ?? 'unknown reason'}\n`);
      return EXIT.fatal;
    }
    if (run.status === 'interrupted') {
      io.stderr.write('exarch: the root agent had been cancelled\n');
      return EXIT.interrupted;
    }
    if (run.text) io.stdout.write(run.text.endsWith('\n') ? run.text : `${run.text}\n`);
    if (run.status === 'capped') {
      io.stderr.write(`exarch: the root agent stopped at its step cap (${this.maxSteps ?? DEFAULTS.maxSteps} model requests in one turn)\n`);
      return EXIT.capped;
    }
    return EXIT.ok;
  }

  /**
   * What the person types: on a terminal (stdin and stderr), or from stdin with `--steer`, steering
   * command lines are read from the start (see `steeringCommand`); the approval questions share the
   * reader. Undefined without a terminal or `--steer`.
   */
  private takeInput(run: FollowedRun): TerminalInput | undefined {
    const { io, board } = this;
    const terminal = io.stdin?.isTTY === true && io.stderr.isTTY === true;
    if (!io.stdin || (!terminal && !this.approvals.steer)) return undefined;
    const input = new TerminalInput({
      input: io.stdin,
      output: io.stderr,
      terminal,
      onCommand: (line) => {
        for (const said of steeringCommand(line, run.actor)) board.print(said);
      },
      onRefused: (answer) => board.print(answer),
      onCommandOpen: () => board.pause(),
      onCommandClose: () => board.resume(),
      // Raw mode keeps Ctrl-C from the terminal's signal: raised here as the terminal would.
      onInterrupt: () => process.kill(process.pid, 'SIGINT'),
    });
    input.start();
    return input;
  }

  /**
   * On a terminal (stdin and stderr), and without `--no-wait`, each call that waits for approval is
   * asked inline, one at a time. Otherwise the run goes on until nothing in the tree can move
   * without a person, then stops as `waiting` with the calls listed (exit 4).
   */
  private takeApprovals(run: FollowedRun, input: TerminalInput | undefined): TakenApprovals {
    const { io, board } = this;
    let waiting: readonly ApprovalRequest[] = [];
    let close = (): void => undefined;
    const inline = !this.approvals.noWait && io.stdin?.isTTY === true && io.stderr.isTTY === true;
    // (On a terminal the input is always taken: `takeInput`.)
    if (inline && input) {
      const prompt = new ApprovalPrompt(input, io.stderr, board, (answer) => respond(run.actor, answer));
      this.onRequest = prompt.request;
      close = () => prompt.close();
    } else {
      const stop = new ApprovalStop();
      stop.watch(run);
      waiting = stop.waiting;
      this.watch = stop.inspect;
      this.onRequest = stop.inspect;
      close = () => {
        stop.close();
        this.watch = undefined;
      };
    }
    for (const request of this.early.splice(0)) this.onRequest?.(request);
    return {
      waiting,
      close: () => {
        close();
        this.onRequest = undefined;
      },
    };
  }

  async follow(run: FollowedRun, interrupt: AbortSignal, store?: RunStore): Promise<number> {
    const { io, board, recorder } = this;
    let interrupted = false;
    const onInterrupt = (): void => {
      interrupted = true;
      run.interrupt();
    };
    interrupt.addEventListener('abort', onInterrupt, { once: true });
    // Ctrl-C while the run was being set up (MCP servers starting): an aborted signal fires no event.
    if (interrupt.aborted) onInterrupt();
    // --replay: a request that differs from the recording ends the run; nothing after it would be the recorded run.
    const diverged = this.approvals.diverged;
    const onDiverged = (): void => queueMicrotask(() => run.interrupt());
    diverged?.addEventListener('abort', onDiverged, { once: true });
    // A file that cannot be written stops the run as an interrupt does (a microtask later: a fault
    // may be met inside the write of a session's own record), unless it has settled already (a
    // log written as the root's last turn ends): that run is done, and is not made to look stopped.
    this.approvals.faults.onFault(() =>
      queueMicrotask(() => {
        if (!isSettled(run.actor.getSnapshot())) run.interrupt();
      }),
    );
    const input = this.takeInput(run);
    const approvals = this.takeApprovals(run, input);
    try {
      const result = await run.result;
      // The trace's last records are written now, so a fault in them is said with the rest.
      recorder?.close();
      approvals.close();
      input?.close();
      board.stop();
      // The run's last records are in (the root's end came with its stop): the page shows the end.
      this.approvals.ui?.end();
      if (diverged?.aborted) {
        io.stderr.write(`exarch: ${describeError(diverged.reason)}\n`);
        return EXIT.fatal;
      }
      const state = String(result.snapshot.value);
      const summary = async (): Promise<void> => {
        const totals = board.totals();
        const stored = store && run.id !== undefined ? await storedTotals(store, run.id) : undefined;
        writeSummary(io.stderr, stored ? { ...totals, agents: stored.agents, steps: stored.requests, usage: stored.usage } : totals, this.model, this.logDir);
        for (const line of agentSpendLines(result.snapshot.context.options.budget.agents(), this.model)) io.stderr.write(`${line}\n`);
        if (recorder) io.stderr.write(`exarch: trace: ${recorder.file} (view it with: exarch view ${recorder.file})\n`);
      };
      const fault = this.approvals.faults.first(result.storeError);
      if (fault) {
        // Stopped by the fault (or by the store, which stops the run itself), or had it ended already?
        const stopped = result.storeError !== undefined || result.status === 'interrupted' || (run.id === undefined && state === 'cancelled');
        if (!stopped && result.text) io.stdout.write(result.text.endsWith('\n') ? result.text : `${result.text}\n`);
        await summary();
        const then = !stopped
          ? 'the run had finished'
          : run.id === undefined
            ? 'the run was stopped (it was not recorded: --no-store)'
            : `the run was stopped; once that is fixed, resume it with: exarch resume ${run.id}${this.approvals.target}`;
        io.stderr.write(`exarch: ${describeError(fault)}; ${then}\n`);
        return EXIT.unwritable;
      }
      if (result.storeError) {
        await summary();
        io.stderr.write(`exarch: the run store could not be written: ${describeError(result.storeError)}\n`);
        return EXIT.fatal;
      }
      if (approvals.waiting.length > 0) {
        await summary();
        listWaiting(
          io.stderr,
          run.id,
          approvals.waiting.map((r) => ({ callId: r.callId, tool: r.tool, agent: r.agent.id, input: r.input })),
          this.approvals.target,
          false,
        );
        return EXIT.waiting;
      }
      if (interrupted) {
        await summary();
        io.stderr.write(
          `exarch: interrupted: the agents were cancelled and their logs written${run.id === undefined ? '' : `; resume with: exarch resume ${run.id}`}\n`,
        );
        return EXIT.interrupted;
      }
      if (state === 'failed') {
        await summary();
        io.stderr.write(`exarch: the root agent failed: ${result.reason ?? 'unknown reason'}\n`);
        return EXIT.fatal;
      }
      if (result.text) io.stdout.write(result.text.endsWith('\n') ? result.text : `${result.text}\n`);
      await summary();
      const meter = result.snapshot.context.options.budget;
      if (meter.spent) {
        const { tokens, cost } = meter.totals;
        io.stderr.write(budgetLine(tokens, cost, state === 'capped'));
        if (state === 'capped') return EXIT.capped;
      }
      if (state === 'capped') {
        io.stderr.write(`exarch: the root agent stopped at its step cap (${this.maxSteps ?? DEFAULTS.maxSteps} model requests in one turn)\n`);
        return EXIT.capped;
      }
      return EXIT.ok;
    } finally {
      approvals.close();
      input?.close();
      interrupt.removeEventListener('abort', onInterrupt);
      diverged?.removeEventListener('abort', onDiverged);
      board.stop();
      recorder?.close();
      await this.finishSpans();
    }
  }

  /** `--otel`: the spans still open end, and all are sent before the command exits (one line says how it went). */
  private async finishSpans(): Promise<void> {
    const otel = this.approvals.otel;
    if (!otel) return;
    this.spans?.close();
    this.io.stderr.write(`exarch: ${await otel.finish()}\n`);
  }
}

/** Where `follow` takes calls that wait for approval, and what was left waiting when the run stopped for them. */
interface TakenApprovals {
  readonly waiting: readonly ApprovalRequest[];
  close(): void;
}

/**
 * The exit-4 listing: each waiting call with its tool, its agent and the commands that answer it.
 * `queued`: a run of the workers, continued by them once every call is answered.
 */
function listWaiting(
  out: NodeJS.WritableStream,
  runId: string | undefined,
  waiting: readonly { readonly callId: string; readonly tool: string; readonly agent: string; readonly input: unknown }[],
  target: string,
  queued: boolean,
): void {
  const n = waiting.length;
  out.write(`exarch: stopped: ${n} tool call${n === 1 ? '' : 's'} wait${n === 1 ? 's' : ''} for approval\n`);
  for (const request of waiting) {
    out.write(`  ${request.callId}  ${request.tool}  by ${request.agent}  ${clip(JSON.stringify(request.input), 160)}\n`);
    if (runId !== undefined)
      out.write(`    exarch approve ${runId} ${request.callId}${target}    or: exarch deny ${runId} ${request.callId} "reason"${target}\n`);
  }
  if (runId === undefined) out.write('exarch: this run was not recorded (--no-store), so it cannot be answered and resumed\n');
  else if (queued) out.write(`exarch: once every call is answered, a worker continues the run (or continue it here with: exarch resume ${runId}${target})\n`);
  else out.write(`exarch: then continue with: exarch resume ${runId}${target}\n`);
}

/** What a run the budget stopped says about it. */
function budgetLine(tokens: number, cost: number, capped: boolean): string {
  return `exarch: the budget stopped the run: the tree spent ${formatCount(tokens)} tokens${cost > 0 ? ` (about $${cost.toFixed(3)})` : ''}; running and queued sub-agents were cancelled and the root ${capped ? 'could not answer within the budget' : 'answered in its final turn'}\n`;
}

function writeSummary(out: NodeJS.WritableStream, totals: ReturnType<ProgressBoard['totals']>, model: string, logDir: string): void {
  const { agents, steps, usage, outcomes } = totals;
  const cost = estimateCost(model, usage);
  const children = Object.entries(outcomes)
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');
  const input = usage.inputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens;
  out.write(
    `exarch: ${agents} agent${agents === 1 ? '' : 's'}${children ? ` (sub-agents: ${children})` : ''}, ${steps} model request${steps === 1 ? '' : 's'}, ` +
      `${formatCount(input)} input tokens (${formatCount(usage.cacheReadInputTokens)} cache reads), ${formatCount(usage.outputTokens)} output tokens` +
      `${cost === undefined ? '' : `, about $${cost.toFixed(cost < 1 ? 3 : 2)}`} · logs: ${logDir}\n`,
  );
}
