import { ProviderError } from '../engine/model/errors.js';
import { sleep } from '../engine/model/streamModel.js';
import { findPairingProblems } from '../engine/pairing.js';
import { stringifyBounded } from '../engine/nesting.js';
import { ZERO_USAGE } from '../engine/usage.js';
import type { AssistantBlock, Message, ModelRequest, ModelResponse, Provider, StopReason, StreamSink, Usage } from '../engine/types.js';

/** A tool call in a scripted step. */
export interface ScriptedCall {
  readonly name: string;
  readonly input?: Record<string, unknown>;
  /** Defaults to a fresh `toolu_…` id. */
  readonly id?: string;
  /** The block is cut off mid-input: no `content_block_stop`, so the session must not execute it. */
  readonly cutOff?: boolean;
}

/** A block of a scripted message: a string is text. */
export type ScriptedBlock = string | ScriptedCall;

/** A provider fault. */
export interface ScriptedFault {
  /** Before the first event (an HTTP error), or after this many stream events (an SSE `error` / dropped connection). */
  readonly after?: number;
  readonly message?: string;
  /** Retryable faults are retried by the session; others fail it. Default true. */
  readonly retryable?: boolean;
  readonly status?: number;
}

/** One model response. */
export interface ScriptedStep {
  /** Text first, then `calls`; or give `content` for any order. */
  readonly text?: string;
  readonly calls?: readonly ScriptedCall[];
  readonly content?: readonly ScriptedBlock[];
  /** Default: `max_tokens` if a call is cut off, `tool_use` if there are calls, else `end_turn`. */
  readonly stopReason?: StopReason;
  /**
   * The response's usage. Its input side (all but `outputTokens`) is reported with the first stream
   * event, as the API's `message_start` does; the whole at the end.
   */
  readonly usage?: Partial<Usage>;
  /** Wait before the first event. */
  readonly delayMs?: number;
  /**
   * Hold the response until this settles (then `delayMs`): a test lets an agent answer once
   * something else has happened, on any machine, where a delay would only make that likely.
   */
  readonly after?: PromiseLike<unknown>;
  /** Characters per text delta (default 64) and a wait between deltas (default none). */
  readonly chunkSize?: number;
  readonly chunkDelayMs?: number;
  /** Fail instead of (or part-way through) responding. */
  readonly fault?: ScriptedFault;
  /** Stop sending events after this many (or at once): only the stall watchdog or an abort ends the request. */
  readonly stallAfter?: number;
  /** Throw a plain error (a provider bug, not a fault it reports). */
  readonly crash?: string;
}

/** The steps for one agent in order, or a function of each request (`index` counts that agent's requests from 0). */
export type Script = readonly ScriptedStep[] | ((request: ModelRequest, index: number) => ScriptedStep);

export interface ScriptedProviderOptions {
  /** Scripts by agent id (`root/explorer`), then by name (`explorer`), then `*` for any agent. */
  readonly agents: Readonly<Record<string, Script>>;
  /** Check every request against the tool_use/tool_result pairing rule (default true). */
  readonly checkPairing?: boolean;
  /** The model it stands in for, as telemetry reports it (`chat {model}` spans); default none. */
  readonly model?: string;
}

/** What the provider saw of one request; kept small so long sessions stay cheap. */
export interface RecordedRequest {
  readonly agentId: string;
  readonly index: number;
  readonly messageCount: number;
  readonly lastMessage: Message | undefined;
  readonly tools: readonly string[];
  readonly system: string;
  /** The model the request asked for (a declared agent's `model`); absent when it named none. */
  readonly model?: string;
}

/**
 * The deterministic scripted provider: the model `exarch/testing` users write tests with, and
 * the one `exarch demo` runs. Each agent follows its own script; every request is checked
 * against the pairing rule, and a violation fails the request and is kept in `pairingViolations`.
 */
export class ScriptedProvider implements Provider {
  readonly name = 'scripted';
  readonly model: string | undefined;
  readonly requests: RecordedRequest[] = [];
  readonly pairingViolations: { agentId: string; problems: string[] }[] = [];
  private readonly cursors = new Map<string, number>();
  private nextId = 0;

  constructor(private readonly options: ScriptedProviderOptions) {
    this.model = options.model;
  }

  /** Requests made by one agent (by id). */
  requestsOf(agentId: string): RecordedRequest[] {
    return this.requests.filter((r) => r.agentId === agentId);
  }

  async stream(request: ModelRequest, sink: StreamSink): Promise<ModelResponse> {
    const { agent } = request;
    const key = [agent.id, agent.name, '*'].find((k) => this.options.agents[k] !== undefined);
    if (key === undefined) throw new ProviderError(`scripted provider: no script for agent '${agent.id}'`, { retryable: false });
    const script = this.options.agents[key] as Script;
    const cursorKey = `${key}\u0000${agent.id}`;
    const index = this.cursors.get(cursorKey) ?? 0;
    this.cursors.set(cursorKey, index + 1);
    this.requests.push({
      agentId: agent.id,
      index,
      messageCount: request.messages.length,
      lastMessage: request.messages[request.messages.length - 1],
      tools: request.tools.map((t) => t.name),
      system: request.system,
      ...(request.model === undefined ? {} : { model: request.model }),
    });
    if (this.options.checkPairing !== false) {
      const problems = findPairingProblems(request.messages);
      const last = request.messages[request.messages.length - 1];
      if (last?.role === 'assistant' && last.content.some((b) => b.type === 'tool_use')) problems.push('request ends with unanswered tool_use');
      if (problems.length > 0) {
        this.pairingViolations.push({ agentId: agent.id, problems });
        throw new ProviderError(`request breaks the pairing rule: ${problems.join('; ')}`, { retryable: false, status: 400 });
      }
    }
    const step = typeof script === 'function' ? script(request, index) : script[index];
    if (!step) {
      throw new ProviderError(`scripted provider: the script for '${key}' has no step ${index + 1} (agent '${agent.id}')`, { retryable: false });
    }
    return this.play(step, request, sink);
  }

  private async play(step: ScriptedStep, request: ModelRequest, sink: StreamSink): Promise<ModelResponse> {
    const { signal } = request;
    if (step.crash !== undefined) throw new Error(step.crash);
    if (step.after) await heldUntil(step.after, signal);
    if (step.delayMs) await sleep(step.delayMs, signal);
    let events = 0;
    // What the API's message_start reports: the input side is known (and billed) before any output.
    const input = { ...ZERO_USAGE, inputTokens: 10 * request.messages.length + 10, ...step.usage, outputTokens: 0 };
    // Each stream event: check for an abort, a scripted fault or a stall first.
    const event = async (emit: () => void): Promise<void> => {
      if (signal.aborted) throw signal.reason;
      if (step.fault && (step.fault.after ?? 0) <= events) throw faultError(step.fault, events);
      if (step.stallAfter !== undefined && step.stallAfter <= events)
        await new Promise<never>((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
      if (events === 0) sink.usage?.(input);
      emit();
      events += 1;
      if (step.chunkDelayMs) await sleep(step.chunkDelayMs, signal);
    };
    const blocks = step.content ?? [...(step.text ? [step.text] : []), ...(step.calls ?? [])];
    const content: AssistantBlock[] = [];
    const incomplete: string[] = [];
    const chunkSize = step.chunkSize ?? 64;
    for (const block of blocks) {
      if (typeof block === 'string') {
        for (let i = 0; i < block.length; i += chunkSize) {
          const delta = block.slice(i, i + chunkSize);
          await event(() => sink.text(delta));
        }
        if (block.length === 0) await event(() => sink.heartbeat());
        content.push({ type: 'text', text: block });
        continue;
      }
      const id = block.id ?? `toolu_scripted_${String(++this.nextId).padStart(6, '0')}`;
      // A script may hold a value of any depth (the session refuses one too deep); streaming it never overflows.
      const json = stringifyBounded(block.input ?? {});
      await event(() => sink.toolUseStart(id, block.name));
      // A cut-off call streams half its input and never completes.
      const streamed = block.cutOff ? json.slice(0, Math.max(1, Math.floor(json.length / 2))) : json;
      for (let i = 0; i < streamed.length; i += chunkSize) {
        const delta = streamed.slice(i, i + chunkSize);
        await event(() => sink.toolInputDelta(id, delta));
      }
      content.push({ type: 'tool_use', id, name: block.name, input: block.cutOff ? {} : (block.input ?? {}) });
      if (block.cutOff) incomplete.push(id);
    }
    await event(() => sink.heartbeat()); // message_stop
    const hasCalls = content.some((b) => b.type === 'tool_use');
    const stopReason = step.stopReason ?? (incomplete.length > 0 ? 'max_tokens' : hasCalls ? 'tool_use' : 'end_turn');
    const outputChars = blocks.reduce<number>((n, b) => n + (typeof b === 'string' ? b.length : stringifyBounded(b.input ?? {}).length), 0);
    return {
      content,
      stopReason,
      usage: { ...input, outputTokens: Math.ceil(outputChars / 4) + 1, ...step.usage },
      incompleteToolUseIds: incomplete,
    };
  }
}

function faultError(fault: ScriptedFault, events: number): ProviderError {
  const where = events === 0 ? 'before the stream' : `after ${events} stream events`;
  return new ProviderError(fault.message ?? `scripted fault ${where}`, {
    retryable: fault.retryable ?? true,
    ...(fault.status === undefined ? {} : { status: fault.status }),
    kind: events === 0 ? 'http' : 'stream',
  });
}

export function scriptedProvider(options: ScriptedProviderOptions): ScriptedProvider {
  return new ScriptedProvider(options);
}

/** Settles when `after` does, or rejects with the abort reason once `signal` aborts (a cancelled request stops waiting). */
function heldUntil(after: PromiseLike<unknown>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    after.then(
      () => {
        signal.removeEventListener('abort', onAbort);
        resolve();
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}
