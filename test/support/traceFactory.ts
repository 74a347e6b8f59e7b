import { sessionStatechart } from '../../src/watch/statechart/extract.js';
import { TRACE_VERSION, type TraceRecord } from '../../src/watch/trace/format.js';
import type { AgentOutcome, AssistantBlock, Message, StopReason, Usage } from '../../src/engine/types.js';

/**
 * Synthetic traces in the exact format `TraceRecorder` writes (src/watch/trace/format.ts), for viewer
 * tests that need a big or odd run without running one: a root that fans out to sub-agents (and
 * they to theirs), each working a few steps of streaming and tool batches, then ending as its
 * outcome says and delivering its result to its parent, whose inbox turns wake it.
 *
 * Deterministic: the same options give the same records.
 */
export interface SyntheticTraceOptions {
  /** Children per level: `[3]` is root → 3 children; `[10, 19]` gives each of those 19 children (201 agents). */
  readonly shape: readonly number[];
  /** Tool-batch steps each leaf agent works before it ends (default 3). */
  readonly steps?: number;
  /** Tool calls per batch (default 2). */
  readonly toolsPerStep?: number;
  readonly seed?: number;
  /** The outcome of the n-th sub-agent (1-based, in spawn order); default: mostly replied, a few of each other outcome. */
  readonly outcome?: (n: number, id: string) => AgentOutcome;
  readonly title?: string;
}

export interface SyntheticTrace {
  readonly records: TraceRecord[];
  /** Agent ids in spawn order, root first. */
  readonly agents: readonly string[];
  readonly outcomes: ReadonlyMap<string, AgentOutcome>;
  /** The rendered reply text each replying sub-agent delivered. */
  readonly replies: ReadonlyMap<string, string>;
}

type Draft = TraceRecord extends infer R ? (R extends TraceRecord ? Omit<R, 't'> : never) : never;

function defaultOutcome(n: number): AgentOutcome {
  if (n % 23 === 0) return 'cancelled';
  if (n % 17 === 0) return 'empty';
  if (n % 13 === 0) return 'capped';
  if (n % 11 === 0) return 'failed';
  return 'replied';
}

/** The reply a synthetic agent hands up: markdown with real newlines. */
export function syntheticReply(id: string): string {
  return `## Findings of ${id}\n\n- first point about ${id}\n- second point\n\n\`\`\`\nexample output\n\`\`\``;
}

const ZERO: Usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };

export function syntheticTrace(options: SyntheticTraceOptions): SyntheticTrace {
  const steps = options.steps ?? 3;
  const toolsPerStep = options.toolsPerStep ?? 2;
  const outcomeOf = options.outcome ?? defaultOutcome;
  let seed = options.seed ?? 7;
  const random = (): number => {
    // mulberry32
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
  const between = (lo: number, hi: number): number => Math.round((lo + random() * (hi - lo)) * 10) / 10;

  const timed: { t: number; seq: number; draft: Draft }[] = [];
  let seq = 0;
  const emit = (t: number, draft: Draft): void => void timed.push({ t: Math.round(t * 10) / 10, seq: seq++, draft });
  const agents: string[] = [];
  const outcomes = new Map<string, AgentOutcome>();
  const replies = new Map<string, string>();
  let toolIds = 0;
  let spawned = 0;

  interface Agent {
    readonly id: string;
    readonly name: string;
    readonly depth: number;
    readonly parent: Agent | null;
    messages: number;
    steps: number;
    usage: Usage;
    /** The last time it wrote a record: its own records never go back in time. */
    t: number;
  }

  const state = (agent: Agent, t: number, name: string): void => {
    agent.t = Math.max(agent.t, t);
    emit(agent.t, { kind: 'state', agent: agent.id, state: name, steps: agent.steps, usage: agent.usage });
  };
  const message = (agent: Agent, t: number, msg: Message): void => {
    agent.t = Math.max(agent.t, t);
    emit(agent.t, { kind: 'message', agent: agent.id, index: agent.messages++, message: msg });
  };
  const respond = (
    agent: Agent,
    t: number,
    stopReason: StopReason,
    text: string,
    calls: { id: string; name: string; input: Record<string, unknown> }[],
  ): void => {
    const usage = {
      inputTokens: 400 + agent.messages * 120,
      outputTokens: 40 + text.length,
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: agent.messages > 2 ? 300 : 0,
    };
    agent.usage = {
      inputTokens: agent.usage.inputTokens + usage.inputTokens,
      outputTokens: agent.usage.outputTokens + usage.outputTokens,
      cacheCreationInputTokens: 0,
      cacheReadInputTokens: agent.usage.cacheReadInputTokens + usage.cacheReadInputTokens,
    };
    agent.t = Math.max(agent.t, t);
    emit(agent.t, {
      kind: 'response',
      agent: agent.id,
      stopReason,
      textChars: text.length,
      toolCalls: calls.map((c) => ({ id: c.id, name: c.name, complete: true })),
      usage,
    });
    const content: AssistantBlock[] = [...(text ? [{ type: 'text' as const, text }] : []), ...calls.map((c) => ({ type: 'tool_use' as const, ...c }))];
    message(agent, agent.t + 0.3, { role: 'assistant', content });
  };
  const streaming = (agent: Agent, t: number): void => {
    agent.steps++;
    state(agent, t, 'streaming');
  };

  /** One tool batch: streaming → dispatchingBatch → results → (the caller's next state). */
  const toolStep = (agent: Agent, t: number, step: number): number => {
    const calls = Array.from({ length: toolsPerStep }, (_, i) => ({
      id: `toolu_${String(++toolIds).padStart(6, '0')}`,
      name: i % 2 === 0 ? 'read_file' : 'search_files',
      input: { path: `src/part${step}_${i}.ts` },
    }));
    let now = t + between(200, 1600);
    respond(agent, now, 'tool_use', `Step ${step}: looking at ${calls.length} files.`, calls);
    now += 0.4;
    state(agent, now, 'dispatchingBatch');
    const results = calls.map((call) => {
      now += between(20, 300);
      const content = `// ${String(call.input['path'])}\nexport const value = ${step};\n`;
      emit(now, { kind: 'tool.result', agent: agent.id, toolUseId: call.id, isError: false, chars: content.length });
      return { type: 'tool_result' as const, tool_use_id: call.id, content };
    });
    message(agent, now + 0.3, { role: 'user', content: results });
    return now + 0.3;
  };

  const run = (agent: Agent, start: number, level: number, task: string): { end: number; outcome: AgentOutcome } => {
    agents.push(agent.id);
    emit(start, {
      kind: 'agent.start',
      agent: agent.id,
      name: agent.name,
      depth: agent.depth,
      parent: agent.parent?.id ?? null,
      task: task.slice(0, 500),
      taskChars: task.length,
    });
    agent.t = start;
    state(agent, start, 'readyForUser');
    message(agent, start + 0.5, { role: 'user', content: [{ type: 'text', text: task }] });
    if (agent.depth === 0) emit(start + 0.5, { kind: 'event', agent: agent.id, type: 'user.message', detail: `${task.length} characters` });
    streaming(agent, start + 0.6);
    let now = start + 0.6;

    const fanout = options.shape[level] ?? 0;
    if (fanout > 0) {
      // One batch of `agent` calls, then wait for the results, waking for each inbox turn.
      const calls = Array.from({ length: fanout }, (_, i) => ({
        id: `toolu_${String(++toolIds).padStart(6, '0')}`,
        name: 'agent',
        input: { name: `${level === 0 ? 'worker' : 'helper'}${i + 1}`, task: `Part ${i + 1} of ${agent.name}'s task` },
      }));
      now += between(300, 900);
      respond(agent, now, 'tool_use', `Splitting this into ${fanout} parts.`, calls);
      const deliveries: { t: number; name: string; child: string; outcome: AgentOutcome; text: string }[] = [];
      let spawnAt = now + 0.2;
      for (const call of calls) {
        const name = String(call.input['name']);
        const child: Agent = { id: `${agent.id}/${name}`, name, depth: agent.depth + 1, parent: agent, messages: 0, steps: 0, usage: ZERO, t: 0 };
        spawnAt += 0.1;
        const result = run(child, spawnAt, level + 1, String(call.input['task']));
        const text = result.outcome === 'replied' ? syntheticReply(child.id) : '';
        if (text) replies.set(child.id, text);
        deliveries.push({ t: result.end, name, child: child.id, outcome: result.outcome, text });
      }
      state(agent, spawnAt + 0.2, 'dispatchingBatch');
      message(agent, spawnAt + 0.5, {
        role: 'user',
        content: calls.map((call) => ({ type: 'tool_result' as const, tool_use_id: call.id, content: `Sub-agent '${String(call.input['name'])}' started.` })),
      });
      streaming(agent, spawnAt + 0.5);
      now = spawnAt + 0.5 + between(200, 600);
      respond(agent, now, 'end_turn', 'Waiting for the results.', []);
      state(agent, now + 0.4, 'readyForUser');
      now += 0.4;
      deliveries.sort((a, b) => a.t - b.t);
      let i = 0;
      while (i < deliveries.length) {
        const first = deliveries[i];
        if (!first) break;
        const wake = Math.max(now, first.t) + 0.5;
        const batch: typeof deliveries = [];
        while (i < deliveries.length && (deliveries[i]?.t ?? Infinity) <= wake) batch.push(deliveries[i++] as (typeof deliveries)[number]);
        for (const d of batch) {
          emit(d.t, {
            kind: 'delivery',
            parent: agent.id,
            child: d.child,
            name: d.name,
            outcome: d.outcome,
            text: d.text,
            ...(d.outcome === 'failed' ? { reason: 'model error: overloaded' } : {}),
          });
        }
        const inbox = batch.map((d) => (d.outcome === 'replied' ? `${tagFor(d.name, d.outcome)}\n${d.text}` : tagFor(d.name, d.outcome))).join('\n\n');
        agent.steps = 0;
        message(agent, wake, { role: 'user', content: [{ type: 'text', text: inbox }] });
        streaming(agent, wake);
        now = wake + between(200, 700);
        const last = i >= deliveries.length;
        if (last && agent.depth > 0) break;
        respond(agent, now, 'end_turn', last ? `All ${deliveries.length} parts are in: done.` : `Noted ${batch.length} result(s); waiting for the rest.`, []);
        state(agent, now + 0.4, 'readyForUser');
        now += 0.4;
      }
      if (agent.depth === 0) {
        emit(now + 1, { kind: 'agent.end', agent: agent.id, status: 'stopped' });
        return { end: now + 1, outcome: 'replied' };
      }
    }

    // A worker: a few tool steps, then its ending.
    spawned++;
    const outcome = agent.depth === 0 ? 'replied' : fanout > 0 ? 'replied' : outcomeOf(spawned, agent.id);
    outcomes.set(agent.id, outcome);
    const workSteps = outcome === 'failed' || outcome === 'cancelled' ? Math.max(1, steps - 1) : steps;
    for (let step = 1; step <= workSteps; step++) {
      now = toolStep(agent, now, step);
      streaming(agent, now);
    }
    now += between(200, 1200);
    let end = now;
    const endAs = (finalState: string, at: number, deliveredAt: number): void => {
      end = deliveredAt;
      state(agent, at, finalState);
      const result = outcome;
      emit(at + 0.1, {
        kind: 'agent.end',
        agent: agent.id,
        status: 'done',
        outcome: result,
        ...(result === 'failed' ? { reason: 'model error: overloaded' } : {}),
      });
    };
    switch (outcome) {
      case 'replied': {
        const id = `toolu_${String(++toolIds).padStart(6, '0')}`;
        respond(agent, now, 'tool_use', 'Sending my findings.', [{ id, name: 'reply', input: { result: syntheticReply(agent.id) } }]);
        state(agent, now + 0.4, 'dispatchingBatch');
        emit(now + 1, { kind: 'tool.result', agent: agent.id, toolUseId: id, isError: false, chars: 60 });
        message(agent, now + 1.5, { role: 'user', content: [{ type: 'tool_result', tool_use_id: id, content: 'Reply recorded.' }] });
        endAs('replied', now + 1.6, now + 1.4);
        break;
      }
      case 'empty': {
        respond(agent, now, 'end_turn', 'I looked around; nothing to add.', []);
        message(agent, now + 0.4, { role: 'user', content: [{ type: 'text', text: 'You ended your turn without calling the `reply` tool.' }] });
        state(agent, now + 0.4, 'nudged');
        streaming(agent, now + 5);
        now += between(200, 800);
        respond(agent, now, 'end_turn', 'Still nothing to add.', []);
        endAs('finishedWithoutReply', now + 0.4, now + 0.3);
        break;
      }
      case 'capped': {
        now = toolStep(agent, now, steps + 1);
        endAs('capped', now + 0.2, now + 0.1);
        break;
      }
      case 'failed': {
        emit(now, { kind: 'event', agent: agent.id, type: 'model.error', detail: 'overloaded_error: Overloaded' });
        endAs('failed', now + 0.2, now + 0.1);
        break;
      }
      case 'cancelled': {
        emit(now, { kind: 'event', agent: agent.id, type: 'cancel', detail: 'cancelled by its parent' });
        endAs('cancelled', now + 0.2, now + 0.1);
        break;
      }
    }
    return { end, outcome };
  };

  const root: Agent = { id: 'root', name: 'root', depth: 0, parent: null, messages: 0, steps: 0, usage: ZERO, t: 0 };
  run(root, 2, 0, 'Survey the whole repository and report.\nSplit the work among sub-agents.');

  timed.sort((a, b) => a.t - b.t || a.seq - b.seq);
  const last = timed[timed.length - 1]?.t ?? 0;
  const records: TraceRecord[] = [
    {
      t: 0,
      kind: 'trace.start',
      version: TRACE_VERSION,
      startedAt: '2025-01-01T12:00:00.000Z',
      title: options.title ?? 'synthetic trace',
      statechart: sessionStatechart(),
    },
    ...timed.map(({ t, draft }) => ({ t, ...draft }) as TraceRecord),
    { t: last, kind: 'trace.end' },
  ];
  return { records, agents, outcomes, replies };
}

function tagFor(name: string, outcome: AgentOutcome): string {
  switch (outcome) {
    case 'replied':
      return `[agent '${name}' replied]`;
    case 'empty':
      return `[agent '${name}' finished with no output]`;
    case 'capped':
      return `[agent '${name}' hit the step cap]`;
    case 'failed':
      return `[agent '${name}' failed: model error: overloaded]`;
    case 'cancelled':
      return `[agent '${name}' was cancelled]`;
  }
}

/** Records as the JSONL text of a trace file. */
export function traceText(records: readonly TraceRecord[]): string {
  return `${records.map((record) => JSON.stringify(record)).join('\n')}\n`;
}
