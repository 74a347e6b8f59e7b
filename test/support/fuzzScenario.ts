import fc from 'fast-check';
import { z } from 'zod';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { createSessionActor, isSettled, type SessionActor, type SessionSnapshot } from '../../src/run/runtime.js';
import { defineTool } from '../../src/tools/defineTool.js';
import { findPairingProblems } from '../../src/engine/pairing.js';
import { sleep } from '../../src/engine/model/streamModel.js';
import { MemoryLogSink, type LogSink } from '../../src/engine/log/sessionLog.js';
import { ScriptedProvider, type ScriptedBlock, type ScriptedStep } from '../../src/testing/scriptedProvider.js';
import {
  STOP_REASONS,
  type AgentResult,
  type Message,
  type ModelRequest,
  type ModelResponse,
  type Provider,
  type StopReason,
  type StreamSink,
} from '../../src/engine/types.js';
import { stateViolations, stepViolations } from './modelDriver.js';

/**
 * Random agent trees with random model behaviour, run against real sessions, and the protocol's
 * invariants checked on every run (issue 5). A scenario is plain data, so fast-check prints a
 * failing one (shrunk) with its seed, and test/unit/session/regressions.test.ts replays it by name.
 */

// ---------------------------------------------------------------------------------------------
// Scenarios

type PayloadKind = 'string' | 'object' | 'array' | 'number' | 'empty' | 'missing' | 'null' | 'huge';
type WorkMode = 'ok' | 'throw' | 'hang' | 'slow' | 'big' | 'badInput';

type CallSpec =
  | { readonly tool: 'work'; readonly mode: WorkMode; readonly cutOff?: boolean }
  | { readonly tool: 'agent'; readonly name: string; readonly cutOff?: boolean }
  | { readonly tool: 'cancel_agent'; readonly name: string; readonly cutOff?: boolean }
  | { readonly tool: 'reply'; readonly payload: PayloadKind; readonly cutOff?: boolean }
  | { readonly tool: 'unknown'; readonly cutOff?: boolean };

interface StepSpec {
  /** Prose before the calls, and after them. */
  readonly text?: boolean;
  readonly textAfter?: boolean;
  readonly calls: readonly CallSpec[];
  /** Overrides the scripted default (max_tokens with a cut-off call, tool_use with calls, else end_turn). */
  readonly stopReason?: StopReason;
  readonly fault?: { readonly after: number; readonly retryable: boolean };
  readonly stallAfter?: number;
  readonly crash?: boolean;
  readonly delayMs?: number;
  /** A pause between stream events (so a cancellation can land mid-stream). */
  readonly chunkDelayMs?: number;
}

interface AgentSpec {
  readonly steps: readonly StepSpec[];
  /** Scripts of the sub-agents this agent may start, by name. */
  readonly children: Readonly<Record<string, AgentSpec>>;
  /** The session's log throws once on its n-th usage record: its actor crashes inside a transition. */
  readonly crashOnUsage?: number;
}

export interface Scenario {
  readonly maxSteps: number;
  readonly maxDepth: number;
  readonly replyCap: number;
  readonly truncationBudget: number;
  readonly toolTimeoutMs: number;
  readonly stallTimeoutMs: number;
  readonly root: AgentSpec;
  /** Counted in snapshots of the whole system: cancel the root, stop its actor, send it user messages. */
  readonly cancelAt?: number;
  readonly stopAt?: number;
  readonly userMessagesAt: readonly number[];
}

const NAMES = ['a', 'b', 'c', 'd'] as const;

const payloadArb: fc.Arbitrary<PayloadKind> = fc.constantFrom('string', 'object', 'array', 'number', 'empty', 'missing', 'null', 'huge');
const workModeArb: fc.Arbitrary<WorkMode> = fc.constantFrom('ok', 'ok', 'throw', 'hang', 'slow', 'big', 'badInput');

/** Mostly absent, sometimes `arb`. */
function rarely<T>(arb: fc.Arbitrary<T>, weight = 6): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: fc.constant(undefined), weight }, { arbitrary: arb, weight: 1 });
}

function callArb(names: readonly string[]): fc.Arbitrary<CallSpec> {
  const cutOff = rarely(fc.constant(true), 8);
  const options: fc.WeightedArbitrary<CallSpec>[] = [
    { arbitrary: fc.record({ tool: fc.constant('work' as const), mode: workModeArb, cutOff }, { requiredKeys: ['tool', 'mode'] }), weight: 4 },
    { arbitrary: fc.record({ tool: fc.constant('reply' as const), payload: payloadArb, cutOff }, { requiredKeys: ['tool', 'payload'] }), weight: 2 },
    { arbitrary: fc.record({ tool: fc.constant('unknown' as const), cutOff }, { requiredKeys: ['tool'] }), weight: 1 },
  ];
  const spawnable = names.length > 0 ? fc.constantFrom(...names) : fc.constant('a');
  options.push({
    arbitrary: fc.record({ tool: fc.constant('agent' as const), name: spawnable, cutOff }, { requiredKeys: ['tool', 'name'] }),
    weight: names.length > 0 ? 4 : 1,
  });
  options.push({
    arbitrary: fc.record(
      { tool: fc.constant('cancel_agent' as const), name: fc.oneof(spawnable, fc.constant('ghost')), cutOff },
      { requiredKeys: ['tool', 'name'] },
    ),
    weight: 1,
  });
  return fc.oneof(...options);
}

function stepArb(names: readonly string[]): fc.Arbitrary<StepSpec> {
  return fc.record(
    {
      text: fc.boolean(),
      textAfter: rarely(fc.constant(true), 5),
      calls: fc.array(callArb(names), { maxLength: 4 }),
      stopReason: rarely(fc.constantFrom(...STOP_REASONS), 8),
      fault: rarely(fc.record({ after: fc.nat(3), retryable: fc.boolean() }), 10),
      stallAfter: rarely(fc.nat(2), 20),
      crash: rarely(fc.constant(true), 40),
      delayMs: rarely(fc.integer({ min: 1, max: 8 }), 2),
      chunkDelayMs: rarely(fc.constant(1), 8),
    },
    { requiredKeys: ['calls'] },
  );
}

function agentArb(depth: number): fc.Arbitrary<AgentSpec> {
  // Agents at depth 2 may still try to spawn (the depth limit refuses them), but have no scripts below.
  const names =
    depth === 0
      ? fc.uniqueArray(fc.constantFrom(...NAMES), { minLength: 1, maxLength: 3 })
      : depth <= 2
        ? fc.uniqueArray(fc.constantFrom(...NAMES), { maxLength: 2 })
        : fc.constant([] as string[]);
  return names.chain((childNames) => {
    const children: fc.Arbitrary<Record<string, AgentSpec>> =
      depth < 2 && childNames.length > 0
        ? fc.tuple(...childNames.map(() => agentArb(depth + 1))).map((specs) => Object.fromEntries(childNames.map((name, i) => [name, specs[i] as AgentSpec])))
        : fc.constant({});
    // Most agents start their sub-agents at once; the rest of the script may start more, cancel them…
    const spawnAll: StepSpec = { calls: childNames.map((name) => ({ tool: 'agent', name })) };
    const firstStep =
      childNames.length > 0 ? fc.oneof({ arbitrary: fc.constant([spawnAll]), weight: 3 }, { arbitrary: fc.constant([]), weight: 1 }) : fc.constant([]);
    return fc.record(
      {
        steps: fc.tuple(firstStep, fc.array(stepArb(childNames), { maxLength: depth === 0 ? 8 : 5 })).map(([first, rest]) => [...first, ...rest]),
        children,
        crashOnUsage: depth > 0 ? rarely(fc.integer({ min: 1, max: 3 }), 12) : fc.constant(undefined),
      },
      { requiredKeys: ['steps', 'children'] },
    );
  });
}

export const scenarioArb: fc.Arbitrary<Scenario> = fc.record(
  {
    maxSteps: fc.oneof(fc.integer({ min: 1, max: 3 }), fc.integer({ min: 4, max: 10 })),
    maxDepth: fc.oneof({ arbitrary: fc.constant(2), weight: 4 }, { arbitrary: fc.constantFrom(0, 1), weight: 1 }),
    replyCap: fc.constantFrom(1, 40, 300, 16_000),
    truncationBudget: fc.integer({ min: 0, max: 2 }),
    toolTimeoutMs: fc.constantFrom(5, 10),
    stallTimeoutMs: fc.constantFrom(5, 10),
    root: agentArb(0),
    cancelAt: rarely(fc.integer({ min: 1, max: 300 }), 4),
    stopAt: rarely(fc.integer({ min: 1, max: 300 }), 8),
    userMessagesAt: fc.array(fc.integer({ min: 1, max: 300 }), { maxLength: 3 }),
  },
  { requiredKeys: ['maxSteps', 'maxDepth', 'replyCap', 'truncationBudget', 'toolTimeoutMs', 'stallTimeoutMs', 'root', 'userMessagesAt'] },
);

// ---------------------------------------------------------------------------------------------
// Playing a scenario

/** Prose every agent writes carries a marker naming the agent: `«root/a:p2»`. */
const PROSE = /«([^»]+?):p\d+»/g;

function payloadOf(kind: PayloadKind, agentId: string, step: number): { result?: unknown } {
  const marker = `«${agentId}:r${step}»`;
  switch (kind) {
    case 'string':
      return { result: `# Result ${marker}\n- line one\n- line two` };
    case 'object':
      return { result: { marker, files: ['a.ts', 'b.ts'], ok: true } };
    case 'array':
      return { result: [marker, 1, null] };
    case 'number':
      return { result: 42 };
    case 'empty':
      return { result: '' };
    case 'missing':
      return {};
    case 'null':
      return { result: null };
    case 'huge':
      return { result: `HEAD ${marker} ${'x'.repeat(20_000)} TAIL` };
  }
}

function specOf(root: AgentSpec, agentId: string): AgentSpec | undefined {
  const names = agentId.split('/').slice(1);
  let spec: AgentSpec | undefined = root;
  for (const name of names) spec = spec?.children[name];
  return spec;
}

function scriptedStep(spec: StepSpec, agentId: string, index: number): ScriptedStep {
  const content: ScriptedBlock[] = [];
  if (spec.text) content.push(`Prose «${agentId}:p${index}» before the calls.`);
  spec.calls.forEach((call, i) => {
    const cutOff = call.cutOff ? { cutOff: true } : {};
    switch (call.tool) {
      case 'work':
        content.push({ name: 'work', input: call.mode === 'badInput' ? { mode: 42 } : { mode: call.mode, n: i }, ...cutOff });
        break;
      case 'agent':
        content.push({ name: 'agent', input: { name: call.name, task: `task for ${call.name}` }, ...cutOff });
        break;
      case 'cancel_agent':
        content.push({ name: 'cancel_agent', input: { name: call.name }, ...cutOff });
        break;
      case 'reply':
        content.push({ name: 'reply', input: payloadOf(call.payload, agentId, index), ...cutOff });
        break;
      case 'unknown':
        content.push({ name: 'not_offered', input: {}, ...cutOff });
        break;
    }
  });
  if (spec.textAfter) content.push(`Prose «${agentId}:p${index}a» after the calls.`);
  return {
    content,
    ...(spec.stopReason === undefined ? {} : { stopReason: spec.stopReason }),
    ...(spec.fault === undefined ? {} : { fault: { ...spec.fault, message: `scripted ${spec.fault.retryable ? 'overload' : 'fatal error'}` } }),
    ...(spec.stallAfter === undefined ? {} : { stallAfter: spec.stallAfter }),
    ...(spec.crash ? { crash: 'provider bug' } : {}),
    ...(spec.delayMs === undefined ? {} : { delayMs: spec.delayMs }),
    ...(spec.chunkDelayMs === undefined ? {} : { chunkDelayMs: spec.chunkDelayMs }),
    chunkSize: 16,
  };
}

/** When an agent's script runs out: a sub-agent replies, the root ends its turn. */
function fallbackStep(agentId: string, index: number): ScriptedStep {
  if (!agentId.includes('/')) return { text: `Done «${agentId}:p${index}».` };
  return { calls: [{ name: 'reply', input: { result: `fallback «${agentId}:r${index}»` } }] };
}

const workTool = defineTool({
  name: 'work',
  description: 'Does some work.',
  input: z.object({ mode: z.enum(['ok', 'throw', 'hang', 'slow', 'big', 'badInput']), n: z.number().int() }),
  run: async ({ mode, n }, { signal }) => {
    switch (mode) {
      case 'ok':
        return `work ${n} done`;
      case 'throw':
        throw new Error(`work ${n} broke`);
      case 'hang':
        return new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
      case 'slow':
        await sleep(2, signal);
        return { n, slow: true };
      case 'big':
        return 'y'.repeat(2_000);
      default:
        return 'unreachable';
    }
  },
});

export interface RunReport {
  readonly violations: string[];
  /** Final state of every session, by agent id (for messages). */
  readonly finals: Record<string, string>;
}

/** The snapshot-count at which something happens to the root. */
function schedule(scenario: Scenario): Map<number, ('cancel' | 'stop' | 'user')[]> {
  const at = new Map<number, ('cancel' | 'stop' | 'user')[]>();
  const add = (n: number | undefined, what: 'cancel' | 'stop' | 'user'): void => {
    if (n === undefined) return;
    at.set(n, [...(at.get(n) ?? []), what]);
  };
  add(scenario.cancelAt, 'cancel');
  add(scenario.stopAt, 'stop');
  for (const n of scenario.userMessagesAt) add(n, 'user');
  return at;
}

function timerCount(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'Timeout' || r === 'Immediate').length;
}

const SETTLE_DEADLINE_MS = 5_000;

/**
 * Plays `scenario` against a real root session and checks every invariant of the protocol.
 * Never throws: whatever went wrong is in `violations`.
 */
export async function runScenario(scenario: Scenario): Promise<RunReport> {
  const violations: string[] = [];
  const baselineTimers = timerCount();
  const unhandled = (error: unknown): void => {
    violations.push(`unhandled: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  };
  process.on('unhandledRejection', unhandled);
  process.on('uncaughtException', unhandled);

  const limits = { maxSteps: scenario.maxSteps, replyCap: scenario.replyCap };
  const last = new Map<string, SessionSnapshot>();
  /** Each session's actor: a crashed one emits no snapshot of its error, so statuses come from here. */
  const refs = new Map<string, AnyActorRef>();
  const finalAgents = new Set<string>();
  const actors = new Set<AnyActorRef>();
  const usageRecords = new Map<string, number>();

  const scripted = new ScriptedProvider({
    agents: {
      '*': (request: ModelRequest, index: number) => {
        const spec = specOf(scenario.root, request.agent.id)?.steps[index];
        return spec ? scriptedStep(spec, request.agent.id, index) : fallbackStep(request.agent.id, index);
      },
    },
  });
  const provider: Provider = {
    name: 'fuzz',
    stream: (request: ModelRequest, sink: StreamSink): Promise<ModelResponse> => {
      if (finalAgents.has(request.agent.id)) violations.push(`${request.agent.id}: a model request after its final state`);
      return scripted.stream(request, sink);
    },
  };
  const inner = new MemoryLogSink();
  const logs: LogSink = {
    open: (agent) => {
      const log = inner.open(agent);
      const crashAt = specOf(scenario.root, agent.id)?.crashOnUsage;
      return {
        ...log,
        append: (record) => {
          if (record.type === 'usage' && crashAt !== undefined) {
            const n = (usageRecords.get(agent.id) ?? 0) + 1;
            usageRecords.set(agent.id, n);
            if (n === crashAt) throw new Error(`log of ${agent.id} failed`);
          }
          log.append(record);
        },
      };
    },
  };

  let root: SessionActor | undefined;
  let snapshots = 0;
  const planned = schedule(scenario);
  const inspect = (event: InspectionEvent): void => {
    if (event.type === '@xstate.actor') actors.add(event.actorRef as AnyActorRef);
    if (event.type !== '@xstate.snapshot') return;
    snapshots += 1;
    const snapshot = event.snapshot as SessionSnapshot;
    if (typeof snapshot.context === 'object' && snapshot.context !== null && 'agent' in snapshot.context) {
      const id = snapshot.context.agent.id;
      refs.set(id, event.actorRef as AnyActorRef);
      const before = last.get(id);
      last.set(id, snapshot);
      for (const v of stepViolations(before, snapshot)) violations.push(`${id}: ${v}`);
      if (snapshot.status !== 'active') finalAgents.add(id);
      // A stopped session answers its open calls in its teardown, after this snapshot: checked at the end.
      const changed = !before || before.value !== snapshot.value || before.status !== snapshot.status || before.context.steps !== snapshot.context.steps;
      if (changed && snapshot.status !== 'stopped') {
        for (const v of stateViolations(snapshot, 'any', limits)) violations.push(`${id}: ${v}`);
      }
    }
    for (const what of planned.get(snapshots) ?? []) {
      // Acting from inside an inspection callback would re-enter the actor system.
      queueMicrotask(() => {
        if (root?.getSnapshot().status !== 'active') return;
        if (what === 'cancel') root.send({ type: 'cancel', reason: 'cancelled by the fuzzer' });
        else if (what === 'stop') root.stop();
        else root.send({ type: 'user.message', text: `user message at ${snapshots}` });
      });
    }
  };

  try {
    root = createSessionActor(
      {
        provider,
        task: 'the root task',
        tools: [workTool],
        logs,
        maxSteps: scenario.maxSteps,
        maxDepth: scenario.maxDepth,
        replyCap: scenario.replyCap,
        truncationBudget: scenario.truncationBudget,
        toolTimeoutMs: scenario.toolTimeoutMs,
        toolOutputCap: 300,
        stallTimeoutMs: scenario.stallTimeoutMs,
        retry: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 2 },
      },
      { inspect },
    );
    root.start();
    const settled = await settleOrStop(root, SETTLE_DEADLINE_MS);
    if (!settled) violations.push(`the root did not settle within ${SETTLE_DEADLINE_MS} ms: ${describeTree(last)}`);
    const atRest = new Set(
      [...refs].flatMap(([id, ref]) => {
        const s = ref.getSnapshot() as SessionSnapshot;
        return s.status === 'active' && s.value === 'readyForUser' ? [id] : [];
      }),
    );
    // Settled means quiet: every sub-agent delivered, or was ended with the session that started it.
    for (const [id, ref] of refs) {
      const s = ref.getSnapshot() as SessionSnapshot;
      if (id !== 'root' && s.status === 'active') violations.push(`${id}: still ${String(s.value)} when the run settled`);
    }
    root.stop();
    // Teardown work (aborted tools, closed logs) finishes within a few turns of the event loop.
    for (let i = 0; i < 50 && (i < 2 || timerCount() > baselineTimers); i++) await new Promise((r) => setImmediate(r));
    const timers = timerCount();
    if (timers > baselineTimers)
      violations.push(`${timers - baselineTimers} timers still pending after the root stopped: ${process.getActiveResourcesInfo().join(', ')}`);
    for (const actor of actors) {
      const status = actor.getSnapshot().status;
      if (status === 'active') violations.push(`actor ${actor.id} (${actor.sessionId}) still active after the root stopped`);
    }
    if (scripted.pairingViolations.length > 0) violations.push(`requests broke the pairing rule: ${JSON.stringify(scripted.pairingViolations)}`);
    checkTree(last, refs, atRest, inner, violations);
  } catch (error) {
    violations.push(`the run threw: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}`);
  } finally {
    process.off('unhandledRejection', unhandled);
    process.off('uncaughtException', unhandled);
  }
  const finals: Record<string, string> = {};
  for (const [id, s] of last) finals[id] = `${String(s.value)} (${(refs.get(id)?.getSnapshot() as { status?: string } | undefined)?.status ?? s.status})`;
  return { violations, finals };
}

/** Resolves true once the root is settled or no longer active, false at the deadline. */
function settleOrStop(actor: SessionActor, deadlineMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const done = (value: boolean): void => {
      clearTimeout(timer);
      subscription.unsubscribe();
      resolve(value);
    };
    const check = (): void => {
      const snapshot = actor.getSnapshot();
      if (snapshot.status !== 'active' || isSettled(snapshot)) done(true);
    };
    const timer = setTimeout(() => done(false), deadlineMs);
    const subscription = actor.subscribe({ next: check, error: () => done(true), complete: () => done(true) });
    check();
  });
}

function describeTree(last: Map<string, SessionSnapshot>): string {
  return [...last].map(([id, s]) => `${id}=${String(s.value)}/${s.status} children=${s.context.children.size} inbox=${s.context.inbox.length}`).join('; ');
}

function textOfMessages(messages: readonly Message[]): string {
  const parts: string[] = [];
  for (const message of messages) {
    for (const block of message.content) {
      if (block.type === 'text') parts.push(block.text);
      else if (block.type === 'tool_result') parts.push(block.content);
      else parts.push(JSON.stringify(block.input));
    }
  }
  return parts.join('\n');
}

const REPLY_ERRORS = [
  /^tool call 'reply' was cut off at max_tokens/,
  /^reply was already called in this response; the first reply stands$/,
  /^tool 'reply' is not available to this agent$/,
  /^not executed: the session failed$/,
  /^cancelled$/,
];

/** The invariants that look at the whole tree once the run is over. */
function checkTree(last: Map<string, SessionSnapshot>, refs: Map<string, AnyActorRef>, atRest: Set<string>, logs: MemoryLogSink, violations: string[]): void {
  const statusOf = (id: string): string => (refs.get(id)?.getSnapshot() as { status?: string } | undefined)?.status ?? 'unknown';
  for (const [id, snapshot] of last) {
    const c = snapshot.context;
    const value = String(snapshot.value);
    const status = statusOf(id);
    // Every history ends clean, whatever ended the session (a stopped one answered its calls in its
    // teardown). A session that crashed mid-step is exempt: it never makes another request.
    if (status !== 'error' && c.messages.length > 0) {
      const problems = findPairingProblems(c.messages);
      if (problems.length > 0) violations.push(`${id}: its final history (${value}, ${status}) breaks the pairing rule: ${problems.join('; ')}`);
    }
    // No prose of another agent in any session's context.
    for (const match of textOfMessages(c.messages).matchAll(PROSE)) {
      if (match[1] !== id) violations.push(`${id}: its context holds prose of ${match[1]}`);
    }
    // replied iff a complete reply was called (and only sub-agents reply).
    let completeReplies = 0;
    c.messages.forEach((message, i) => {
      if (message.role !== 'assistant') return;
      const results = c.messages[i + 1]?.content ?? [];
      for (const block of message.content) {
        if (block.type !== 'tool_use' || block.name !== 'reply') continue;
        const result = results.find((r) => r.type === 'tool_result' && r.tool_use_id === block.id);
        if (result?.type !== 'tool_result') continue;
        if (!result.is_error) completeReplies += 1;
        else if (!REPLY_ERRORS.some((re) => re.test(result.content))) violations.push(`${id}: a reply was refused: ${result.content}`);
      }
    });
    if (c.agent.depth === 0 && completeReplies > 0) violations.push(`${id}: the root's reply was accepted`);
    if (completeReplies > 1) violations.push(`${id}: ${completeReplies} replies were accepted`);
    const interrupted = value === 'cancelled' || status === 'stopped' || status === 'error';
    if (completeReplies === 1 && value !== 'replied' && !interrupted) violations.push(`${id}: a complete reply was accepted but the session ended in ${value}`);
    if (value === 'replied' && completeReplies !== 1) violations.push(`${id}: replied without a complete reply`);

    // Each child delivers exactly one result, the one it ended with.
    const records = logs.records(id);
    const spawned = records.flatMap((r) => (r.type === 'spawn' ? [r] : []));
    const inbox = records.flatMap((r) => (r.type === 'inbox' ? [r.result] : []));
    // A parent at rest when the run settled lived to receive every result; one that ended first
    // (and so cancelled or stopped its children) may miss some.
    const parentLived = atRest.has(id);
    const byName = new Map<string, AgentResult[]>();
    for (const result of inbox) byName.set(result.name, [...(byName.get(result.name) ?? []), result]);
    const uses = new Map<string, number>();
    for (const spawn of spawned) {
      const use = (uses.get(spawn.name) ?? 0) + 1;
      uses.set(spawn.name, use);
      const delivered = byName.get(spawn.name)?.[use - 1];
      const child = last.get(spawn.id);
      if (!delivered) {
        // Only a parent that ended first (and so cancelled or stopped its children) may miss a result.
        if (parentLived)
          violations.push(`${id}: child ${spawn.id} never delivered (it is ${child ? `${String(child.value)}/${statusOf(spawn.id)}` : 'unknown'})`);
        if (statusOf(spawn.id) === 'active') violations.push(`${spawn.id}: still active though its parent ${id} is ${value}`);
        continue;
      }
      const childStatus = statusOf(spawn.id);
      if (childStatus === 'done' && child?.status === 'done') {
        const output = child.output;
        if (output && (output.outcome !== delivered.outcome || output.text !== delivered.text)) {
          violations.push(
            `${id}: child ${spawn.id} ended ${output.outcome} ${JSON.stringify(output.text.slice(0, 40))} but delivered ${delivered.outcome} ${JSON.stringify(delivered.text.slice(0, 40))}`,
          );
        }
      } else if (childStatus === 'error') {
        if (delivered.outcome !== 'failed' || !/^sub-agent crashed/.test(delivered.reason ?? ''))
          violations.push(`${id}: crashed child ${spawn.id} delivered ${delivered.outcome}`);
      } else violations.push(`${id}: child ${spawn.id} delivered while ${child ? `${String(child.value)}/${childStatus}` : 'never seen'}`);
    }
    for (const [name, results] of byName) {
      if (results.length > (uses.get(name) ?? 0)) violations.push(`${id}: ${results.length} results from '${name}' for ${uses.get(name) ?? 0} spawns`);
    }

    // Every log ends with exactly one terminal record: the outcome of the final state, or the stop.
    const terminal = records.flatMap((r, i) => (r.type === 'outcome' || r.type === 'stopped' ? [i] : []));
    if (terminal.length !== 1 || terminal[0] !== records.length - 1)
      violations.push(`${id}: its log has ${terminal.length} terminal records, the last at ${terminal.at(-1)} of ${records.length}`);
    const end = records.at(-1);
    const final = refs.get(id)?.getSnapshot() as SessionSnapshot | undefined;
    if (final?.status === 'done' && (end?.type !== 'outcome' || end.outcome !== final.output?.outcome || end.text !== final.output?.text)) {
      violations.push(`${id}: its log ends with ${JSON.stringify(end).slice(0, 120)} but it ended ${final.output?.outcome}`);
    }

    // The reply reminder: sub-agents only, at most once.
    const reminders = records.filter((r) => r.type === 'nudge' && r.latch === 'reply-reminder').length;
    if (reminders > (c.agent.depth > 0 ? 1 : 0)) violations.push(`${id}: the reply reminder was sent ${reminders} times`);
  }
}
