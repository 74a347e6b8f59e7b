import { z } from 'zod';
import type { ToolSpec } from '../engine/types.js';
import { inputValidator, toolSpec, type Validation } from './defineTool.js';

/**
 * The agent-protocol tools (CONTRACT §2). The session machine handles them itself, since they
 * spawn, cancel and end sessions; they are validated and advertised like every other tool.
 */

export const AGENT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const agentName = z.string().regex(AGENT_NAME, 'must be 1–64 characters of A-Za-z0-9_-');

/** The `budget` of an `agent` call (CONTRACT-level: docs/protocol.md §2). */
const agentBudgetInput = z
  .strictObject({
    tokens: z.number().int().positive().optional().describe('Tokens of every kind (input, output, cache) it and the sub-agents it starts may spend together.'),
    cost: z.number().positive().optional().describe('US$, at list prices, it and the sub-agents it starts may spend together.'),
  })
  .refine((budget) => budget.tokens !== undefined || budget.cost !== undefined, { message: 'give tokens, cost or both' })
  .describe(
    "Optional: the most this sub-agent and every agent it starts may spend together. Once it is reached the sub-agent stops at once (its sub-agents are cancelled) and its result arrives as [agent 'NAME' hit the step cap].",
  );

const agentInput = z.object({
  name: agentName.describe("The sub-agent's name, unique among your running sub-agents."),
  task: z.string().min(1).describe('Everything the sub-agent needs to know: it sees nothing else of your conversation.'),
  budget: agentBudgetInput.optional(),
});

const cancelAgentInput = z.object({
  name: agentName.describe('The name of a running sub-agent.'),
});

const replyInput = z.object({
  result: z
    .unknown()
    .optional()
    .describe('Your complete result: a markdown report as a string, or a JSON object/array. Only this reaches the agent that started you.'),
});

const waitForAgentsInput = z.object({
  until: z.enum(['all', 'any']).optional().describe("'all' (default): wait until every running sub-agent has finished; 'any': until at least one has."),
});

const agentSpec: ToolSpec = toolSpec(
  'agent',
  'Start a sub-agent that works on `task` asynchronously. It returns at once; the sub-agent’s result arrives later as a ' +
    "message that begins with [agent 'NAME' …]. Start several in one response to run them in parallel. When you have " +
    'nothing else to do until they finish, call wait_for_agents in the same response.',
  agentInput,
);

const waitForAgentsSpec: ToolSpec = toolSpec(
  'wait_for_agents',
  'Wait for your running sub-agents without another turn: call it in the same response as your `agent` calls (or later) when ' +
    'you have nothing else to do until they finish. You are woken once the condition holds, with this call’s result and every ' +
    'sub-agent result that arrived, in one message. With no sub-agent running it returns at once.',
  waitForAgentsInput,
);

const cancelAgentSpec: ToolSpec = toolSpec(
  'cancel_agent',
  "Cancel a running sub-agent and everything it started. Its result arrives as [agent 'NAME' was cancelled].",
  cancelAgentInput,
);

const replySpec: ToolSpec = toolSpec(
  'reply',
  'Finish and hand your result to the agent that started you. `result` is the only thing it receives: none of your ' +
    'other messages reach it. Calling reply ends your session once the other calls of this response have run.',
  replyInput,
);

const validateAgent = inputValidator('agent', agentInput);
export const validateCancelAgent = inputValidator('cancel_agent', cancelAgentInput);
const validateReply = inputValidator('reply', replyInput);
export const validateWaitForAgents = inputValidator('wait_for_agents', waitForAgentsInput);

const SPAWN_TOOLS: readonly ToolSpec[] = [agentSpec, cancelAgentSpec, waitForAgentsSpec];
const REPLY_TOOLS: readonly ToolSpec[] = [replySpec];
export const PROTOCOL_TOOL_NAMES: ReadonlySet<string> = new Set(['agent', 'cancel_agent', 'wait_for_agents', 'reply']);

/** A validated `agent` call: `type` names a declared agent profile, when the model gave one. */
interface AgentCall {
  readonly name: string;
  readonly task: string;
  readonly type?: string;
  readonly budget?: { readonly tokens?: number | undefined; readonly cost?: number | undefined };
}

/**
 * The `agent` and `reply` tools one session is offered, and how their calls are validated. They
 * change with declared agents (`agent` gains `type`) and with a reply schema (`reply`'s input is
 * that schema); without either they are the constants above, byte for byte.
 */
export interface ProtocolTools {
  /** `agent`, `cancel_agent`, `wait_for_agents`. */
  readonly spawn: readonly ToolSpec[];
  /** `reply`. */
  readonly reply: readonly ToolSpec[];
  readonly validateAgent: (input: unknown) => Validation<AgentCall>;
  /** On success, `value` is what the reply hands up: `result`, or the whole parsed input of a typed reply. */
  readonly validateReply: (input: unknown) => Validation<unknown>;
}

export const DEFAULT_PROTOCOL: ProtocolTools = {
  spawn: SPAWN_TOOLS,
  reply: REPLY_TOOLS,
  validateAgent,
  validateReply: (input) => {
    const parsed = validateReply(input);
    return parsed.ok ? { ok: true, value: parsed.value.result } : parsed;
  },
};

/** A declared agent type as the `agent` tool lists it. */
export interface AgentTypeEntry {
  readonly name: string;
  readonly description: string;
}

/**
 * The `agent` tool and its validator for declared agent types: `type` is an enum of their names,
 * each described in the schema; an unknown type is refused with the list of the valid ones.
 */
export function typedAgentTool(types: readonly AgentTypeEntry[]): Pick<ProtocolTools, 'spawn' | 'validateAgent'> {
  const names = types.map((t) => t.name);
  const [first, ...others] = names;
  if (first === undefined) return { spawn: SPAWN_TOOLS, validateAgent };
  const described = types.map((t) => ({ name: t.name, description: withoutClosingStop(t.description) }));
  const listed = described.map((t) => `'${t.name}': ${t.description}`).join('; ');
  const input = agentInput.extend({
    type: z
      .enum([first, ...others], {
        error: (issue) => `unknown agent type ${JSON.stringify(issue.input)}; the declared types are ${names.map((n) => `'${n}'`).join(', ')}`,
      })
      .optional()
      .describe(`The kind of sub-agent to start, with its own tools, model and instructions: ${listed}. Leave it out for a general sub-agent.`),
  });
  const spec = toolSpec(
    'agent',
    `${agentSpec.description} Declared agent types (pass one as \`type\`): ${described.map((t) => `${t.name} — ${t.description}`).join('; ')}.`,
    input,
  );
  return { spawn: [spec, cancelAgentSpec, waitForAgentsSpec], validateAgent: inputValidator('agent', input) };
}

/**
 * The `reply` tool of an agent with a reply schema: its input is the schema itself (a zod object),
 * so the model fills in the fields and an invalid reply is answered with the fields that failed.
 * Throws one line when the schema is not an object or has no JSON Schema form.
 */
export function typedReplyTool(schema: z.ZodType, owner: string): Pick<ProtocolTools, 'reply' | 'validateReply'> {
  let spec: ToolSpec;
  try {
    spec = toolSpec(
      'reply',
      "Finish and hand your result to the agent that started you, as the fields of this tool's input: they are the only thing it " +
        'receives, and a reply that does not match the schema is refused with the fields to correct. Calling reply ends your ' +
        'session once the other calls of this response have run.',
      schema,
    );
  } catch (error) {
    const why = error instanceof Error ? error.message.replace(/^tool 'reply': /, '') : String(error);
    throw new TypeError(`exarch: the reply schema of ${owner} cannot be a tool input: ${why}`);
  }
  return { reply: [spec], validateReply: inputValidator('reply', schema) };
}

/**
 * A declared type's description without its own closing stop: the list it joins has its own
 * punctuation ("Writes prose.." read as a typo). A loop, not `/\.+$/`, which backtracks
 * quadratically on a long run of dots that does not end the text.
 */
function withoutClosingStop(text: string): string {
  let end = text.length;
  while (end > 0 && text[end - 1] === '.') end -= 1;
  return text.slice(0, end);
}
