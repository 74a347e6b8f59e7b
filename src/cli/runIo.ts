import type { InspectionEvent } from 'xstate';
import type { Provider } from '../engine/types.js';
import type { RecordedFlags } from './runRecord.js';

/** `unwritable`: the run was stopped because a file it writes (a log, the trace, the recording, the store) could not be written; resumable once there is room. */
export const EXIT = { ok: 0, fatal: 1, usage: 2, capped: 3, waiting: 4, unwritable: 5, interrupted: 130 } as const;

/** The flags of `exarch run`, as commands.ts reads them from the command line (checked in run.ts). */
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

/** What `run` and `resume` are given of the process: its streams, environment, directory and Ctrl-C. */
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
