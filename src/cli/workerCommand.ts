import { hostname } from 'node:os';
import { UsageError } from './usageError.js';
import { UNSANDBOXED_NOTE } from './runChecks.js';
import { EXIT } from './runIo.js';
import { readRecord, timerSeconds } from './runRecord.js';
import { buildRunSession, checkModelAccess } from './runSession.js';
import { checkTarget, DB_URL_VARIABLE, StoreTargetError } from './storeTarget.js';
import { startWorker } from '../workers/worker.js';
import type { WorkerEvent } from '../workers/workerOptions.js';
import { steeringCommand } from './steeringCommands.js';
import { OtelRunExporter } from '../watch/otel/otelExporter.js';
import type { Provider } from '../engine/types.js';

export interface WorkerFlags {
  readonly db?: string;
  /** `db` came from `EXARCH_DB_URL` (see `StoreTarget`). */
  readonly dbFromEnv?: boolean;
  readonly concurrency?: string;
  /** Seconds a SIGTERM waits for runs to finish before handing them back (default 30). */
  readonly drainTimeout?: string;
  /** Seconds a job stays with one worker before the queue offers it to another (default 900). */
  readonly jobExpiry?: string;
  /** Send the spans of the runs run here to the OTLP/HTTP collector at `OTEL_EXPORTER_OTLP_ENDPOINT` (see otlpExport.ts). */
  readonly otel?: boolean;
}

export interface WorkerIo {
  readonly stderr: NodeJS.WritableStream;
  readonly env: NodeJS.ProcessEnv;
  /** Aborted on the first SIGTERM/SIGINT: the worker drains. */
  readonly stop: AbortSignal;
  /** For tests: a provider instead of Claude. */
  readonly provider?: Provider;
}

/** The longest `--job-expiry` the queue (pg-boss) takes: less than 24 hours. */
const MAX_JOB_EXPIRY_SECONDS = 24 * 60 * 60 - 1;

function positive(flag: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < 1) throw new UsageError(`--${flag} must be an integer ≥ 1, got '${raw}'`);
  return value;
}

/**
 * `exarch worker --db URL [--concurrency N]`: takes runs queued by `exarch run --db` and runs them
 * here, until SIGTERM or Ctrl-C; then it drains (runs get `--drain-timeout` seconds to finish, the
 * rest are handed back to the queue) and exits 0. One line on stderr per run taken and ended.
 */
export async function workerCommand(flags: WorkerFlags, io: WorkerIo): Promise<number> {
  if (flags.db === undefined) throw new UsageError(`worker needs --db postgres://… or ${DB_URL_VARIABLE}: the store and queue it takes runs from`);
  try {
    checkTarget(flags);
  } catch (error) {
    if (error instanceof StoreTargetError) throw new UsageError(error.message);
    throw error;
  }
  const concurrency = positive('concurrency', flags.concurrency, 1);
  const drainMs = (timerSeconds('drain-timeout', flags.drainTimeout, 1) ?? 30) * 1000;
  const expireInSeconds = positive('job-expiry', flags.jobExpiry, 900);
  // pg-boss refuses an expiry of 24 hours or more, in words of its own (`configuration assert: …`).
  if (expireInSeconds > MAX_JOB_EXPIRY_SECONDS)
    throw new UsageError(`--job-expiry must be at most ${MAX_JOB_EXPIRY_SECONDS} seconds (less than a day), got '${flags.jobExpiry ?? ''}'`);
  // A worker that cannot reach the model would fail every run it takes: it does not start (RunSetupError, one line).
  checkModelAccess(io);
  /** The runs in progress here whose unsandboxed shell this worker has said; forgotten when the run, or its session, leaves this worker. */
  const warned = new Set<string>();
  const say = (event: WorkerEvent): void => {
    if (event.type === 'finished' || event.type === 'handed-back' || (event.type === 'session' && event.what !== 'taken')) warned.delete(event.runId);
    if (event.type === 'malformed') {
      io.stderr.write(`exarch worker: job ${event.job}: ${event.detail}; failed, not retried\n`);
      return;
    }
    const line =
      event.type === 'started'
        ? `run ${event.runId} ${event.resumed ? 'resumed' : 'started'}`
        : event.type === 'finished'
          ? `run ${event.runId} ${event.status}`
          : event.type === 'held'
            ? `run ${event.runId} is still held elsewhere; the queue offers it again later`
            : event.type === 'handed-back'
              ? `run ${event.runId} handed back to the queue`
              : event.type === 'session'
                ? `run ${event.runId} session ${event.session} ${event.what === 'handed-back' ? 'handed back to the queue' : event.what}`
                : // A message of exarch's own starts with its name, which this line has already.
                  `run ${event.runId ?? '?'}: ${event.detail.replace(/^exarch: /, '')}`;
    io.stderr.write(`exarch worker: ${line}\n`);
  };
  // Loaded only with --otel, as for `exarch run --otel`.
  const otel = flags.otel ? await (await import('./otlpExport.js')).startOtlpExport(io.env) : undefined;
  if (otel) io.stderr.write(`exarch worker: sending the runs' spans to ${otel.url}\n`);
  const worker = await startWorker({
    db: flags.db,
    concurrency,
    policy: { expireInSeconds },
    onEvent: say,
    // `run --db --steer`: the lines a run here would take from its terminal, acted on here.
    command: (line, run) => {
      const answer = steeringCommand(line, run.actor, 'followed');
      io.stderr.write(`exarch worker: run ${run.id}: ${line.trim()}\n`);
      return answer;
    },
    // Each run's sessions as `exarch run` built them here: from its record (MCP servers started for the run, closed after it).
    session: async (row, place) => {
      const record = readRecord(row.options);
      // Said where the commands run, as `run` and `resume` say it: once per run this worker takes (a spread run's sessions are many).
      if (record.allowShell === 'unsandboxed' && !warned.has(row.id)) {
        warned.add(row.id);
        io.stderr.write(`exarch worker: run ${row.id}: ${UNSANDBOXED_NOTE}\n`);
      }
      const built = await buildRunSession(
        { id: row.id, cwd: row.cwd, startedAt: row.startedAt, record },
        {
          ...io,
          // A log this worker cannot write (a full disk) is one line; the run goes on, its journal in the database.
          onFileFault: (fault) => io.stderr.write(`exarch worker: run ${row.id}: ${fault.message.replace(/^exarch: /, '')}; the run goes on without it\n`),
        },
      );
      if (!otel) return { input: built.session, close: built.close };
      // The spans of what this worker runs of the run, under the run's id as the conversation: one
      // trace with what other workers ran of it (a sub-agent elsewhere, a run taken up again).
      const spans = new OtelRunExporter({
        tracer: otel.tracer,
        captureContent: otel.captureContent,
        conversationId: row.id,
        directory: place.spans,
        ids: otel.ids,
      });
      return {
        input: built.session,
        events: spans.onEvent,
        close: async () => {
          spans.close();
          await built.close();
        },
      };
    },
  });
  io.stderr.write(`exarch worker: ready on ${hostname()} (pid ${process.pid}), ${concurrency} run${concurrency === 1 ? '' : 's'} at a time\n`);
  await new Promise<void>((resolve) => (io.stop.aborted ? resolve() : io.stop.addEventListener('abort', () => resolve(), { once: true })));
  io.stderr.write(`exarch worker: stopping: ${worker.active} run${worker.active === 1 ? '' : 's'} in progress get ${drainMs / 1000} s to finish\n`);
  await worker.stop({ timeoutMs: drainMs });
  if (otel) io.stderr.write(`exarch worker: ${await otel.finish()}\n`);
  io.stderr.write('exarch worker: stopped\n');
  return EXIT.ok;
}
