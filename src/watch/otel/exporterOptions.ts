import type { Context, SpanContext, Tracer } from '@opentelemetry/api';
import type { Redactor } from '../../engine/redact.js';
import type { PlannedIds } from './plannedIds.js';

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
