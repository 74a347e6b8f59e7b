import fc from 'fast-check';
import { z } from 'zod';
import { sleep } from '../../src/engine/model/streamModel.js';
import { defineTool, type Tool } from '../../src/tools/defineTool.js';
import { ScriptedProvider, type ScriptedCall, type ScriptedStep } from '../../src/testing/scriptedProvider.js';
import type { ModelRequest } from '../../src/engine/types.js';

/**
 * Random agent trees for crash-and-resume tests of durable runs (test/property/durable.property.test.ts).
 *
 * Why not the protocol fuzzer's scenarios (test/support/fuzzScenario.ts): those draw timing-bound
 * behaviour (tools that hang until a timeout, stalled streams, cancellation at the n-th snapshot,
 * crashing providers) whose outcome depends on the instant things happen, and scripts indexed by a
 * per-process request counter. A resumed process re-asks requests and re-runs calls at other
 * instants, so here:
 *
 * - every model response is a function of the request's content (the number of assistant messages
 *   in it and which reports it holds) and of the agent id, never of a counter: a resumed process
 *   gets the same answers to the same requests;
 * - tool_use ids are derived from the agent id and the step, so they are the same in every process;
 * - the outcome is order-independent: every agent starts its sub-agents, runs its steps, then
 *   waits ('waiting' turns, as many as it takes) until every sub-agent's report is in its history,
 *   and replies (the root: answers) with a digest of those reports in a fixed order. How reports
 *   are batched into turns varies from run to run; the final text does not. `expectedFinalText`
 *   computes it from the scenario alone.
 *
 * Besides plain steps (calls to a side-effecting `effect` tool and an idempotent `lookup` tool,
 * with latencies), scenarios draw what a resume must get right: a response cut off at max_tokens
 * (an incomplete call, then the truncation reminder), calls made beside a reply (the reply is
 * staged while they run), a sub-agent idle for a turn (the reply reminder), one whose first
 * request fails for good, and one cancelled by its parent in the batch that starts it.
 */

type DurableCall = { readonly tool: 'effect' | 'lookup'; readonly ms: number };

interface DurableStep {
  readonly calls: readonly DurableCall[];
  /** Prose before the calls. */
  readonly text: boolean;
  /** The model's latency for this step (ms). */
  readonly delayMs: number;
  /** Cut off at max_tokens: a last `effect` call is incomplete (never run); a truncation reminder follows. */
  readonly truncated: boolean;
}

/**
 * How a sub-agent ends: it replies; it is idle for a turn first (so the reply reminder nudges it);
 * its first model request fails for good; or its parent cancels it in the batch that starts it.
 * Each is as order-independent as replying: the parent's digest names the outcome.
 */
type Ending = 'reply' | 'idleThenReply' | 'fail' | 'cancelled';

export interface DurableAgent {
  readonly steps: readonly DurableStep[];
  /** Sub-agents by name, each started by the step `spawnAt[name]` of this agent. */
  readonly children: Readonly<Record<string, DurableAgent>>;
  readonly spawnAt: Readonly<Record<string, number>>;
  /** Of a sub-agent (`fail` and `cancelled` ones have no steps and no children). */
  readonly ending: Ending;
  /** Calls made in the same response as the reply (the reply is staged while they run). */
  readonly besideReply: readonly DurableCall[];
}

export interface DurableScenario {
  readonly root: DurableAgent;
}

const NAMES = ['a', 'b', 'c'] as const;

const callArb: fc.Arbitrary<DurableCall> = fc.record({ tool: fc.constantFrom('effect' as const, 'lookup' as const), ms: fc.integer({ min: 0, max: 4 }) });

// A step always calls something: one that calls nothing ends the agent's turn (see the waiting turns).
const stepArb: fc.Arbitrary<DurableStep> = fc.record({
  calls: fc.array(callArb, { minLength: 1, maxLength: 3 }),
  text: fc.boolean(),
  delayMs: fc.oneof({ arbitrary: fc.constant(0), weight: 2 }, { arbitrary: fc.integer({ min: 1, max: 4 }), weight: 1 }),
  truncated: fc.oneof({ arbitrary: fc.constant(false), weight: 6 }, { arbitrary: fc.constant(true), weight: 1 }),
});

/** Ends other than a reply, for leaves only. */
const LEAF_ENDINGS: fc.Arbitrary<Ending> = fc.oneof(
  { arbitrary: fc.constant<Ending>('reply'), weight: 6 },
  { arbitrary: fc.constant<Ending>('idleThenReply'), weight: 2 },
  { arbitrary: fc.constant<Ending>('fail'), weight: 1 },
  { arbitrary: fc.constant<Ending>('cancelled'), weight: 1 },
);

function agentArb(depth: number, maxDepth: number): fc.Arbitrary<DurableAgent> {
  const names = depth < maxDepth ? fc.uniqueArray(fc.constantFrom(...NAMES), { maxLength: depth === 0 ? 3 : 2 }) : fc.constant([] as string[]);
  return names.chain((childNames) =>
    fc
      .record({
        steps: fc.array(stepArb, { minLength: childNames.length > 0 ? 1 : 0, maxLength: 3 }),
        children: fc.tuple(...childNames.map(() => agentArb(depth + 1, maxDepth))),
        spawnSeeds: fc.array(fc.nat(), { minLength: childNames.length, maxLength: childNames.length }),
        ending: depth > 0 && childNames.length === 0 ? LEAF_ENDINGS : fc.constant<Ending>('reply'),
        besideReply:
          depth > 0
            ? fc.oneof({ arbitrary: fc.constant([]), weight: 3 }, { arbitrary: fc.array(callArb, { minLength: 1, maxLength: 2 }), weight: 1 })
            : fc.constant([]),
      })
      .map(({ steps, children, spawnSeeds, ending, besideReply }) => {
        // At most one truncated step (the truncation budget is per turn: one stays well within it).
        let truncations = 0;
        const kept = steps.map((step) => (step.truncated && truncations++ > 0 ? { ...step, truncated: false } : step));
        return {
          steps: ending === 'fail' || ending === 'cancelled' ? [] : kept,
          children: Object.fromEntries(childNames.map((name, i) => [name, children[i] as DurableAgent])),
          spawnAt: Object.fromEntries(childNames.map((name, i) => [name, (spawnSeeds[i] ?? 0) % Math.max(1, steps.length)])),
          ending,
          besideReply: ending === 'fail' || ending === 'cancelled' ? [] : besideReply,
        };
      }),
  );
}

export const MAX_DEPTH = 2;

export const durableScenarioArb: fc.Arbitrary<DurableScenario> = fc.record({ root: agentArb(0, MAX_DEPTH) });

/** The truncation budget the scenarios run with (see `DurableStep.truncated`). */
export const TRUNCATION_BUDGET = 2;

// ---------------------------------------------------------------------------------------------
// Scripts

function specOf(root: DurableAgent, agentId: string): DurableAgent | undefined {
  let spec: DurableAgent | undefined = root;
  for (const name of agentId.split('/').slice(1)) spec = spec?.children[name];
  return spec;
}

/** tool_use ids: the same for the same call in every process. */
function toolId(agentId: string, step: number, call: string): string {
  return `toolu_${agentId.replaceAll('/', '_').replaceAll('#', 'n')}_${step}_${call}`;
}

/** The one line of a report (reports never hold a newline). */
function reportLine(agentId: string, parts: readonly string[]): string {
  return `REPORT[${agentId}] {${parts.join(' | ')}}`;
}

const FINAL_PREFIX = 'FINAL';

/** What the root answers last, computed from the scenario alone (the oracle). */
export function expectedFinalText(scenario: DurableScenario): string {
  const digest = (agent: DurableAgent, id: string): string =>
    agent.ending === 'fail'
      ? `FAILED[${id}]`
      : agent.ending === 'cancelled'
        ? `CANCELLED[${id}]`
        : reportLine(
            id,
            Object.keys(agent.children)
              .sort()
              .map((name) => digest(agent.children[name] as DurableAgent, `${id}/${name}`)),
          );
  return `${FINAL_PREFIX} ${digest(scenario.root, 'root')}`;
}

/**
 * How a child's end shows in its parent's user turns: its report line, or the tag of a failed or
 * cancelled sub-agent (CONTRACT §4). Names are unique among siblings.
 */
export function deliveryLines(childId: string): (line: string) => string | undefined {
  const name = childId.split('/').at(-1) as string;
  return (line) => {
    if (line.startsWith(`REPORT[${childId}] `)) return line;
    if (line.startsWith(`[agent '${name}' failed`)) return `FAILED[${childId}]`;
    if (line === `[agent '${name}' was cancelled]`) return `CANCELLED[${childId}]`;
    return undefined;
  };
}

/** The user-turn lines of a history. */
function userLines(messages: ModelRequest['messages']): string[] {
  return messages.flatMap((m) => (m.role === 'user' ? m.content.flatMap((b) => (b.type === 'text' ? b.text.split('\n') : [])) : []));
}

/** The deliveries of `childIds` found in the user turns of a request, by child (see `deliveryLines`). */
function reportsIn(messages: ModelRequest['messages'], childIds: readonly string[]): Map<string, string[]> {
  const found = new Map<string, string[]>(childIds.map((id) => [id, []]));
  const lines = userLines(messages);
  for (const id of childIds) {
    const match = deliveryLines(id);
    for (const line of lines) {
      const digest = match(line);
      if (digest !== undefined) found.get(id)?.push(digest);
    }
  }
  return found;
}

/** The model: every response a function of the request's content. */
function scenarioStep(scenario: DurableScenario, request: ModelRequest): ScriptedStep {
  const agentId = request.agent.id;
  const spec = specOf(scenario.root, agentId);
  if (!spec) throw new Error(`no agent ${agentId} in the scenario`);
  if (spec.ending === 'fail') return { fault: { retryable: false, message: `${agentId} cannot go on` } };
  const k = request.messages.filter((m) => m.role === 'assistant').length;
  const step = spec.steps[k];
  if (step) {
    const calls: ScriptedCall[] = [];
    for (const [name, at] of Object.entries(spec.spawnAt)) {
      if (at !== k) continue;
      calls.push({ name: 'agent', input: { name, task: `task of ${agentId}/${name}` }, id: toolId(agentId, k, `agent_${name}`) });
      // Started and cancelled in one batch: the child is cancelled before it does anything.
      if (spec.children[name]?.ending === 'cancelled') calls.push({ name: 'cancel_agent', input: { name }, id: toolId(agentId, k, `cancel_${name}`) });
    }
    step.calls.forEach((call, i) => {
      calls.push({ name: call.tool, input: { n: i, ms: call.ms }, id: toolId(agentId, k, `${call.tool}_${i}`) });
    });
    if (step.truncated) calls.push({ name: 'effect', input: { n: 99, ms: 0 }, id: toolId(agentId, k, 'cut'), cutOff: true });
    return { ...(step.text ? { text: `Step ${k} of ${agentId}.` } : {}), calls, ...(step.delayMs > 0 ? { delayMs: step.delayMs } : {}) };
  }
  const childIds = Object.keys(spec.children)
    .sort()
    .map((name) => `${agentId}/${name}`);
  const reports = reportsIn(request.messages, childIds);
  if (childIds.some((id) => (reports.get(id) ?? []).length === 0)) return { text: `${agentId} is waiting for its sub-agents.` };
  const line = reportLine(
    agentId,
    childIds.map((id) => (reports.get(id) ?? [])[0] as string),
  );
  if (agentId === 'root') return { text: `${FINAL_PREFIX} ${line}` };
  // Idle once (a leaf, so quiet): the reply reminder nudges it, and it replies on the next step.
  if (spec.ending === 'idleThenReply' && k === spec.steps.length) return { text: `${agentId} has nothing more to say.` };
  const beside = spec.besideReply.map(
    (call, i): ScriptedCall => ({ name: call.tool, input: { n: i, ms: call.ms }, id: toolId(agentId, k, `${call.tool}_${i}`) }),
  );
  return { calls: [...beside, { name: 'reply', input: { result: line }, id: toolId(agentId, k, 'reply') }] };
}

export function scenarioProvider(scenario: DurableScenario): ScriptedProvider {
  return new ScriptedProvider({ agents: { '*': (request) => scenarioStep(scenario, request) } });
}

// ---------------------------------------------------------------------------------------------
// Tools

/** One execution of a tool call, and when it started: how many appends the process's store had written by then. */
export interface Execution {
  readonly id: string;
  readonly tool: 'effect' | 'lookup';
  readonly at: number;
}

/**
 * The tools of one process: `effect` has a side effect (not idempotent: a call in flight at a
 * crash must not be run again), `lookup` is idempotent. Every execution is logged with the
 * number of appends its process had written when it started (see `Execution.at`); `running`
 * holds the calls still running.
 */
export function scenarioTools(appends: () => number): { tools: Tool[]; executions: Execution[]; running: Set<string> } {
  const executions: Execution[] = [];
  const running = new Set<string>();
  const make = (tool: 'effect' | 'lookup', idempotent: boolean): Tool =>
    defineTool({
      name: tool,
      description: tool === 'effect' ? 'Changes the world.' : 'Looks something up.',
      input: z.object({ n: z.number().int(), ms: z.number().int() }),
      idempotent,
      run: async ({ n, ms }, { toolUseId, signal }) => {
        executions.push({ id: toolUseId, tool, at: appends() });
        running.add(toolUseId);
        try {
          if (ms > 0) await sleep(ms, signal);
          return `${tool} ${n} ok`;
        } finally {
          running.delete(toolUseId);
        }
      },
    });
  return { tools: [make('effect', false), make('lookup', true)], executions, running };
}

/** Every agent id of the scenario's tree, root first. */
export function agentIds(scenario: DurableScenario): string[] {
  const out: string[] = [];
  const visit = (agent: DurableAgent, id: string): void => {
    out.push(id);
    for (const name of Object.keys(agent.children).sort()) visit(agent.children[name] as DurableAgent, `${id}/${name}`);
  };
  visit(scenario.root, 'root');
  return out;
}
