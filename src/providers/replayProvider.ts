import { fileErrorOf } from '../engine/fs/fileError.js';
import { readRegular } from '../engine/fs/regularFile.js';
import { PROVIDER_ERROR_KINDS, ProviderError } from '../engine/model/errors.js';
import { MessageAssembler, messagesBody } from './anthropic.js';
import { Redactor } from '../engine/redact.js';
import type { RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages/messages';
import { depthExceeds } from '../engine/nesting.js';
import { jsonLines } from '../engine/jsonLines.js';
import type { Message, ModelRequest, ModelResponse, Provider, StreamSink } from '../engine/types.js';
import { ExchangeOrder } from '../replay/exchangeOrder.js';
import { canonicalJson, firstDifference, HistoryCursor, requestFields } from '../replay/fingerprint.js';
import { MAX_RECORDING_BYTES, RECORDING_VERSION, RecordingError, ReplayMismatchError, type RecordedExchange, type RecordingHeader } from '../replay/format.js';

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
 * Nesting a recording's line may have: an exchange wraps a tool input (at most 64 levels) in six,
 * a tool's schema (at most 32) in four. Deeper, comparing it would exhaust the stack.
 */
const MAX_LINE_DEPTH = 256;

/** Places in a recording's order taken by requests that never ended (a process killed mid-run), at most. */
const MAX_LOST_PLACES = 65_536;

/**
 * The header and exchanges of a recording file; anything else is one line naming the file and the
 * line. A FIFO or a device is refused without waiting on it, a file over MAX_RECORDING_BYTES by
 * its size (regularFile.ts). Each exchange is checked for everything a replay reads of it, its
 * answer included (played once through an assembler that keeps nothing), so that a damaged or
 * foreign file is refused before the run starts rather than failing it halfway with JavaScript's
 * words.
 */
export function readRecording(file: string): { header: RecordingHeader; exchanges: RecordedExchange[] } {
  let text: string;
  try {
    text = readRegular(file, MAX_RECORDING_BYTES, { what: 'the recording' }).toString('utf8');
  } catch (error) {
    throw new RecordingError('unreadable', fileErrorOf(error, file, { what: 'the recording', writing: false }).message);
  }
  let header: RecordingHeader | undefined;
  const exchanges: RecordedExchange[] = [];
  /** The line each exchange came from, and each agent's request numbers and each position, to find them twice. */
  const lineOf = new Map<RecordedExchange, number>();
  const keys = new Set<string>();
  const positions = new Set<number>();
  for (const entry of jsonLines(text)) {
    const line = entry.line;
    if (!entry.json) throw new RecordingError('invalid', `${file} is not an exarch recording: line ${line} is not JSON`);
    const value = entry.value;
    const kind = (value as { kind?: unknown } | null)?.kind;
    if (header === undefined) {
      if (kind !== 'exarch.recording') throw new RecordingError('invalid', `${file} is not an exarch recording (made by exarch run --record)`);
      header = value as RecordingHeader;
      if (header.version !== RECORDING_VERSION)
        throw new RecordingError(
          'other-version',
          `${file} is a recording of version ${String(header.version)}; this exarch replays version ${RECORDING_VERSION}`,
        );
      if (typeof header.model !== 'string' || !Number.isSafeInteger(header.maxTokens) || header.maxTokens < 1)
        throw new RecordingError('invalid', `${file}: line ${line}, its header, names no model and output cap`);
      continue;
    }
    const problem =
      kind !== 'exchange'
        ? 'it is no exchange'
        : depthExceeds(value, MAX_LINE_DEPTH)
          ? `it nests deeper than ${MAX_LINE_DEPTH} levels`
          : exchangeProblem(value);
    if (problem !== undefined) throw new RecordingError('invalid', `${file}: line ${line} is not a recorded exchange (${problem})`);
    const exchange = value as RecordedExchange;
    const key = keyOf(exchange.agent, exchange.index);
    if (keys.has(key))
      throw new RecordingError(
        'invalid',
        `${file}: line ${line} is not a recorded exchange (a second request ${exchange.index + 1} of agent ${exchange.agent})`,
      );
    if (positions.has(exchange.start) || positions.has(exchange.end) || exchange.start === exchange.end)
      throw new RecordingError('invalid', `${file}: line ${line} is not a recorded exchange (its place in the run's order is taken)`);
    keys.add(key);
    positions.add(exchange.start).add(exchange.end);
    lineOf.set(exchange, line);
    exchanges.push(exchange);
  }
  if (!header) throw new RecordingError('invalid', `${file} is empty: not an exarch recording`);
  // Each exchange has a beginning and an end in one sequence. Requests in flight when the recorded
  // process died took places too, and were never written: some room is left for them, not a
  // place of any size (the replay allocates one slot per place).
  const places = 2 * exchanges.length + MAX_LOST_PLACES;
  for (const exchange of exchanges)
    if (exchange.start >= places || exchange.end >= places)
      throw new RecordingError(
        'invalid',
        `${file}: line ${lineOf.get(exchange) ?? '?'} is not a recorded exchange (its place in the run's order is past its end)`,
      );
  return { header, exchanges };
}

/** What is wrong with a line of a recording for a replay; undefined when nothing is. */
function exchangeProblem(value: unknown): string | undefined {
  const e = value as Partial<RecordedExchange>;
  if (typeof e.agent !== 'string' || !isCount(e.index)) return 'it names no agent and request';
  if (!isCount(e.start) || !isCount(e.end)) return "its place in the run's order is not a count";
  if ((e.startMs !== undefined && !isTime(e.startMs)) || (e.endMs !== undefined && !isTime(e.endMs))) return 'its times are not times';
  if (!isCount(e.keep)) return 'the messages it keeps are not a count';
  if (typeof e.fields !== 'object' || e.fields === null || Array.isArray(e.fields)) return 'its request has no fields';
  if (e.dropped !== undefined && !(Array.isArray(e.dropped) && e.dropped.every((key) => typeof key === 'string'))) return 'its dropped fields are not names';
  if (!Array.isArray(e.messages)) return 'its request has no messages';
  if (!Array.isArray(e.events)) return 'it has no answer';
  const fault = e.fault as unknown;
  if (fault !== undefined && faultProblem(fault) !== undefined) return faultProblem(fault);
  return answerProblem(e.events, e.fault);
}

/** A recorded fault: a provider's (replayed as a ProviderError of a kind this exarch knows) or a cancellation. */
function faultProblem(fault: unknown): string | undefined {
  const f = fault as Record<string, unknown> | null;
  if (f?.['kind'] === 'aborted') return undefined;
  if (
    f?.['kind'] === 'provider' &&
    typeof f['message'] === 'string' &&
    typeof f['retryable'] === 'boolean' &&
    (f['status'] === undefined || Number.isSafeInteger(f['status'])) &&
    (PROVIDER_ERROR_KINDS as readonly unknown[]).includes(f['errorKind'])
  )
    return undefined;
  return 'its fault is none a replay can give again';
}

/**
 * Plays the recorded answer through an assembler that keeps nothing: an answer recorded whole must
 * assemble into a message again, and one cut off by a cancellation must not break the protocol on
 * the way. (One that ended with a provider's fault may: that fault is what a replay gives again.)
 */
function answerProblem(events: readonly unknown[], fault: RecordedExchange['fault']): string | undefined {
  if (fault?.kind === 'provider') return undefined;
  const assembler = new MessageAssembler(SILENT_SINK);
  try {
    for (const event of events) assembler.apply(event as RawMessageStreamEvent);
    if (fault === undefined) assembler.finish();
    return undefined;
  } catch (error) {
    if (!(error instanceof ProviderError)) throw error;
    return `its answer would fail: ${error.message}`;
  }
}

const SILENT_SINK: StreamSink = { text: () => undefined, toolUseStart: () => undefined, toolInputDelta: () => undefined, heartbeat: () => undefined };

function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

function isTime(value: unknown): boolean {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0;
}
