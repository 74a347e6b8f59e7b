import { join } from 'node:path';
import { AnthropicProvider, DEFAULT_MODEL } from '../providers/anthropic.js';
import { JsonlLogSink } from '../log/sessionLog.js';
import { DEFAULTS } from '../options.js';
import { finalAssistantText } from '../history.js';
import { createSessionActor, waitForSettled } from '../runtime.js';
import { workspaceTools } from '../tools/workspace/index.js';
import type { Provider } from '../types.js';
import type { InspectionEvent } from 'xstate';
import { TraceRecorder } from '../trace/recorder.js';
import { estimateCost } from './pricing.js';
import { formatCount, ProgressBoard } from './progress.js';

export const EXIT = { ok: 0, fatal: 1, usage: 2, capped: 3, interrupted: 130 } as const;

/** A mistake in how exarch was called: one line, then the usage, exit 2. */
export class UsageError extends Error {}

export interface RunFlags {
  readonly model?: string;
  readonly maxSteps?: string;
  readonly maxDepth?: string;
  readonly replyCap?: string;
  readonly logDir?: string;
  readonly allowWrite?: boolean;
  readonly allowShell?: boolean;
  readonly trace?: string;
}

export interface RunIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Aborted on SIGINT: the tree is cancelled, pending calls answered, logs flushed. */
  readonly interrupt: AbortSignal;
  /** For tests: a provider instead of Claude. */
  readonly provider?: Provider;
  /** Another inspection observer (the live inspector). */
  readonly inspect?: (event: InspectionEvent) => void;
}

function positiveInt(flag: string, raw: string | undefined, min = 1): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`--${flag} must be an integer ≥ ${min}, got '${raw}'`);
  }
  return value;
}

function timestamp(date: Date): string {
  return date.toISOString().replace(/[:.]/g, '-');
}

/**
 * `exarch run "<task>"` (CONTRACT §7): the root works on the task with Claude until it settles.
 * stdout gets the root's final answer only; stderr gets progress, the summary and errors.
 */
export async function runCommand(task: string, flags: RunFlags, io: RunIo): Promise<number> {
  const maxSteps = positiveInt('max-steps', flags.maxSteps);
  const maxDepth = positiveInt('max-depth', flags.maxDepth, 0);
  const replyCap = positiveInt('reply-cap', flags.replyCap);
  if (task.trim() === '') throw new UsageError('the task is empty');
  const model = flags.model ?? io.env['EXARCH_MODEL'] ?? DEFAULT_MODEL;
  const apiKey = io.env['ANTHROPIC_API_KEY'];
  if (!io.provider && !apiKey) {
    io.stderr.write('exarch: ANTHROPIC_API_KEY is not set: set it to run against Claude, or try `exarch demo` (offline, no key needed)\n');
    return EXIT.fatal;
  }
  const provider =
    io.provider ??
    new AnthropicProvider({ apiKey, model, ...(io.env['ANTHROPIC_BASE_URL'] ? { baseURL: io.env['ANTHROPIC_BASE_URL'] } : {}) });
  const stallRaw = io.env['EXARCH_STALL_TIMEOUT_MS'];
  const stallTimeoutMs = stallRaw === undefined || stallRaw === '' ? undefined : Number(stallRaw);
  if (stallTimeoutMs !== undefined && (!Number.isSafeInteger(stallTimeoutMs) || stallTimeoutMs < 1)) {
    io.stderr.write(`exarch: EXARCH_STALL_TIMEOUT_MS must be a positive integer (milliseconds), got '${stallRaw ?? ''}'\n`);
    return EXIT.fatal;
  }
  const logDir = flags.logDir ?? join(io.cwd, '.exarch', 'runs', timestamp(new Date()));
  const logs = new JsonlLogSink(logDir);
  const color = io.stderr.isTTY === true && !io.env['NO_COLOR'] && !io.env['CI'];
  const board = new ProgressBoard({ out: io.stderr, live: color, color });
  const recorder = flags.trace === undefined ? undefined : new TraceRecorder({ file: flags.trace, title: `exarch run: ${task.slice(0, 80)}` });

  const root = createSessionActor(
    {
      provider,
      task,
      tools: workspaceTools({ root: io.cwd, allowWrite: flags.allowWrite ?? false, allowShell: flags.allowShell ?? false }),
      logs,
      ...(maxSteps === undefined ? {} : { maxSteps }),
      ...(maxDepth === undefined ? {} : { maxDepth }),
      ...(replyCap === undefined ? {} : { replyCap }),
      ...(stallTimeoutMs === undefined ? {} : { stallTimeoutMs }),
    },
    {
      inspect: (event) => {
        board.inspect(event);
        recorder?.inspect(event);
        io.inspect?.(event);
      },
    },
  );
  let interrupted = false;
  const onInterrupt = (): void => {
    interrupted = true;
    root.send({ type: 'cancel', reason: 'interrupted' });
  };
  io.interrupt.addEventListener('abort', onInterrupt, { once: true });
  root.start();
  try {
    const settled = await waitForSettled(root);
    // Let stopped sessions close their logs (their teardown runs on the next microtasks).
    await new Promise((resolve) => setImmediate(resolve));
    board.stop();
    const text = finalAssistantText(settled.context.messages);
    const state = String(settled.value);
    const summary = (): void => {
      writeSummary(io.stderr, board, model, logDir);
      if (recorder) io.stderr.write(`exarch: trace: ${recorder.file} (view it with: exarch view ${recorder.file})\n`);
    };
    if (interrupted) {
      summary();
      io.stderr.write('exarch: interrupted: the agents were cancelled and their logs written\n');
      return EXIT.interrupted;
    }
    if (state === 'failed') {
      summary();
      io.stderr.write(`exarch: the root agent failed: ${settled.output?.reason ?? 'unknown reason'}\n`);
      return EXIT.fatal;
    }
    if (text) io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
    summary();
    if (state === 'capped') {
      io.stderr.write(`exarch: the root agent stopped at its step cap (${maxSteps ?? DEFAULTS.maxSteps} model requests in one turn)\n`);
      return EXIT.capped;
    }
    return EXIT.ok;
  } finally {
    io.interrupt.removeEventListener('abort', onInterrupt);
    board.stop();
    root.stop();
    await new Promise((resolve) => setImmediate(resolve));
    logs.flushAll();
    recorder?.close();
  }
}

function writeSummary(out: NodeJS.WritableStream, board: ProgressBoard, model: string, logDir: string): void {
  const { agents, steps, usage, outcomes } = board.totals();
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
