import type { InspectionEvent } from 'xstate';
import { respond, type ApprovalRequest } from '../engine/approvals.js';
import { ApprovalStop } from '../engine/approvalStop.js';
import { FileError } from '../engine/fs/fileError.js';
import { describeError } from '../engine/model/errors.js';
import type { FinishedRun } from '../run/durableRun.js';
import { isSettled, type RunResult, type SessionActor } from '../run/runtime.js';
import { DEFAULTS } from '../session/options.js';
import type { RunStore } from '../store/runStore.js';
import { RunObserver } from '../watch/observe/runObserver.js';
import type { OtelRunExporter } from '../watch/otel/otelExporter.js';
import { TraceRecorder } from '../watch/trace/recorder.js';
import { agentSpendLines } from './agentSpend.js';
import { ApprovalPrompt } from './approvalPrompt.js';
import type { CliUi } from './liveUi.js';
import type { OtlpExport } from './otlpExport.js';
import { ProgressBoard } from './progress.js';
import { budgetLine, listWaiting, storedTotals, writeSummary } from './runEnding.js';
import { EXIT, type RunIo } from './runIo.js';
import { steeringCommand } from './steeringCommands.js';
import { TerminalInput } from './terminalInput.js';
import type { WriteFaults } from './writeFaults.js';

/** What `follow` needs of a run: durable (`startRun`, `resumeRun`) or not (`--no-store`). */
export interface FollowedRun {
  readonly id?: string;
  readonly actor: SessionActor;
  readonly result: Promise<RunResult & { readonly storeError?: Error; readonly status?: string }>;
  interrupt(): void;
  /** Stops the run to wait for approvals (a durable one is then `waiting`). */
  suspend(): void;
  /** Stops the run for good (a durable one is then `failed`, and not resumable). */
  fail(reason: string): void;
}

/** Progress, trace and the ending of `run` and `resume`: stdout answer, summary, exit code. */
export class RunOutput {
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
    private readonly options: {
      readonly noWait: boolean;
      readonly target: string;
      readonly steer: boolean;
      /** Where the run's files report a write that failed; the first stops the run (writeFaults.ts). */
      readonly faults: WriteFaults;
      readonly otel?: OtlpExport;
      /** `--record FILE`: named once the run ends, so the person knows where the recording went. */
      readonly record?: string;
      /** `--replay`: aborted when a request differs from the recording. */
      readonly diverged?: AbortSignal;
      readonly ui?: CliUi;
    },
  ) {
    const color = io.stderr.isTTY === true && !io.env['NO_COLOR'] && !io.env['CI'];
    this.board = new ProgressBoard({ out: io.stderr, live: color, color });
    this.recorder = trace === undefined ? undefined : new TraceRecorder({ file: trace, title, model, onFault: options.faults.report });
    // One observer decodes the run for all of them.
    this.observer.subscribe(this.board.onEvent);
    if (this.recorder) this.observer.subscribe(this.recorder.onEvent);
    const otel = options.otel;
    this.spans = otel?.runSpans();
    if (this.spans) this.observer.subscribe(this.spans.onEvent);
    if (options.ui) this.observer.subscribe(options.ui.onEvent);
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
    if (!io.stdin || (!terminal && !this.options.steer)) return undefined;
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
    const inline = !this.options.noWait && io.stdin?.isTTY === true && io.stderr.isTTY === true;
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
    const { board, recorder } = this;
    let interrupted = false;
    const onInterrupt = (): void => {
      interrupted = true;
      run.interrupt();
    };
    interrupt.addEventListener('abort', onInterrupt, { once: true });
    // Ctrl-C while the run was being set up (MCP servers starting): an aborted signal fires no event.
    if (interrupt.aborted) onInterrupt();
    // --replay: a request that differs from the recording ends the run, failed: nothing after it
    // would be the recorded run, and a resume would meet the same difference again.
    const diverged = this.options.diverged;
    const onDiverged = (): void => queueMicrotask(() => run.fail(describeError(diverged?.reason)));
    diverged?.addEventListener('abort', onDiverged, { once: true });
    // A file that cannot be written stops the run as an interrupt does (a microtask later: a fault
    // may be met inside the write of a session's own record), unless it has settled already (a
    // log written as the root's last turn ends): that run is done, and is not made to look stopped.
    this.options.faults.onFault(() =>
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
      this.options.ui?.end();
      return await this.ending(run, result, approvals.waiting, interrupted, store);
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

  /**
   * How a followed run ends once its result is in: the answer on stdout, the summary, and the line
   * and exit code of what stopped it (a recording it left, a file or the store that could not be
   * written, calls that wait, Ctrl-C, a failure, the budget, the step cap).
   */
  private async ending(
    run: FollowedRun,
    result: Awaited<FollowedRun['result']>,
    waiting: readonly ApprovalRequest[],
    interrupted: boolean,
    store: RunStore | undefined,
  ): Promise<number> {
    const { io, board, recorder } = this;
    const diverged = this.options.diverged;
    if (diverged?.aborted) {
      io.stderr.write(`exarch: ${describeError(diverged.reason)}\n`);
      return EXIT.fatal;
    }
    const state = String(result.snapshot.value);
    const fault = this.options.faults.first(result.storeError);
    const summary = async (): Promise<void> => {
      const totals = board.totals();
      const stored = store && run.id !== undefined ? await storedTotals(store, run.id) : undefined;
      const replayed = diverged !== undefined;
      writeSummary(
        io.stderr,
        stored ? { ...totals, agents: stored.agents, steps: stored.requests, usage: stored.usage } : totals,
        this.model,
        this.logDir,
        replayed,
      );
      for (const line of agentSpendLines(result.snapshot.context.options.budget.agents(), this.model, replayed)) io.stderr.write(`${line}\n`);
      if (recorder) io.stderr.write(`exarch: trace: ${recorder.file} (view it with: exarch view ${recorder.file})\n`);
      const { record } = this.options;
      // Unless the recording is the file that could not be written (the fault's line says so).
      if (record !== undefined && !(fault instanceof FileError && fault.file === record))
        io.stderr.write(`exarch: recorded to ${record}; replay it with --replay ${record} and the same task and options\n`);
    };
    if (fault) {
      // Stopped by the fault (or by the store, which stops the run itself), or had it ended already?
      const stopped = result.storeError !== undefined || result.status === 'interrupted' || (run.id === undefined && state === 'cancelled');
      if (!stopped && result.text) io.stdout.write(result.text.endsWith('\n') ? result.text : `${result.text}\n`);
      await summary();
      const then = !stopped
        ? 'the run had finished'
        : run.id === undefined
          ? 'the run was stopped (it was not recorded: --no-store)'
          : `the run was stopped; once that is fixed, resume it with: exarch resume ${run.id}${this.options.target}`;
      io.stderr.write(`exarch: ${describeError(fault)}; ${then}\n`);
      return EXIT.unwritable;
    }
    if (result.storeError) {
      await summary();
      io.stderr.write(`exarch: the run store could not be written: ${describeError(result.storeError)}\n`);
      return EXIT.fatal;
    }
    if (waiting.length > 0) {
      await summary();
      listWaiting(
        io.stderr,
        run.id,
        waiting.map((r) => ({ callId: r.callId, tool: r.tool, agent: r.agent.id, input: r.input })),
        this.options.target,
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
  }

  /** `--otel`: the spans still open end, and all are sent before the command exits (one line says how it went). */
  private async finishSpans(): Promise<void> {
    const otel = this.options.otel;
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
