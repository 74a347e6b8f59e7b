import { FileError, fileErrorOf } from '../fs/fileError.js';
import { makeDirs } from '../fs/makeDirs.js';
import { HeldLines } from '../fs/heldLines.js';
import { appendRegular } from '../fs/regularFile.js';
import { dirname, join } from 'node:path';
import { stringifyBounded } from '../nesting.js';
import { Redactor } from '../redact.js';
import type { AgentIdentity, AgentOutcome, AgentResult, Message, StopReason, Usage } from '../types.js';
import type { AgentBudget } from '../budget.js';

/**
 * One session's append-only log. Message records hold what was appended to the history, in
 * order; consecutive records of the same role belong to one API message.
 */
export type LogRecord =
  | { readonly type: 'session'; readonly agent: AgentIdentity; readonly task?: string }
  | { readonly type: 'message'; readonly role: Message['role']; readonly content: Message['content'] }
  /** A model response was committed: its tokens, the session's total, and why it stopped. */
  | {
      readonly type: 'usage';
      readonly request: Usage;
      readonly session: Usage;
      readonly stopReason: StopReason;
      /** Tool calls cut off at max_tokens (never executed); absent when none. */
      readonly incomplete?: readonly string[];
      /** Requests the step made, when it was retried (absent: one). */
      readonly requests?: number;
      /** What its retried requests spent (absent: nothing); `session` includes it. */
      readonly lost?: Usage;
    }
  /**
   * Model requests that reached the provider and ended without a response the session kept (a
   * retried or failed attempt, or one aborted by a cancel, a spent budget or a stop): how many, and
   * the tokens they reported. With the `usage` records, every request the provider served.
   */
  | { readonly type: 'lost'; readonly requests: number; readonly usage: Usage }
  /** A child was spawned: its name, agent id, the parent's actor id for it, its task, its declared type and its budget, if any. */
  | {
      readonly type: 'spawn';
      readonly name: string;
      readonly id: string;
      readonly actorId: string;
      readonly task: string;
      readonly profile?: string;
      readonly budget?: AgentBudget;
    }
  /** A finished child's result entered the inbox (`actorId`: which child it was). */
  | { readonly type: 'inbox'; readonly actorId: string; readonly result: AgentResult }
  /** A durable session was taken up again by a new process, in this state. */
  /** Taken up again from the journal; `alone`: one session of a spread run, taken up by a worker where it parked or stopped. */
  | { readonly type: 'resumed'; readonly state: string; readonly alone?: true }
  | { readonly type: 'nudge'; readonly latch: string; readonly text: string }
  | { readonly type: 'retry'; readonly attempt: number; readonly delayMs: number; readonly reason: string }
  /** The actor was stopped while at rest (a root in `readyForUser`): not a cancellation. */
  | { readonly type: 'stopped'; readonly state: string; readonly usage: Usage; readonly totalUsage: Usage }
  | {
      readonly type: 'outcome';
      readonly outcome: AgentOutcome;
      readonly text: string;
      readonly reason?: string;
      /** The parsed reply of a typed `reply` (see `AgentResult.value`). */
      readonly value?: unknown;
      /** This session's own tokens. */
      readonly usage: Usage;
      /** Its own plus its whole subtree's. */
      readonly totalUsage: Usage;
    };

export type TimedLogRecord = LogRecord & { readonly ts: number };

export interface SessionLog {
  append(record: LogRecord): void;
  /** Writes buffered records out. */
  flush(): void;
  /** Flushes; later appends are written at once (a stopped session may still answer its calls). */
  close(): void;
}

/** Opens one log per session. */
export interface LogSink {
  open(agent: AgentIdentity): SessionLog;
}

/** Keeps every record in memory, per agent id: for tests, and for hosts that ship logs elsewhere. */
export class MemoryLogSink implements LogSink {
  readonly logs = new Map<string, TimedLogRecord[]>();

  open(agent: AgentIdentity): SessionLog {
    const records: TimedLogRecord[] = [];
    this.logs.set(agent.id, records);
    return {
      append: (record) => void records.push({ ts: Date.now(), ...record }),
      flush: () => undefined,
      close: () => undefined,
    };
  }

  records(agentId: string): readonly TimedLogRecord[] {
    return this.logs.get(agentId) ?? [];
  }
}

/** Every session's log when there is no sink: stateless, so one serves them all. */
const nullLog: SessionLog = { append: () => undefined, flush: () => undefined, close: () => undefined };

export const nullLogSink: LogSink = { open: () => nullLog };

const FLUSH_BYTES = 64 * 1024;

export interface JsonlLogSinkOptions {
  /** Secrets to keep out of the files (default: those of `process.env`; see redact.ts). */
  readonly redactor?: Redactor;
  /**
   * Called with the first fault of each log file (a full disk, a file-size limit, a read-only
   * directory, a log that is a FIFO or a symlink): one line naming the file and the cause. A
   * session is never failed by its log: the records that could not be written are held and tried
   * again at the next flush (up to 16 MiB; past that the log is given up), and the file only ever
   * holds whole lines. A host stops the run here if it wants nothing missing (the CLI does, and
   * the run stays resumable). Default: a process warning.
   */
  readonly onFault?: (fault: FileError) => void;
}

/**
 * Writes `<dir>/<agent id>.jsonl` per session (`root.jsonl`, `root.explorer.jsonl`,
 * `root.explorer~2.jsonl` for a reused name). Records are buffered and written in batches, at
 * the end of every turn and when the session ends, so logging stays off the hot path. Every line
 * is JSON whatever a record holds (values nested past any limit are elided, see nesting.ts) and
 * holds no secret (redact.ts).
 */
export class JsonlLogSink implements LogSink {
  private created = false;
  private readonly open_ = new Set<JsonlSessionLog>();
  private readonly redactor: Redactor;
  private readonly onFault: (fault: FileError) => void;

  constructor(
    readonly dir: string,
    options: JsonlLogSinkOptions = {},
  ) {
    this.redactor = options.redactor ?? Redactor.fromEnv();
    this.onFault = options.onFault ?? ((fault) => process.emitWarning(fault.message));
  }

  open(agent: AgentIdentity): SessionLog {
    const file = join(this.dir, logFileName(agent));
    if (!this.created) {
      try {
        makeDirs(this.dir);
        this.created = true;
      } catch {
        // Said by the log, at its first write (which tries to make the directory again).
      }
    }
    const log = new JsonlSessionLog(file, this.redactor, this.onFault, () => this.open_.delete(log));
    this.open_.add(log);
    return log;
  }

  /** Flushes every open session log (on SIGINT, before the process exits). */
  flushAll(): void {
    for (const log of this.open_) log.flush();
  }
}

function logFileName(agent: AgentIdentity): string {
  return `${agent.id.replaceAll('/', '.').replaceAll('#', '~')}.jsonl`;
}

class JsonlSessionLog implements SessionLog {
  private closed = false;
  /** The records not written yet (a write that failed holds them for the next flush). */
  private readonly lines: HeldLines;

  constructor(
    readonly file: string,
    private readonly redactor: Redactor,
    onFault: (fault: FileError) => void,
    private readonly onClose: () => void,
  ) {
    this.lines = new HeldLines(
      (data) => this.write(data),
      (error) => fileErrorOf(error, this.file, { what: 'the session log', writing: true }),
      onFault,
    );
  }

  append(record: LogRecord): void {
    this.lines.add(`${stringifyBounded({ ts: Date.now(), ...record })}\n`);
    // Once a write failed, only the turn's end and the close try again: not every record.
    if (this.closed || (this.lines.held >= FLUSH_BYTES && !this.lines.hasFaulted)) this.flush();
  }

  flush(): void {
    // One redaction pass per batch: a secret never spans two lines.
    this.lines.flush((data) => this.redactor.json(data));
  }

  close(): void {
    this.flush();
    if (!this.closed) this.onClose();
    this.closed = true;
  }

  /** Appends, never through a symlink (exarch names these files: one there was planted); a missing directory is made first. */
  private write(data: string): void {
    const role = { what: 'the session log', noFollow: true };
    try {
      appendRegular(this.file, data, role);
    } catch (error) {
      if (!(error instanceof FileError && error.kind === 'missing')) throw error;
      // Its directory could not be made when the sink opened, or was removed since: why it cannot be, if it cannot.
      makeDirs(dirname(this.file));
      appendRegular(this.file, data, role);
    }
  }
}
