import { SpanKind, type Attributes } from '@opentelemetry/api';
import type { AnyActorRef } from 'xstate';
import type { RunEvent } from '../observe/events.js';
import { observe } from '../observe/runObserver.js';
import type { Message } from '../../engine/types.js';
import { addUsage, ZERO_USAGE } from '../../engine/usage.js';
import type { OtelExporterOptions } from './exporterOptions.js';
import { RunSpans, type AgentSpans, type OpenChat } from './runSpans.js';
import { conventionMessages, errorTypeOf, usageAttributes } from './genAiConventions.js';

// `exarch/otel` offers the id generator with the exporter that reads it.
export { PlannedIds } from './plannedIds.js';
// …and the exporter's options, with the tracer name it defaults to.
export { TRACER_NAME, type OtelExporterOptions, type SpanDirectory } from './exporterOptions.js';

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
