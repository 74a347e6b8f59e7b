import { dirname } from 'node:path';
import type { MessageCreateParamsStreaming, RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages/messages';
import { type FileError, fileErrorOf } from '../engine/fs/fileError.js';
import { makeDirs } from '../engine/fs/makeDirs.js';
import { HeldLines } from '../engine/fs/heldLines.js';
import { appendRegular, writeRegular } from '../engine/fs/regularFile.js';
import { ProviderError } from '../engine/model/errors.js';
import { Redactor } from '../engine/redact.js';
import type { ModelRequest } from '../engine/types.js';
import { canonicalJson, HistoryCursor, requestFields } from './fingerprint.js';
import { RECORDING_VERSION, RecordingError, type RecordedExchange, type RecordedFault, type RecordingHeader } from './format.js';

export interface ExchangeRecorderOptions {
  /** The recording file (created, or truncated). */
  readonly file: string;
  /** The provider's own model and output cap, for the header (a replay asks for the same by default). */
  readonly model: string;
  readonly maxTokens: number;
  /** Secrets kept out of the file (default: those of `process.env`; see redact.ts). */
  readonly redactor?: Redactor;
  /**
   * Called once, with the first exchange that could not be appended (a full disk, a file-size
   * limit, a read-only directory): one line naming the file and the cause. The run is not failed
   * here; the exchanges not written are held, in order, and tried again with the next one (up to
   * 16 MiB; past that the recording is given up), and the file only ever holds whole lines, so a
   * replay of it says where it ends. Default: a process warning.
   */
  readonly onFault?: (fault: FileError) => void;
}

/** One request under way: its stream events as they arrive, then how it ended. */
export interface ExchangeLog {
  event(event: RawMessageStreamEvent): void;
  /** Without an error: a whole message arrived. */
  end(error?: unknown): void;
}

/**
 * Records every model exchange of a run into one file (format.ts), for `replayProvider` to play
 * back offline. Each exchange is appended as one line when it ends, so a run that dies leaves a
 * recording of what it did until then. The key is never in it (it travels in a header the
 * recording does not keep), and every value of a `*_KEY`, `*_TOKEN` or `*_SECRET` variable is
 * redacted from each line before it is written.
 */
export class ExchangeRecorder {
  readonly file: string;
  private readonly redactor: Redactor;
  private sequence = 0;
  /** When the recording began: exchanges keep their times from it. */
  private readonly began = performance.now();
  private readonly agents = new Map<string, { requests: number; history: HistoryCursor; fields: Map<string, string> }>();
  /** Exchanges not written yet (a write failed), in order. */
  private readonly held: HeldLines;

  constructor(options: ExchangeRecorderOptions) {
    this.file = options.file;
    this.redactor = options.redactor ?? Redactor.fromEnv();
    const file = options.file;
    this.held = new HeldLines(
      (data) => appendRegular(file, data, { what: 'the recording' }),
      (error) => fileErrorOf(error, file, ROLE),
      options.onFault ?? ((fault) => process.emitWarning(fault.message)),
    );
    const header: RecordingHeader = {
      kind: 'exarch.recording',
      version: RECORDING_VERSION,
      provider: 'anthropic',
      model: options.model,
      maxTokens: options.maxTokens,
      recordedAt: new Date().toISOString(),
    };
    try {
      makeDirs(dirname(options.file));
      // A FIFO, a device or a directory is refused without waiting on it (regularFile.ts).
      writeRegular(options.file, `${this.redactor.json(canonicalJson(header))}\n`, { what: 'the recording' });
    } catch (error) {
      throw new RecordingError('unwritable', `cannot write the recording to ${options.file}: ${fileErrorOf(error, options.file, ROLE).reason}`);
    }
  }

  private sinceStart(): number {
    return Math.round(performance.now() - this.began);
  }

  /** A request is about to be sent with `body`. */
  begin(request: ModelRequest, body: MessageCreateParamsStreaming): ExchangeLog {
    const start = this.sequence++;
    const startMs = this.sinceStart();
    let agent = this.agents.get(request.agent.id);
    if (!agent) this.agents.set(request.agent.id, (agent = { requests: 0, history: new HistoryCursor(), fields: new Map() }));
    const index = agent.requests++;
    const keep = agent.history.advance(request.messages);
    const fields: Record<string, unknown> = {};
    const current = requestFields(body as unknown as Record<string, unknown>);
    for (const [key, value] of Object.entries(current)) {
      const text = canonicalJson(value);
      if (agent.fields.get(key) !== text) fields[key] = value;
      agent.fields.set(key, text);
    }
    const dropped = [...agent.fields.keys()].filter((key) => !(key in current));
    for (const key of dropped) agent.fields.delete(key);
    const messages = request.messages.slice(keep);
    const events: RawMessageStreamEvent[] = [];
    let ended = false;
    return {
      event: (event) => {
        events.push(event);
      },
      end: (error) => {
        if (ended) return;
        ended = true;
        const fault = error === undefined ? undefined : faultOf(error);
        const exchange: RecordedExchange = {
          kind: 'exchange',
          agent: request.agent.id,
          index,
          start,
          end: this.sequence++,
          startMs,
          endMs: this.sinceStart(),
          fields,
          ...(dropped.length > 0 ? { dropped } : {}),
          keep,
          messages,
          events,
          ...(fault ? { fault } : {}),
        };
        this.append(`${this.redactor.json(canonicalJson(exchange))}\n`);
      },
    };
  }

  /** Appends one exchange's line after those still held; a failure is said once and the lines kept for the next try. */
  private append(line: string): void {
    this.held.add(line);
    this.held.flush();
  }
}

const ROLE = { what: 'the recording', writing: true } as const;

/** What a replay needs to fail the same way: a provider's fault as the session saw it, or a cancellation. */
function faultOf(error: unknown): RecordedFault {
  if (error instanceof ProviderError) {
    return {
      kind: 'provider',
      message: error.message,
      retryable: error.retryable,
      ...(error.status === undefined ? {} : { status: error.status }),
      errorKind: error.kind,
    };
  }
  return { kind: 'aborted' };
}
