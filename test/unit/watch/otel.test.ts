import { SpanKind, SpanStatusCode, type SpanContext } from '@opentelemetry/api';
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createRunObserver, createSessionActor, defineTool, runAgent, waitForSettled } from '../../../src/index.js';
import { otelExporter, OtelRunExporter } from '../../../src/watch/otel/otelExporter.js';
import { Redactor } from '../../../src/engine/redact.js';
import { PlannedIds } from '../../../src/watch/otel/plannedIds.js';
import { scriptedProvider, type ScriptedStep } from '../../../src/testing/index.js';

/**
 * Issue 19.2: a run as OpenTelemetry spans. The SDK's in-memory exporter collects what a backend
 * would receive; the expected names, kinds and attribute keys are written out by hand from the
 * GenAI semantic conventions (agent spans, inference span, execute-tool span), not taken from the
 * exporter's code.
 */

const echo = defineTool({ name: 'echo', description: 'Echo the text.', input: z.object({ text: z.string().min(1) }), run: ({ text }) => `echo: ${text}` });

/** root → researcher → reader, with a host tool that succeeds once and is refused once. */
const threeLevels: Record<string, ScriptedStep[]> = {
  root: [
    {
      text: 'Delegating.',
      calls: [
        { id: 'toolu_spawn_researcher', name: 'agent', input: { name: 'researcher', task: 'Find the cause.' } },
        { id: 'toolu_wait_root', name: 'wait_for_agents', input: {} },
      ],
      usage: { inputTokens: 100, outputTokens: 20, cacheReadInputTokens: 300, cacheCreationInputTokens: 50 },
    },
    { text: 'The cause is the cookie.', usage: { inputTokens: 150, outputTokens: 7 } },
  ],
  researcher: [
    {
      calls: [
        { id: 'toolu_spawn_reader', name: 'agent', input: { name: 'reader', task: 'Read a.md' } },
        { id: 'toolu_wait_researcher', name: 'wait_for_agents', input: {} },
      ],
    },
    {
      calls: [
        { id: 'toolu_echo_ok', name: 'echo', input: { text: 'cookie' } },
        { id: 'toolu_echo_bad', name: 'echo', input: { text: '' } },
      ],
    },
    { calls: [{ id: 'toolu_reply_researcher', name: 'reply', input: { result: 'the cookie' } }] },
  ],
  reader: [{ text: 'Reading.', calls: [{ id: 'toolu_reply_reader', name: 'reply', input: { result: 'a.md: cookie' } }] }],
};

function collector(): { exporter: InMemorySpanExporter; provider: BasicTracerProvider } {
  const exporter = new InMemorySpanExporter();
  return { exporter, provider: new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }) };
}

function parentOf(span: ReadableSpan, spans: readonly ReadableSpan[]): ReadableSpan | undefined {
  const id = span.parentSpanContext?.spanId;
  return spans.find((s) => s.spanContext().spanId === id);
}

/** The tree as `name` lines indented by depth, siblings by name (their start times may tie). */
function tree(spans: readonly ReadableSpan[]): string[] {
  const lines: string[] = [];
  const visit = (span: ReadableSpan, depth: number): void => {
    lines.push(`${'  '.repeat(depth)}${span.name}`);
    const children = spans.filter((s) => parentOf(s, spans) === span).sort((a, b) => a.name.localeCompare(b.name));
    for (const child of children) visit(child, depth + 1);
  };
  for (const root of spans.filter((s) => parentOf(s, spans) === undefined)) visit(root, 0);
  return lines;
}

async function runThreeLevels(options: { captureContent?: boolean; redactor?: Redactor } = {}): Promise<ReadableSpan[]> {
  const { exporter, provider } = collector();
  const actor = createSessionActor({ provider: scriptedProvider({ agents: threeLevels, model: 'claude-test' }), tools: [echo], task: 'Why do logins fail?' });
  const stop = otelExporter(actor, { tracer: provider.getTracer('test'), ...options });
  actor.start();
  await waitForSettled(actor);
  actor.stop();
  stop();
  await provider.forceFlush();
  return exporter.getFinishedSpans();
}

describe('OpenTelemetry export (GenAI semantic conventions)', () => {
  it('a three-level run: one invoke_agent span per session under its parent, chat spans per request, execute_tool spans per call', async () => {
    const spans = await runThreeLevels();
    expect(tree(spans)).toEqual([
      'invoke_agent root',
      '  chat claude-test',
      '  chat claude-test',
      '  execute_tool agent',
      '  execute_tool wait_for_agents',
      '  invoke_agent researcher',
      '    chat claude-test',
      '    chat claude-test',
      '    chat claude-test',
      '    execute_tool agent',
      '    execute_tool echo',
      '    execute_tool echo',
      '    execute_tool reply',
      '    execute_tool wait_for_agents',
      '    invoke_agent reader',
      '      chat claude-test',
      '      execute_tool reply',
    ]);
    // One trace; a child starts no earlier than its parent; one agent's requests follow each other.
    expect(new Set(spans.map((s) => s.spanContext().traceId)).size).toBe(1);
    const ms = (t: readonly [number, number]): number => t[0] * 1e3 + t[1] / 1e6;
    for (const span of spans) {
      const parent = parentOf(span, spans);
      if (parent) expect(ms(span.startTime)).toBeGreaterThanOrEqual(ms(parent.startTime));
    }
    for (const agent of spans.filter((s) => s.name.startsWith('invoke_agent '))) {
      const chats = spans.filter((s) => s.name.startsWith('chat ') && parentOf(s, spans) === agent).sort((a, b) => ms(a.startTime) - ms(b.startTime));
      for (let i = 1; i < chats.length; i++) expect(ms(chats[i]?.startTime ?? [0, 0])).toBeGreaterThanOrEqual(ms(chats[i - 1]?.endTime ?? [0, 0]));
    }
  });

  it('agent spans: INTERNAL, invoke_agent, with the agent’s name and id', async () => {
    const spans = await runThreeLevels();
    const agents = spans.filter((s) => s.name.startsWith('invoke_agent '));
    expect(agents.map((s) => s.name).sort()).toEqual(['invoke_agent reader', 'invoke_agent researcher', 'invoke_agent root']);
    for (const span of agents) {
      expect(span.kind).toBe(SpanKind.INTERNAL);
      expect(span.attributes['gen_ai.operation.name']).toBe('invoke_agent');
      expect(span.attributes['gen_ai.provider.name']).toBe('scripted');
    }
    const reader = agents.find((s) => s.name === 'invoke_agent reader');
    expect(reader?.attributes['gen_ai.agent.name']).toBe('reader');
    expect(reader?.attributes['gen_ai.agent.id']).toBe('root/researcher/reader');
    expect(reader?.attributes['exarch.agent.outcome']).toBe('replied');
    expect(reader?.status.code).not.toBe(SpanStatusCode.ERROR);
    // Without captureContent no content leaves: not the task, not a message.
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain('Read a.md');
  });

  it('chat spans: CLIENT, chat, provider, tokens in the conventions’ sense, finish reasons', async () => {
    const spans = await runThreeLevels();
    const chats = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    expect(chats).toHaveLength(6);
    for (const span of chats) {
      expect(span.kind).toBe(SpanKind.CLIENT);
      expect(span.attributes['gen_ai.provider.name']).toBe('scripted');
      expect(span.attributes['gen_ai.request.model']).toBe('claude-test');
      expect(typeof span.attributes['gen_ai.usage.input_tokens']).toBe('number');
      expect(typeof span.attributes['gen_ai.usage.output_tokens']).toBe('number');
    }
    const root = spans.find((s) => s.name === 'invoke_agent root');
    const [first, last] = chats.filter((s) => parentOf(s, spans) === root).sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1]);
    // input_tokens counts the cached tokens too (the conventions' rule); the cache counts stand alone.
    expect(first?.attributes).toMatchObject({
      'gen_ai.usage.input_tokens': 450,
      'gen_ai.usage.output_tokens': 20,
      'gen_ai.usage.cache_read.input_tokens': 300,
      'gen_ai.usage.cache_creation.input_tokens': 50,
      'gen_ai.response.finish_reasons': ['tool_use'],
    });
    expect(last?.attributes['gen_ai.response.finish_reasons']).toEqual(['end_turn']);
    expect(last?.attributes['gen_ai.usage.input_tokens']).toBe(150);
  });

  it('tool spans: INTERNAL, execute_tool, tool name and call id; an error result sets the span’s status', async () => {
    const spans = await runThreeLevels();
    const tools = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'execute_tool');
    expect(tools.map((s) => s.attributes['gen_ai.tool.call.id']).sort()).toEqual(
      [
        'toolu_echo_bad',
        'toolu_echo_ok',
        'toolu_reply_reader',
        'toolu_reply_researcher',
        'toolu_spawn_reader',
        'toolu_spawn_researcher',
        'toolu_wait_researcher',
        'toolu_wait_root',
      ].sort(),
    );
    for (const span of tools) {
      expect(span.kind).toBe(SpanKind.INTERNAL);
      expect(span.name).toBe(`execute_tool ${String(span.attributes['gen_ai.tool.name'])}`);
    }
    const ok = tools.find((s) => s.attributes['gen_ai.tool.call.id'] === 'toolu_echo_ok');
    const bad = tools.find((s) => s.attributes['gen_ai.tool.call.id'] === 'toolu_echo_bad');
    expect(ok?.status.code).not.toBe(SpanStatusCode.ERROR);
    expect(bad?.status.code).toBe(SpanStatusCode.ERROR);
    expect(bad?.status.message).toMatch(/invalid input for tool 'echo'/);
    expect(bad?.attributes['error.type']).toBeDefined();
    const reply = tools.find((s) => s.attributes['gen_ai.tool.call.id'] === 'toolu_reply_reader');
    expect(reply?.status.code).not.toBe(SpanStatusCode.ERROR);
  });

  it('content only when asked: histories, system prompt, tool arguments and results in the conventions’ message form', async () => {
    const spans = await runThreeLevels({ captureContent: true });
    const reader = spans.find((s) => s.name === 'invoke_agent reader');
    const readerChat = spans.find((s) => s.attributes['gen_ai.operation.name'] === 'chat' && parentOf(s, spans) === reader);
    expect(JSON.parse(String(readerChat?.attributes['gen_ai.input.messages']))).toEqual([{ role: 'user', parts: [{ type: 'text', content: 'Read a.md' }] }]);
    expect(JSON.parse(String(readerChat?.attributes['gen_ai.output.messages']))).toEqual([
      {
        role: 'assistant',
        parts: [
          { type: 'text', content: 'Reading.' },
          { type: 'tool_call', id: 'toolu_reply_reader', name: 'reply', arguments: { result: 'a.md: cookie' } },
        ],
        finish_reason: 'tool_use',
      },
    ]);
    expect(JSON.parse(String(readerChat?.attributes['gen_ai.system_instructions']))[0]).toMatchObject({ type: 'text' });
    const ok = spans.find((s) => s.attributes['gen_ai.tool.call.id'] === 'toolu_echo_ok');
    expect(JSON.parse(String(ok?.attributes['gen_ai.tool.call.arguments']))).toEqual({ text: 'cookie' });
    expect(ok?.attributes['gen_ai.tool.call.result']).toBe('echo: cookie');
    // The researcher's third request carries both tool results back as a `tool` message.
    const researcher = spans.find((s) => s.name === 'invoke_agent researcher');
    const third = spans
      .filter((s) => s.attributes['gen_ai.operation.name'] === 'chat' && parentOf(s, spans) === researcher)
      .sort((a, b) => a.startTime[0] - b.startTime[0] || a.startTime[1] - b.startTime[1])[2];
    const input = JSON.parse(String(third?.attributes['gen_ai.input.messages'])) as { role: string; parts: { type: string; id?: string }[] }[];
    expect(input.at(-1)).toMatchObject({
      role: 'tool',
      parts: [
        { type: 'tool_call_response', id: 'toolu_echo_ok' },
        { type: 'tool_call_response', id: 'toolu_echo_bad' },
      ],
    });
  });

  it('a secret of the environment never reaches a span, even with content', async () => {
    const secret = 'sk-test-0123456789abcdef';
    const spans = await runThreeLevels({ captureContent: true, redactor: new Redactor([secret]) });
    expect(JSON.stringify(spans.map((s) => s.attributes))).not.toContain('0123456789abcdef');
    // (The scripted task carries no secret; this one does.)
    const { exporter, provider } = collector();
    const observer = createRunObserver();
    const spansOf = new OtelRunExporter({ tracer: provider.getTracer('test'), captureContent: true, redactor: new Redactor([secret]) });
    observer.subscribe(spansOf.onEvent);
    await runAgent(
      `Use the key ${secret}`,
      { provider: scriptedProvider({ agents: { root: [{ text: `Your key is ${secret}.` }] } }) },
      { inspect: observer.inspect },
    );
    await provider.forceFlush();
    const text = JSON.stringify(exporter.getFinishedSpans().map((s) => [s.attributes, s.status]));
    expect(text).toContain('Use the key');
    expect(text).not.toContain(secret);
  });

  it('errors: a failed request sets the chat span’s status and error.type, and the failed agent’s', async () => {
    const { exporter, provider } = collector();
    const observer = createRunObserver();
    const spansOf = new OtelRunExporter({ tracer: provider.getTracer('test') });
    observer.subscribe(spansOf.onEvent);
    const scripted = scriptedProvider({
      agents: {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'w', task: 'x' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { text: 'w failed.' },
        ],
        w: [{ fault: { retryable: false, status: 400, message: 'invalid_request_error: bad (HTTP 400)' } }],
      },
    });
    await runAgent('go', { provider: scripted }, { inspect: observer.inspect });
    await provider.forceFlush();
    const spans = exporter.getFinishedSpans();
    const w = spans.find((s) => s.name === 'invoke_agent w');
    const chat = spans.find((s) => s.attributes['gen_ai.operation.name'] === 'chat' && parentOf(s, spans) === w);
    expect(chat?.status).toMatchObject({ code: SpanStatusCode.ERROR, message: expect.stringContaining('bad (HTTP 400)') });
    expect(chat?.attributes['error.type']).toBe('400');
    expect(w?.status.code).toBe(SpanStatusCode.ERROR);
    expect(w?.attributes['exarch.agent.outcome']).toBe('failed');
    expect(spans.find((s) => s.name === 'invoke_agent root')?.status.code).not.toBe(SpanStatusCode.ERROR);
  });

  it('without a registered provider the API is a no-op: the run is unchanged', async () => {
    const actor = createSessionActor({ provider: scriptedProvider({ agents: threeLevels }), tools: [echo], task: 'Why do logins fail?' });
    const stop = otelExporter(actor);
    actor.start();
    const settled = await waitForSettled(actor);
    actor.stop();
    stop();
    expect(settled.value).toBe('readyForUser');
  });

  it('a session stopped to go on in another job (a directory given): its open calls end unfailed, marked continued; without one they are cancelled', () => {
    const stoppedWithCallOpen = (directory: Map<string, SpanContext> | undefined): ReadableSpan[] => {
      const { exporter, provider } = collector();
      const spans = new OtelRunExporter({ tracer: provider.getTracer('test'), ...(directory ? { directory } : {}) });
      const base = { agent: 'root', path: ['root'] };
      spans.onEvent({ type: 'agent.started', ...base, time: 1_000, name: 'root', depth: 0, parent: null, task: 'Delegate.' });
      spans.onEvent({ type: 'tool.call', ...base, time: 1_100, id: 'toolu_wait', name: 'wait_for_agents', input: {}, complete: true });
      // A park: the actor is stopped from outside, no outcome.
      spans.onEvent({ type: 'agent.ended', ...base, time: 1_200, status: 'stopped' });
      return exporter.getFinishedSpans();
    };
    const parked = stoppedWithCallOpen(new Map());
    const wait = parked.find((s) => s.name === 'execute_tool wait_for_agents');
    expect(wait?.status.code).toBe(SpanStatusCode.UNSET);
    expect(wait?.attributes['error.type']).toBeUndefined();
    expect(wait?.attributes['exarch.tool.continued']).toBe(true);
    expect(parked.find((s) => s.name === 'invoke_agent root')?.attributes['exarch.agent.continued']).toBe(true);
    // A run of one process stopped for good: the call never got its answer.
    const stopped = stoppedWithCallOpen(undefined);
    expect(stopped.find((s) => s.name === 'execute_tool wait_for_agents')?.status.code).toBe(SpanStatusCode.ERROR);
    expect(stopped.find((s) => s.name === 'invoke_agent root')?.attributes['exarch.agent.continued']).toBeUndefined();
  });

  it('with planned ids, a session run in two jobs is one agent span, emitted by the job it ends in, from its first start, over the calls of both', () => {
    const ids = new PlannedIds();
    const exporter = new InMemorySpanExporter();
    const tracer = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)], idGenerator: ids }).getTracer('test');
    // The store between the jobs: span contexts and starts by agent.
    const known = new Map<string, SpanContext>();
    const starts = new Map<string, number>();
    const directory = {
      get: (agent: string) => known.get(agent),
      set: (agent: string, span: SpanContext, start?: number) => {
        known.set(agent, span);
        if (start !== undefined) starts.set(agent, start);
      },
      startOf: (agent: string) => starts.get(agent),
    };
    const base = { agent: 'root', path: ['root'] };
    const job = (at: number, ended: 'stopped' | 'done'): void => {
      const spans = new OtelRunExporter({ tracer, directory, ids });
      spans.onEvent({ type: 'agent.started', ...base, time: at, name: 'root', depth: 0, parent: null, task: 'Delegate.' });
      spans.onEvent({ type: 'tool.call', ...base, time: at + 100, id: `toolu_${at}`, name: 'wait_for_agents', input: {}, complete: true });
      spans.onEvent(
        ended === 'done'
          ? { type: 'agent.ended', ...base, time: at + 200, status: 'done', outcome: 'replied' }
          : { type: 'agent.ended', ...base, time: at + 200, status: 'stopped' },
      );
    };
    // Epoch times (the SDK reads small numbers as relative to the process's start).
    const first = 1_700_000_000_000;
    job(first, 'stopped');
    // The first job parked: no agent span yet.
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['execute_tool wait_for_agents']);
    job(first + 4_000, 'done');
    const spans = exporter.getFinishedSpans();
    const agents = spans.filter((s) => s.name === 'invoke_agent root');
    expect(agents).toHaveLength(1);
    const [agent] = agents;
    expect(agent?.startTime).toEqual([1_700_000_000, 0]);
    expect(agent?.endTime).toEqual([1_700_000_004, 200_000_000]);
    expect(agent?.attributes['exarch.agent.outcome']).toBe('replied');
    const calls = spans.filter((s) => s.name === 'execute_tool wait_for_agents');
    expect(calls).toHaveLength(2);
    for (const call of calls) {
      expect(call.parentSpanContext?.spanId).toBe(agent?.spanContext().spanId);
      expect(call.spanContext().traceId).toBe(agent?.spanContext().traceId);
    }
  });
});
