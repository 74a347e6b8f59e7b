import type { AgentBudget } from '../engine/budget.js';
import type { AssistantBlock, ToolResultBlock, ToolSpec } from '../engine/types.js';
import type { PreparedRun, Tool } from './defineTool.js';
import { DEFAULT_PROTOCOL, PROTOCOL_TOOL_NAMES, validateCancelAgent, validateWaitForAgents, type ProtocolTools } from './protocolTools.js';

/** The two independent axes of CONTRACT §2. */
export interface ToolAxes {
  /** `agent` and `cancel_agent`. */
  readonly spawns: boolean;
  /** `reply`. */
  readonly replies: boolean;
}

/** Root: spawns, never replies. Sub-agent below the depth limit: both. At the limit: replies only. */
export function toolAxes(depth: number, maxDepth: number): ToolAxes {
  return { spawns: depth < maxDepth, replies: depth > 0 };
}

/** What one session is offered: the specs it advertises and the tools it may run. */
export interface Toolbox {
  readonly specs: readonly ToolSpec[];
  readonly axes: ToolAxes;
  readonly tools: ReadonlyMap<string, Tool>;
  /** The protocol tools' shapes (declared agent types, a typed reply). */
  readonly protocol: ProtocolTools;
}

const toolboxes = new WeakMap<ProtocolTools, WeakMap<readonly Tool[], Map<string, Toolbox>>>();

/**
 * The toolbox for `tools` on `axes`; the same object for every session with the same tool list
 * (sub-agents share their parent's), so a wide fan-out builds it once, not once per sub-agent.
 * A host may change its array between sessions: a cached toolbox serves only while it still holds
 * exactly the array's tools.
 */
export function buildToolbox(tools: readonly Tool[], axes: ToolAxes, protocol: ProtocolTools = DEFAULT_PROTOCOL): Toolbox {
  const key = `${axes.spawns ? 's' : ''}${axes.replies ? 'r' : ''}`;
  let byTools = toolboxes.get(protocol);
  if (!byTools) toolboxes.set(protocol, (byTools = new WeakMap()));
  let byAxes = byTools.get(tools);
  const cached = byAxes?.get(key);
  if (cached && holdsExactly(cached, tools)) return cached;
  const toolbox = makeToolbox(tools, axes, protocol);
  if (!byAxes) byTools.set(tools, (byAxes = new Map()));
  byAxes.set(key, toolbox);
  return toolbox;
}

function holdsExactly(toolbox: Toolbox, tools: readonly Tool[]): boolean {
  return toolbox.tools.size === tools.length && tools.every((tool) => toolbox.tools.get(tool.name) === tool);
}

function makeToolbox(tools: readonly Tool[], axes: ToolAxes, protocol: ProtocolTools): Toolbox {
  const byName = new Map<string, Tool>();
  for (const tool of tools) {
    if (PROTOCOL_TOOL_NAMES.has(tool.name)) throw new Error(`exarch: tool name '${tool.name}' is reserved for the agent protocol`);
    if (byName.has(tool.name)) throw new Error(`exarch: two tools are named '${tool.name}'`);
    byName.set(tool.name, tool);
  }
  const specs = [...(axes.spawns ? protocol.spawn : []), ...(axes.replies ? protocol.reply : []), ...tools.map((t) => t.spec)];
  return { specs, axes, tools: byName, protocol };
}

/** How one call of a batch will be answered. */
export type PlannedCall =
  | { readonly kind: 'answered'; readonly id: string; readonly result: ToolResultBlock }
  | {
      readonly kind: 'run';
      readonly id: string;
      readonly name: string;
      readonly run: PreparedRun;
      readonly timeoutMs: number | undefined;
      readonly idempotent: boolean;
      readonly readOnly: boolean;
    }
  | { readonly kind: 'agent'; readonly id: string; readonly name: string; readonly task: string; readonly type?: string; readonly budget?: AgentBudget }
  | { readonly kind: 'cancel_agent'; readonly id: string; readonly name: string }
  | { readonly kind: 'wait'; readonly id: string; readonly until: 'all' | 'any' }
  | { readonly kind: 'reply'; readonly id: string; readonly result: unknown };

export function errorResult(id: string, content: string): ToolResultBlock {
  return { type: 'tool_result', tool_use_id: id, content, is_error: true };
}

export function okResult(id: string, content: string): ToolResultBlock {
  return { type: 'tool_result', tool_use_id: id, content };
}

/**
 * Plans every `tool_use` of an assistant message, in model order: the allow-check (a tool that
 * was not advertised is refused), input validation, and calls cut off at `max_tokens`, which are
 * never executed.
 */
export function planBatch(
  content: readonly AssistantBlock[],
  toolbox: Toolbox,
  incompleteIds: ReadonlySet<string>,
  invalidInputs: Readonly<Record<string, string>> = {},
): PlannedCall[] {
  const plan: PlannedCall[] = [];
  for (const block of content) {
    if (block.type !== 'tool_use') continue;
    const { id, name, input } = block;
    if (incompleteIds.has(id)) {
      plan.push({
        kind: 'answered',
        id,
        result: errorResult(
          id,
          `tool call '${name}' was cut off at max_tokens before its input was complete, so it was not executed. Send it again, complete.`,
        ),
      });
      continue;
    }
    const rejected = invalidInputs[id];
    if (rejected !== undefined) {
      plan.push({ kind: 'answered', id, result: errorResult(id, `tool call '${name}' was not executed: ${rejected}. Send it again with a valid input.`) });
      continue;
    }
    const refusal = allowCheck(name, toolbox);
    if (refusal) {
      plan.push({ kind: 'answered', id, result: errorResult(id, refusal) });
      continue;
    }
    if (name === 'agent') {
      const parsed = toolbox.protocol.validateAgent(input);
      if (!parsed.ok) {
        plan.push(invalid(id, parsed.error));
        continue;
      }
      const { name: child, task, type, budget } = parsed.value;
      const limit = budget && {
        ...(budget.tokens === undefined ? {} : { tokens: budget.tokens }),
        ...(budget.cost === undefined ? {} : { cost: budget.cost }),
      };
      plan.push({ kind: 'agent', id, name: child, task, ...(type === undefined ? {} : { type }), ...(limit === undefined ? {} : { budget: limit }) });
    } else if (name === 'cancel_agent') {
      const parsed = validateCancelAgent(input);
      plan.push(parsed.ok ? { kind: 'cancel_agent', id, name: parsed.value.name } : invalid(id, parsed.error));
    } else if (name === 'wait_for_agents') {
      const parsed = validateWaitForAgents(input);
      plan.push(parsed.ok ? { kind: 'wait', id, until: parsed.value.until ?? 'all' } : invalid(id, parsed.error));
    } else if (name === 'reply') {
      const parsed = toolbox.protocol.validateReply(input);
      plan.push(parsed.ok ? { kind: 'reply', id, result: parsed.value } : invalid(id, parsed.error));
    } else {
      const tool = toolbox.tools.get(name);
      if (!tool) throw new Error(`tool '${name}' passed the allow-check but is not in the toolbox`);
      const prepared = tool.prepare(input);
      plan.push(
        prepared.ok
          ? { kind: 'run', id, name, run: prepared.value, timeoutMs: tool.timeoutMs, idempotent: tool.idempotent, readOnly: tool.readOnly }
          : invalid(id, prepared.error),
      );
    }
  }
  return plan;
}

/** Why a call to `name` is refused, or undefined when the session was offered that tool. */
function allowCheck(name: string, toolbox: Toolbox): string | undefined {
  const offered =
    name === 'agent' || name === 'cancel_agent' || name === 'wait_for_agents'
      ? toolbox.axes.spawns
      : name === 'reply'
        ? toolbox.axes.replies
        : toolbox.tools.has(name);
  if (offered) return undefined;
  if (PROTOCOL_TOOL_NAMES.has(name)) return `tool '${name}' is not available to this agent`;
  return `unknown tool '${name}': this agent was not offered it`;
}

function invalid(id: string, error: string): PlannedCall {
  return { kind: 'answered', id, result: errorResult(id, error) };
}
