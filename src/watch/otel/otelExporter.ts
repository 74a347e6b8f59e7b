import {
  context as otelContext,
  isSpanContextValid,
  SpanKind,
  SpanStatusCode,
  trace,
  TraceFlags,
  type Attributes,
  type Context,
  type Span,
  type SpanContext,
  type Tracer,
} from '@opentelemetry/api';
import type { AnyActorRef } from 'xstate';
import type { PlannedIds } from './plannedIds.js';

// `exarch/otel` offers the id generator with the exporter that reads it.
export { PlannedIds } from './plannedIds.js';
import type { AgentStartedEvent, RunEvent } from '../observe/events.js';
import { observe } from '../observe/runObserver.js';
import { Redactor } from '../../engine/redact.js';
import type { Message, Usage } from '../../engine/types.js';
import { addUsage, ZERO_USAGE } from '../../engine/usage.js';

/**
 * A run as OpenTelemetry spans, following the GenAI semantic conventions (agent spans, inference
 * spans, execute-tool spans; `gen_ai.*` attributes as the conventions' registry spells them):
 *
 * - `invoke_agent {name}` (INTERNAL) for each session, the root and every sub-agent, a child of
 *   the span of the agent that spawned it;
 * - `chat {model}` (CLIENT) for each model request of a session, retries included, with its
 *   tokens (`gen_ai.usage.*`) and stop reason (`gen_ai.response.finish_reasons`);
 * - `execute_tool {tool}` (INTERNAL) for each tool call, `agent`, `reply` and the other protocol
 *   tools included, with `gen_ai.tool.call.id`.
 *
 * Errors set the span's status (`ERROR`, with `error.type`): a failed request, a tool's error
 * result, a failed or crashed agent. Message content (histories, tool arguments and results,
 * system prompts) is exported only with `captureContent`, and secrets of the environment are
 * redacted from it as from everything else exarch writes (see redact.ts).
 *
 * Built on the run's events (src/watch/observe/), so it sees what every other observer sees, and on
 * `@opentelemetry/api` alone: without a tracer provider registered by the host it costs next to
 * nothing, and the host's SDK, exporter and sampler decide where spans go.
 */

/** The instrumentation scope spans are created under (`trace.getTracer(TRACER_NAME)` by default). */
export const TRACER_NAME = 'exarch';

export interface OtelExporterOptions {
  /** Where spans are made; default `trace.getTracer('exarch')` of the globally registered provider (a no-op without one). */
  readonly tracer?: Tracer;
  /**
   * Export message content: `gen_ai.input.messages`, `gen_ai.output.messages` and
   * `gen_ai.system_instructions` on chat spans, `gen_ai.tool.call.arguments` and
   * `gen_ai.tool.call.result` on tool spans. Off by default: content may hold personal data, and
   * each chat span then carries the agent's whole history as sent (the conventions' definition),
   * so a long session exports the square of its length.
   */
  readonly captureContent?: boolean;
  /** The parent of the root agent's span; default the context active when the exporter is made. */
  readonly context?: Context;
  /** Set as `gen_ai.conversation.id` on every span (a run id, a chat thread's id). */
  readonly conversationId?: string;
  /** `gen_ai.provider.name`; default the provider's own `name` (`anthropic`). */
  readonly providerName?: string;
  /** Secrets kept out of exported text (default: those of `process.env`; see redact.ts). */
  readonly redactor?: Redactor;
  /**
   * Agents' spans opened in other processes, or earlier in this one, for a run whose sessions run
   * in several (a run spread over workers, a run taken up again): an agent whose span is known
   * continues under it (its model and tool spans become its children) instead of opening a second
   * one, and an agent whose parent runs elsewhere is opened under the parent's span. Every span
   * this exporter opens is recorded in it. With a directory, an agent stopped from outside goes on
   * elsewhere: its open calls end unfailed, marked `exarch.tool.continued` (its span, if opened
   * here, `exarch.agent.continued`).
   */
  readonly directory?: SpanDirectory;
  /**
   * The tracer provider's id generator, when it is a `PlannedIds` (with a `directory`): then an
   * agent span is not opened when the session starts but planned (its ids and start recorded in
   * the directory, its model and tool spans parented under them), and emitted once, whole, by the
   * job in which the session ends (`exarch.agent.outcome` and all), not by one it parks in.
   */
  readonly ids?: PlannedIds;
}

/** Where the agents' span contexts of one run are kept for every process that runs part of it. */
export interface SpanDirectory {
  /** The span an agent's span was opened as (elsewhere, or before), if any. */
  get(agentId: string): SpanContext | undefined;
  /** An agent's span was opened (or planned) here, starting at `start`. */
  set(agentId: string, span: SpanContext, start?: number): void;
  /** When an agent's span started (or was planned to), if recorded. */
  startOf?(agentId: string): number | undefined;
}

/** The open spans of one agent. */
interface AgentSpans {
  readonly started: AgentStartedEvent;
  span: Span | undefined;
  context: Context | undefined;
  /** Model requests seen begun (from `agent.state`). */
  requests: number;
  /** A request began; its span starts at the next snapshot, which says the model. */
  pendingRequest: number | undefined;
  chat: OpenChat | undefined;
  readonly tools: Map<string, Span>;
  /** With planned ids: the span's ids, its start and its parent, the span emitted when the session ends. */
  planned: { readonly span: SpanContext; readonly start: number; readonly parent: Context; readonly provider: string | undefined } | undefined;
  /** Its last snapshot was at rest with nothing left (no sub-agent, nothing to take): a stop then ends it. */
  atRest: boolean;
  /** Span events (deliveries, waits in a budget's queue) seen while the span is only planned, added to it when it is emitted. */
  readonly pendingEvents: { readonly name: string; readonly attributes: Attributes; readonly time: number }[];
  /** Each message of the history in the conventions' JSON form (only with `captureContent`). */
  readonly content: string[];
  /** Its requests served and not kept (retried, failed, aborted), set on its span as it ends. */
  lostRequests: number;
  lostUsage: Usage;
}

interface OpenChat {
  readonly span: Span;
  /** When the response arrived; the span ends at the snapshot that commits it. */
  respondedAt: number | undefined;
  finishReason: string | undefined;
}

/**
 * The spans of one run's agents: an agent's span is opened on first need under its parent's (or
 * planned, or continued from another process, with a `directory`), and closed with the calls it
 * left open and its outcome. `OtelRunExporter` turns the run's events into them and into the
 * model and tool spans beneath them.
 */
abstract class RunSpans {
  protected readonly tracer: Tracer;
  protected readonly capture: boolean;
  private readonly base: Context;
  protected readonly common: Attributes;
  protected readonly providerName: string | undefined;
  protected readonly redactor: Redactor;
  protected readonly agents = new Map<string, AgentSpans>();
  private readonly directory: SpanDirectory | undefined;
  private readonly ids: PlannedIds | undefined;

  constructor(options: OtelExporterOptions = {}) {
    this.directory = options.directory;
    this.ids = options.directory ? options.ids : undefined;
    this.tracer = options.tracer ?? trace.getTracer(TRACER_NAME);
    this.capture = options.captureContent === true;
    this.base = options.context ?? otelContext.active();
    this.common = options.conversationId === undefined ? {} : { 'gen_ai.conversation.id': options.conversationId };
    this.providerName = options.providerName;
    this.redactor = options.redactor ?? Redactor.fromEnv();
  }

  protected contextOf(agent: AgentSpans): Context {
    return this.openAgent(agent, undefined);
  }

  /** The agent's span, started on first need, under its parent's. */
  protected openAgent(agent: AgentSpans, providerName: string | undefined): Context {
    if (agent.context) return agent.context;
    const { started } = agent;
    const parent = started.parent === null ? undefined : this.agents.get(started.parent);
    const remoteParent = parent || started.parent === null ? undefined : this.directory?.get(started.parent);
    const parentContext = parent ? this.contextOf(parent) : remoteParent ? trace.setSpanContext(this.base, remoteParent) : this.base;
    // Opened (or planned) before, in another job or process: continued under that span, not opened twice.
    const opened = this.directory?.get(started.agent);
    if (opened && this.ids) {
      agent.planned = { span: opened, start: this.directory?.startOf?.(started.agent) ?? started.time, parent: parentContext, provider: providerName };
      agent.context = trace.setSpanContext(this.base, opened);
      return agent.context;
    }
    if (opened) {
      agent.context = trace.setSpanContext(this.base, opened);
      return agent.context;
    }
    if (this.ids) {
      // Planned: its children parent under these ids now; the span itself is emitted when the session ends.
      const above = trace.getSpanContext(parentContext);
      const span: SpanContext = {
        traceId: above && isSpanContextValid(above) ? above.traceId : this.ids.traceId(),
        spanId: this.ids.spanId(),
        traceFlags: above?.traceFlags ?? TraceFlags.SAMPLED,
        isRemote: true,
      };
      agent.planned = { span, start: started.time, parent: parentContext, provider: providerName };
      agent.context = trace.setSpanContext(this.base, span);
      this.directory?.set(started.agent, span, started.time);
      return agent.context;
    }
    agent.span = this.startAgentSpan(agent, providerName, started.time, parentContext);
    agent.context = trace.setSpan(parentContext, agent.span);
    this.directory?.set(started.agent, agent.span.spanContext(), started.time);
    return agent.context;
  }

  private startAgentSpan(agent: AgentSpans, providerName: string | undefined, startTime: number, parentContext: Context): Span {
    const { started } = agent;
    const provider = this.providerName ?? providerName;
    return this.tracer.startSpan(
      `invoke_agent ${started.name}`,
      {
        kind: SpanKind.INTERNAL,
        startTime,
        attributes: {
          ...this.common,
          'gen_ai.operation.name': 'invoke_agent',
          ...(provider === undefined ? {} : { 'gen_ai.provider.name': provider }),
          'gen_ai.agent.name': started.name,
          'gen_ai.agent.id': started.agent,
          'exarch.agent.depth': started.depth,
          ...(this.capture && started.task !== ''
            ? { 'gen_ai.input.messages': this.redactor.text(JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: started.task }] }])) }
            : {}),
        },
      },
      parentContext,
    );
  }

  protected closeAgent(id: string, time: number, ended: Extract<RunEvent, { type: 'agent.ended' }> | undefined): void {
    const agent = this.agents.get(id);
    if (!agent) return;
    this.agents.delete(id);
    this.openAgent(agent, undefined);
    // With a directory, a session stopped from outside is taken up again by another job (a spread
    // session parked to wait for its sub-agents, a run handed back): its calls go on there. One at
    // rest with nothing left (a root whose run is done) has ended.
    const continued = this.directory !== undefined && ended?.status === 'stopped' && !agent.atRest;
    for (const tool of agent.tools.values()) {
      if (continued) tool.setAttribute('exarch.tool.continued', true);
      else this.fail(tool, 'cancelled', 'the session ended before the call was answered');
      tool.end(time);
    }
    agent.tools.clear();
    if (agent.chat) {
      if (agent.chat.respondedAt === undefined) this.fail(agent.chat.span, 'cancelled', 'the session ended during the request');
      agent.chat.span.end(agent.chat.respondedAt ?? time);
      agent.chat = undefined;
    }
    // A planned span is emitted once, whole, by the job in which the session ends.
    const planned = agent.planned;
    if (planned && !continued && this.ids) {
      agent.span = this.ids.startWith(planned.span, () => this.startAgentSpan(agent, planned.provider, planned.start, planned.parent));
      for (const pending of agent.pendingEvents) agent.span.addEvent(pending.name, pending.attributes, pending.time);
    }
    const span = agent.span;
    if (!span) return;
    if (continued) span.setAttribute('exarch.agent.continued', true);
    if (agent.lostRequests > 0)
      span.setAttributes({
        'exarch.requests.lost': agent.lostRequests,
        'exarch.usage.lost.input_tokens': agent.lostUsage.inputTokens + agent.lostUsage.cacheReadInputTokens + agent.lostUsage.cacheCreationInputTokens,
        'exarch.usage.lost.output_tokens': agent.lostUsage.outputTokens,
      });
    if (ended?.outcome !== undefined) span.setAttribute('exarch.agent.outcome', ended.outcome);
    if (ended?.status === 'error') this.fail(span, 'crash', ended.reason ?? 'the session crashed');
    else if (ended?.outcome === 'failed') this.fail(span, 'failed', ended.reason ?? 'the agent failed');
    else if (ended?.reason !== undefined) span.setAttribute('exarch.agent.reason', this.redactor.text(ended.reason));
    span.end(time);
  }

  /** An event on the agent's span; while the span is only planned, kept for when it is emitted. */
  protected agentEvent(agent: AgentSpans, name: string, attributes: Attributes, time: number): void {
    this.openAgent(agent, undefined);
    if (agent.planned) agent.pendingEvents.push({ name, attributes, time });
    else agent.span?.addEvent(name, attributes, time);
  }

  protected fail(span: Span, type: string, message: string): void {
    span.setAttribute('error.type', type);
    span.setStatus({ code: SpanStatusCode.ERROR, message: this.redactor.text(message) });
  }
}

/**
 * Turns one run's events into spans: feed it every event of a run, in order (`onEvent`, as a
 * `RunObserver` listener), or let `otelExporter` attach it to an actor.
 *
 * @example
 * const observer = createRunObserver();
 * const spans = new OtelRunExporter({ captureContent: false });
 * observer.subscribe(spans.onEvent);
 * await runAgent(task, { provider }, { inspect: observer.inspect });
 */
export class OtelRunExporter extends RunSpans {
  /** One run event; pass as a `RunObserver` listener. */
  readonly onEvent = (event: RunEvent): void => {
    switch (event.type) {
      case 'agent.started':
        this.agents.set(event.agent, {
          started: event,
          span: undefined,
          context: undefined,
          requests: 0,
          pendingRequest: undefined,
          chat: undefined,
          tools: new Map(),
          planned: undefined,
          atRest: false,
          pendingEvents: [],
          content: [],
          lostRequests: 0,
          lostUsage: ZERO_USAGE,
        });
        break;
      case 'agent.state': {
        const agent = this.agents.get(event.agent);
        // A session queued for room in its budget says so on its span, from the time it began to wait.
        if (agent && event.state === 'queued') this.agentEvent(agent, 'exarch.queued', { 'exarch.queued.reason': 'budget' }, event.time);
        if (!agent || event.requests <= agent.requests) break;
        agent.requests = event.requests;
        // A continuation (pause_turn) begins while the response before it still waits for its commit.
        this.endChat(agent, event.time);
        agent.pendingRequest = event.time;
        break;
      }
      case 'agent.snapshot': {
        const agent = this.agents.get(event.agent);
        if (!agent) break;
        const { options, fixed, children, inbox, pendingUser } = event.snapshot.context;
        agent.atRest = event.snapshot.value === 'readyForUser' && children.size === 0 && inbox.length === 0 && pendingUser.length === 0;
        this.openAgent(agent, options.provider.name);
        this.endChat(agent, event.time);
        if (agent.pendingRequest !== undefined) {
          this.openChat(agent, agent.pendingRequest, options.provider.name, options.model ?? options.provider.model, fixed.system);
          agent.pendingRequest = undefined;
        }
        break;
      }
      case 'message':
        this.onMessage(event.agent, event.index, event.message, event.time);
        break;
      case 'model.response': {
        const agent = this.agents.get(event.agent);
        if (!agent) break;
        const chat = agent.chat ?? this.openChat(agent, event.time, undefined, undefined, undefined);
        chat.span.setAttributes({ ...usageAttributes(event.usage), 'gen_ai.response.finish_reasons': [event.stopReason] });
        chat.respondedAt = event.time;
        chat.finishReason = event.stopReason;
        break;
      }
      case 'model.error': {
        const chat = this.agents.get(event.agent)?.chat;
        if (!chat) break;
        this.fail(chat.span, errorTypeOf(event.message), event.message);
        chat.span.end(event.time);
        const agent = this.agents.get(event.agent);
        if (agent) agent.chat = undefined;
        break;
      }
      case 'model.lost': {
        const agent = this.agents.get(event.agent);
        if (!agent) break;
        agent.lostRequests += event.requests;
        agent.lostUsage = addUsage(agent.lostUsage, event.usage);
        const chat = agent.chat;
        if (!chat) break;
        if (event.reason === 'retried') {
          // The chat's usage is its kept response's: what the retried streams spent is an event of it.
          chat.span.addEvent('exarch.request.retried', { 'exarch.requests': event.requests, ...usageAttributes(event.usage) }, event.time);
          break;
        }
        // The request of this chat: served, its tokens spent, its response never kept.
        chat.span.setAttributes(usageAttributes(event.usage));
        if (event.reason === 'aborted') {
          this.fail(chat.span, 'cancelled', 'the request was aborted');
          chat.span.end(event.time);
          agent.chat = undefined;
        }
        break;
      }
      case 'tool.call': {
        const agent = this.agents.get(event.agent);
        if (!agent) break;
        const span = this.tracer.startSpan(
          `execute_tool ${event.name}`,
          {
            kind: SpanKind.INTERNAL,
            startTime: event.time,
            attributes: {
              ...this.common,
              'gen_ai.operation.name': 'execute_tool',
              'gen_ai.tool.name': event.name,
              'gen_ai.tool.call.id': event.id,
              'gen_ai.tool.type': 'function',
              ...(this.capture ? { 'gen_ai.tool.call.arguments': this.redactor.text(JSON.stringify(event.input)) } : {}),
            },
          },
          this.contextOf(agent),
        );
        agent.tools.set(event.id, span);
        break;
      }
      case 'tool.result':
        this.endTool(event.agent, event.id, event.isError, event.content, event.time);
        break;
      case 'delivery': {
        const agent = this.agents.get(event.agent);
        const attributes = { 'exarch.child.id': event.child, 'exarch.child.name': event.name, 'exarch.outcome': event.outcome };
        if (agent) this.agentEvent(agent, 'exarch.delivery', attributes, event.time);
        break;
      }
      case 'agent.ended':
        this.closeAgent(event.agent, event.time, event);
        break;
      default:
        break;
    }
  };

  /** Ends every span still open (an agent that never ended: the host stopped watching first). */
  close(time: number = Date.now()): void {
    for (const id of [...this.agents.keys()]) this.closeAgent(id, time, undefined);
  }

  private openChat(agent: AgentSpans, time: number, providerName: string | undefined, model: string | undefined, system: string | undefined): OpenChat {
    const provider = this.providerName ?? providerName;
    const span = this.tracer.startSpan(
      model === undefined ? 'chat' : `chat ${model}`,
      {
        kind: SpanKind.CLIENT,
        startTime: time,
        attributes: {
          ...this.common,
          'gen_ai.operation.name': 'chat',
          ...(provider === undefined ? {} : { 'gen_ai.provider.name': provider }),
          ...(model === undefined ? {} : { 'gen_ai.request.model': model }),
          'gen_ai.request.stream': true,
          ...(this.capture ? this.inputContent(agent, system) : {}),
        },
      },
      this.contextOf(agent),
    );
    agent.chat = { span, respondedAt: undefined, finishReason: undefined };
    return agent.chat;
  }

  /** The history as sent, in the conventions' message form (each message converted once, when committed). */
  private inputContent(agent: AgentSpans, system: string | undefined): Attributes {
    return {
      'gen_ai.input.messages': this.redactor.text(`[${agent.content.filter((m) => m !== '').join(',')}]`),
      ...(system ? { 'gen_ai.system_instructions': this.redactor.text(JSON.stringify([{ type: 'text', content: system }])) } : {}),
    };
  }

  /** The chat whose response has arrived ends when the snapshot that commits it comes (its output captured by then). */
  private endChat(agent: AgentSpans, time: number): void {
    const chat = agent.chat;
    if (!chat || chat.respondedAt === undefined) return;
    chat.span.end(Math.min(chat.respondedAt, time));
    agent.chat = undefined;
  }

  private onMessage(id: string, index: number, message: Message, time: number): void {
    const agent = this.agents.get(id);
    if (!agent) return;
    if (this.capture) {
      agent.content[index] = conventionMessages(message)
        .map((m) => JSON.stringify(m))
        .join(',');
      const chat = agent.chat;
      if (message.role === 'assistant' && chat?.respondedAt !== undefined) {
        const [output] = conventionMessages(message);
        chat.span.setAttribute('gen_ai.output.messages', this.redactor.text(JSON.stringify([{ ...output, finish_reason: chat.finishReason ?? '' }])));
      }
    }
    // Protocol tools (and calls never run) are answered by the session itself: their results arrive here.
    if (message.role === 'user') {
      for (const block of message.content) {
        if (block.type === 'tool_result') this.endTool(id, block.tool_use_id, block.is_error === true, block.content, time);
      }
    }
  }

  private endTool(id: string, callId: string, isError: boolean, content: string, time: number): void {
    const agent = this.agents.get(id);
    const span = agent?.tools.get(callId);
    if (!agent || !span) return;
    agent.tools.delete(callId);
    if (isError) this.fail(span, 'tool_error', content);
    else if (this.capture) span.setAttribute('gen_ai.tool.call.result', this.redactor.text(content));
    span.end(time);
  }
}

/**
 * Exports the run `actor` roots as OpenTelemetry spans (see `OtelRunExporter`) until it ends;
 * returns what stops it early (ending the spans still open). Attach before `actor.start()`.
 *
 * @example
 * // The host registers an SDK once (any exporter: OTLP, console, in-memory)…
 * const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(new ConsoleSpanExporter())] });
 * const actor = createSessionActor({ provider: claude, task: 'Why do logins fail?' });
 * const stop = otelExporter(actor, { tracer: provider.getTracer('exarch') });
 * actor.start();
 */
export function otelExporter(actor: AnyActorRef, options: OtelExporterOptions = {}): () => void {
  const exporter = new OtelRunExporter(options);
  const unsubscribe = observe(actor, exporter.onEvent);
  return () => {
    unsubscribe();
    exporter.close();
  };
}

/** `gen_ai.usage.*`; the conventions count cached tokens in `input_tokens` too, unlike Anthropic's `input_tokens`. */
function usageAttributes(usage: Usage): Attributes {
  return {
    'gen_ai.usage.input_tokens': usage.inputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens,
    'gen_ai.usage.output_tokens': usage.outputTokens,
    'gen_ai.usage.cache_read.input_tokens': usage.cacheReadInputTokens,
    'gen_ai.usage.cache_creation.input_tokens': usage.cacheCreationInputTokens,
  };
}

/** A low-cardinality `error.type`: the HTTP status of a failed request when it had one. */
function errorTypeOf(message: string): string {
  return /\(HTTP (\d{3})\)/.exec(message)?.[1] ?? '_OTHER';
}

type ConventionPart =
  | { readonly type: 'text'; readonly content: string }
  | { readonly type: 'tool_call'; readonly id: string; readonly name: string; readonly arguments: unknown }
  | { readonly type: 'tool_call_response'; readonly id: string; readonly response: string };

/** A message in the conventions' input-message schema: tool results as a `tool` message of their own, before the user's text. */
function conventionMessages(message: Message): { role: string; parts: ConventionPart[] }[] {
  if (message.role === 'assistant') {
    return [
      {
        role: 'assistant',
        parts: message.content.map(
          (b): ConventionPart => (b.type === 'text' ? { type: 'text', content: b.text } : { type: 'tool_call', id: b.id, name: b.name, arguments: b.input }),
        ),
      },
    ];
  }
  const results: ConventionPart[] = [];
  const texts: ConventionPart[] = [];
  for (const block of message.content) {
    if (block.type === 'tool_result') results.push({ type: 'tool_call_response', id: block.tool_use_id, response: block.content });
    else texts.push({ type: 'text', content: block.text });
  }
  return [...(results.length > 0 ? [{ role: 'tool', parts: results }] : []), ...(texts.length > 0 ? [{ role: 'user', parts: texts }] : [])];
}
