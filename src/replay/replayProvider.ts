import { fileErrorOf } from '../engine/fs/fileError.js';
import { readRegular } from '../engine/fs/regularFile.js';
import { PROVIDER_ERROR_KINDS, ProviderError } from '../engine/model/errors.js';
import { MessageAssembler, messagesBody } from '../providers/anthropic.js';
import { Redactor } from '../engine/redact.js';
import type { Message, ModelRequest, ModelResponse, Provider, StreamSink } from '../engine/types.js';
import { ExchangeOrder } from './exchangeOrder.js';
import { canonicalJson, firstDifference, HistoryCursor, requestFields } from './fingerprint.js';
import { MAX_RECORDING_BYTES, RECORDING_VERSION, RecordingError, ReplayMismatchError, type RecordedExchange, type RecordingHeader } from './format.js';

export interface ReplayProviderOptions {
  /** The model of requests that name none (default: the recorded provider's). */
  readonly model?: string;
  /** Secrets redacted from live requests before they are compared, as they were when recorded (default: those of `process.env`). */
  readonly redactor?: Redactor;
  /** Called once, with the first request that differs from the recording (that request also fails). */
  readonly onMismatch?: (mismatch: ReplayMismatchError) => void;
}

/** One agent's side of the replay: its requests so far, and the recorded request body they are checked against. */
interface AgentReplay {
  requests: number;
  readonly history: HistoryCursor;
  /** The recorded body's fields (`messages` aside) as canonical JSON, and its messages. */
  readonly fields: Map<string, string>;
  readonly messages: string[];
}

/**
 * Plays a recording (`exarch run --record FILE`, `AnthropicProvider({ record })`) back as the
 * model: offline, with no key, at full speed. Each request is matched by its agent and that
 * agent's request count, checked against the recorded body (the history, system prompt, tools,
 * model: everything the provider would send), and answered with the recorded stream events,
 * through the same assembler a live stream goes through; a recorded fault fails it again the same
 * way. Answers are handed out in the recorded order (see `ExchangeOrder`), so sub-agents that ran
 * concurrently meet the same deliveries: same tool calls, same replies, same final answer.
 *
 * A request that differs fails with `ReplayMismatchError` naming the first differing field
 * (`messages[4].content[0].content`), and `mismatch` keeps it.
 */
export class ReplayProvider implements Provider {
  readonly name = 'anthropic';
  readonly model: string;
  readonly maxTokens: number;
  /** The first request that differed from the recording, if one did. */
  mismatch: ReplayMismatchError | undefined;
  private readonly exchanges = new Map<string, RecordedExchange>();
  private readonly agents = new Map<string, AgentReplay>();
  private readonly order: ExchangeOrder;
  private readonly redactor: Redactor;
  /** Each live message's canonical, redacted JSON, made once. */
  private readonly texts = new WeakMap<Message, string>();

  constructor(
    readonly file: string,
    private readonly options: ReplayProviderOptions = {},
  ) {
    const { header, exchanges } = readRecording(file);
    this.model = options.model ?? header.model;
    this.maxTokens = header.maxTokens;
    this.redactor = options.redactor ?? Redactor.fromEnv();
    let positions = 0;
    for (const exchange of exchanges) {
      this.exchanges.set(keyOf(exchange.agent, exchange.index), exchange);
      positions = Math.max(positions, exchange.start + 1, exchange.end + 1);
    }
    // When each position happened in the recorded run (NaN where the recording does not say).
    const times = new Float64Array(positions).fill(Number.NaN);
    for (const exchange of exchanges) {
      if (exchange.startMs !== undefined) times[exchange.start] = exchange.startMs;
      if (exchange.endMs !== undefined) times[exchange.end] = exchange.endMs;
    }
    this.order = new ExchangeOrder(positions, times);
  }

  async stream(request: ModelRequest, sink: StreamSink): Promise<ModelResponse> {
    const agent = this.agentOf(request.agent.id);
    const index = agent.requests++;
    const exchange = this.exchanges.get(keyOf(request.agent.id, index));
    if (!exchange) throw this.differs(new ReplayMismatchError(request.agent.id, index, undefined));
    this.order.happened(exchange.start);
    const path = this.compare(agent, exchange, request);
    if (path !== undefined) throw this.differs(new ReplayMismatchError(request.agent.id, index, path));
    try {
      await this.order.turn(exchange.end, request.signal);
      return await play(exchange, sink, request.signal);
    } finally {
      this.order.happened(exchange.end);
    }
  }

  private agentOf(id: string): AgentReplay {
    let agent = this.agents.get(id);
    if (!agent) this.agents.set(id, (agent = { requests: 0, history: new HistoryCursor(), fields: new Map(), messages: [] }));
    return agent;
  }

  private differs(mismatch: ReplayMismatchError): ProviderError {
    if (!this.mismatch) {
      this.mismatch = mismatch;
      this.options.onMismatch?.(mismatch);
    }
    return new ProviderError(mismatch.message, { retryable: false, kind: 'replay', cause: mismatch });
  }

  /**
   * The first path where the live request differs from the recorded one, in key order. The agent's
   * recorded body advances to this exchange's whatever the outcome; the live history is compared
   * only from where either side changed since the agent's previous request.
   */
  private compare(agent: AgentReplay, exchange: RecordedExchange, request: ModelRequest): string | undefined {
    for (const [key, value] of Object.entries(exchange.fields)) agent.fields.set(key, canonicalJson(value));
    for (const key of exchange.dropped ?? []) agent.fields.delete(key);
    agent.messages.length = Math.min(agent.messages.length, exchange.keep);
    for (const message of exchange.messages) agent.messages.push(canonicalJson(message));
    const unchanged = Math.min(agent.history.advance(request.messages), exchange.keep);

    const live = requestFields(
      messagesBody(request, { model: this.model, maxTokens: this.maxTokens, promptCaching: false }) as unknown as Record<string, unknown>,
    );
    const keys = [...new Set([...Object.keys(live), ...agent.fields.keys(), 'messages'])].sort();
    for (const key of keys) {
      if (key === 'messages') {
        const path = this.compareMessages(agent.messages, request.messages, unchanged);
        if (path !== undefined) return path;
        continue;
      }
      const recorded = agent.fields.get(key);
      const text = key in live ? this.redactor.json(canonicalJson(live[key])) : undefined;
      if (text === recorded) continue;
      if (text === undefined || recorded === undefined) return key;
      return firstDifference(JSON.parse(text), JSON.parse(recorded), key) ?? key;
    }
    return undefined;
  }

  private compareMessages(recorded: readonly string[], messages: readonly Message[], from: number): string | undefined {
    for (let i = from; i < Math.max(recorded.length, messages.length); i++) {
      const message = messages[i];
      const want = recorded[i];
      if (message === undefined || want === undefined) return `messages[${i}]`;
      let text = this.texts.get(message);
      if (text === undefined) this.texts.set(message, (text = this.redactor.json(canonicalJson(message))));
      if (text !== want) return firstDifference(JSON.parse(text), JSON.parse(want), `messages[${i}]`) ?? `messages[${i}]`;
    }
    return undefined;
  }
}

/**
 * A provider that replays the recording in `file` (see `ReplayProvider`): pass it where the live
 * provider went to turn a real run into an offline regression test.
 *
 * @example
 * // exarch run --record login-bug.jsonl "Why do logins fail?"   (once, against Claude)
 * const result = await runAgent('Why do logins fail?', { provider: replayProvider('login-bug.jsonl'), tools: workspaceTools({ root }) });
 * expect(result.text).toContain('cookie');
 */
export function replayProvider(file: string, options: ReplayProviderOptions = {}): ReplayProvider {
  return new ReplayProvider(file, options);
}

function keyOf(agent: string, index: number): string {
  return `${agent}\u0000${index}`;
}

/** The recorded answer, through the assembler a live stream goes through: the same deltas, the same message, the same faults. */
async function play(exchange: RecordedExchange, sink: StreamSink, signal: AbortSignal): Promise<ModelResponse> {
  const assembler = new MessageAssembler(sink);
  for (const event of exchange.events) {
    if (signal.aborted) throw signal.reason;
    assembler.apply(event);
  }
  const fault = exchange.fault;
  if (fault?.kind === 'aborted') {
    // Cancelled when recorded: the same cancellation comes again.
    await new Promise<never>((_, reject) => {
      if (signal.aborted) reject(signal.reason);
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
  }
  if (fault?.kind === 'provider') {
    throw new ProviderError(fault.message, {
      retryable: fault.retryable,
      ...(fault.status === undefined ? {} : { status: fault.status }),
      kind: fault.errorKind,
    });
  }
  return assembler.finish();
}

/**
 * The header and exchanges of a recording file; anything else is one line naming the file and the
 * line. A FIFO or a device is refused without waiting on it, a file over MAX_RECORDING_BYTES by
 * its size (regularFile.ts).
 */
export function readRecording(file: string): { header: RecordingHeader; exchanges: RecordedExchange[] } {
  let text: string;
  try {
    text = readRegular(file, MAX_RECORDING_BYTES, { what: 'the recording' }).toString('utf8');
  } catch (error) {
    throw new RecordingError('unreadable', fileErrorOf(error, file, { what: 'the recording', writing: false }).message);
  }
  const lines = text.split('\n');
  let header: RecordingHeader | undefined;
  const exchanges: RecordedExchange[] = [];
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]?.trim();
    if (!line) continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      throw new RecordingError('invalid', `${file} is not an exarch recording: line ${i + 1} is not JSON`);
    }
    const kind = (value as { kind?: unknown } | null)?.kind;
    if (header === undefined) {
      if (kind !== 'exarch.recording') throw new RecordingError('invalid', `${file} is not an exarch recording (made by exarch run --record)`);
      header = value as RecordingHeader;
      if (header.version !== RECORDING_VERSION)
        throw new RecordingError(
          'other-version',
          `${file} is a recording of version ${String(header.version)}; this exarch replays version ${RECORDING_VERSION}`,
        );
      continue;
    }
    if (kind !== 'exchange' || !isExchange(value)) throw new RecordingError('invalid', `${file}: line ${i + 1} is not a recorded exchange`);
    exchanges.push(value);
  }
  if (!header) throw new RecordingError('invalid', `${file} is empty: not an exarch recording`);
  return { header, exchanges };
}

function isExchange(value: unknown): value is RecordedExchange {
  const e = value as Partial<RecordedExchange>;
  return (
    typeof e.agent === 'string' &&
    Number.isSafeInteger(e.index) &&
    Number.isSafeInteger(e.start) &&
    Number.isSafeInteger(e.end) &&
    (e.startMs === undefined || isTime(e.startMs)) &&
    (e.endMs === undefined || isTime(e.endMs)) &&
    Number.isSafeInteger(e.keep) &&
    typeof e.fields === 'object' &&
    e.fields !== null &&
    Array.isArray(e.messages) &&
    Array.isArray(e.events) &&
    // Replayed as a ProviderError's kind: one this exarch knows.
    (e.fault?.kind !== 'provider' || (PROVIDER_ERROR_KINDS as readonly string[]).includes(e.fault.errorKind))
  );
}

function isTime(value: unknown): boolean {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
