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
import type { AgentStartedEvent, RunEvent } from '../observe/events.js';
import { Redactor } from '../../engine/redact.js';
import type { Usage } from '../../engine/types.js';
import type { PlannedIds } from './plannedIds.js';
import { TRACER_NAME, type OtelExporterOptions, type SpanDirectory } from './exporterOptions.js';

/** The open spans of one agent. */
export interface AgentSpans {
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

export interface OpenChat {
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
export abstract class RunSpans {
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
