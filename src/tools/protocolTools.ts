import type { ToolSpec } from '../engine/types.js';
import { invalidInput, inputValidator, toolSpec, type Validation } from './defineTool.js';
import { AGENT_NAME, type BudgetInput, checkBudget, checkName, checkOption, checkTask, type Issues, isRecord, objectIssue } from './protocolInputs.js';
import type { z } from 'zod';

/**
 * The agent-protocol tools (CONTRACT §2). The session machine handles them itself, since they
 * spawn, cancel and end sessions; they are validated and advertised like every other tool. Their
 * JSON Schemas are written out and their inputs checked by hand (see `protocolInputs.ts`: zod
 * is not loaded by `import('exarch')`); a host's reply schema is its own zod schema.
 */

export { AGENT_NAME };

const AGENT_NAME_PROPERTY = { type: 'string', pattern: AGENT_NAME.source } as const;

const AGENT_PROPERTIES = {
  name: { ...AGENT_NAME_PROPERTY, description: "The sub-agent's name, unique among your running sub-agents." },
  task: { type: 'string', minLength: 1, description: 'Everything the sub-agent needs to know: it sees nothing else of your conversation.' },
  budget: {
    type: 'object',
    properties: {
      tokens: {
        description: 'Tokens of every kind (input, output, cache) it and the sub-agents it starts may spend together.',
        type: 'integer',
        exclusiveMinimum: 0,
        maximum: Number.MAX_SAFE_INTEGER,
      },
      cost: { description: 'US$, at list prices, it and the sub-agents it starts may spend together.', type: 'number', exclusiveMinimum: 0 },
    },
    additionalProperties: false,
    description:
      "Optional: the most this sub-agent and every agent it starts may spend together. Once it is reached the sub-agent stops at once (its sub-agents are cancelled) and its result arrives as [agent 'NAME' hit the step cap].",
  },
};

const agentSpec: ToolSpec = {
  name: 'agent',
  description:
    'Start a sub-agent that works on `task` asynchronously. It returns at once; the sub-agent’s result arrives later as a ' +
    "message that begins with [agent 'NAME' …]. Start several in one response to run them in parallel. When you have " +
    'nothing else to do until they finish, call wait_for_agents in the same response.',
  input_schema: { type: 'object', properties: AGENT_PROPERTIES, required: ['name', 'task'] },
};

const waitForAgentsSpec: ToolSpec = {
  name: 'wait_for_agents',
  description:
    'Wait for your running sub-agents without another turn: call it in the same response as your `agent` calls (or later) when ' +
    'you have nothing else to do until they finish. You are woken once the condition holds, with this call’s result and every ' +
    'sub-agent result that arrived, in one message. With no sub-agent running it returns at once.',
  input_schema: {
    type: 'object',
    properties: {
      until: {
        description: "'all' (default): wait until every running sub-agent has finished; 'any': until at least one has.",
        type: 'string',
        enum: ['all', 'any'],
      },
    },
  },
};

const cancelAgentSpec: ToolSpec = {
  name: 'cancel_agent',
  description: "Cancel a running sub-agent and everything it started. Its result arrives as [agent 'NAME' was cancelled].",
  input_schema: { type: 'object', properties: { name: { ...AGENT_NAME_PROPERTY, description: 'The name of a running sub-agent.' } }, required: ['name'] },
};

const replySpec: ToolSpec = {
  name: 'reply',
  description:
    'Finish and hand your result to the agent that started you. `result` is the only thing it receives: none of your ' +
    'other messages reach it. Calling reply ends your session once the other calls of this response have run.',
  input_schema: {
    type: 'object',
    properties: {
      result: {
        description: 'Your complete result: a markdown report as a string, or a JSON object/array. Only this reaches the agent that started you.',
      },
    },
  },
};

/** The checked input, or the error naming what is wrong with it. */
function verdict<T>(toolName: string, issues: Issues, value: () => T): Validation<T> {
  return issues.length === 0 ? { ok: true, value: value() } : { ok: false, error: invalidInput(toolName, issues) };
}

/** The `agent` call's fields; `types`, when given, are the declared agent types `type` may name. */
function checkAgent(input: unknown, types?: { readonly names: readonly string[]; readonly unknown: (value: unknown) => string }): Validation<AgentCall> {
  const notObject = objectIssue(input);
  if (notObject !== undefined || !isRecord(input)) return { ok: false, error: invalidInput('agent', notObject === undefined ? [] : [notObject]) };
  const issues: Issues = [];
  checkName(input['name'], ['name'], issues);
  checkTask(input['task'], ['task'], issues);
  const budget = input['budget'] === undefined ? undefined : checkBudget(input['budget'], issues);
  if (types !== undefined) checkOption(input['type'], types.names, ['type'], issues, types.unknown);
  return verdict('agent', issues, () => ({
    name: input['name'] as string,
    task: input['task'] as string,
    ...('budget' in input ? { budget } : {}),
    ...(types !== undefined && 'type' in input ? { type: input['type'] as string | undefined } : {}),
  }));
}

const validateAgent = (input: unknown): Validation<AgentCall> => checkAgent(input);

export function validateCancelAgent(input: unknown): Validation<{ readonly name: string }> {
  const notObject = objectIssue(input);
  if (notObject !== undefined || !isRecord(input)) return { ok: false, error: invalidInput('cancel_agent', notObject === undefined ? [] : [notObject]) };
  const issues: Issues = [];
  checkName(input['name'], ['name'], issues);
  return verdict('cancel_agent', issues, () => ({ name: input['name'] as string }));
}

export function validateWaitForAgents(input: unknown): Validation<{ readonly until?: 'all' | 'any' | undefined }> {
  const notObject = objectIssue(input);
  if (notObject !== undefined || !isRecord(input)) return { ok: false, error: invalidInput('wait_for_agents', notObject === undefined ? [] : [notObject]) };
  const issues: Issues = [];
  checkOption(input['until'], ['all', 'any'], ['until'], issues);
  return verdict('wait_for_agents', issues, () => ('until' in input ? { until: input['until'] as 'all' | 'any' | undefined } : {}));
}

const SPAWN_TOOLS: readonly ToolSpec[] = [agentSpec, cancelAgentSpec, waitForAgentsSpec];
const REPLY_TOOLS: readonly ToolSpec[] = [replySpec];
export const PROTOCOL_TOOL_NAMES: ReadonlySet<string> = new Set(['agent', 'cancel_agent', 'wait_for_agents', 'reply']);

/** A validated `agent` call: `type` names a declared agent profile, when the model gave one. */
interface AgentCall {
  readonly name: string;
  readonly task: string;
  readonly type?: string;
  readonly budget?: BudgetInput | undefined;
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
    const notObject = objectIssue(input);
    if (notObject !== undefined || !isRecord(input)) return { ok: false, error: invalidInput('reply', notObject === undefined ? [] : [notObject]) };
    return { ok: true, value: input['result'] };
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
  if (names.length === 0) return { spawn: SPAWN_TOOLS, validateAgent };
  const described = types.map((t) => ({ name: t.name, description: withoutClosingStop(t.description) }));
  const listed = described.map((t) => `'${t.name}': ${t.description}`).join('; ');
  const typeProperty = {
    description: `The kind of sub-agent to start, with its own tools, model and instructions: ${listed}. Leave it out for a general sub-agent.`,
    type: 'string',
    enum: names,
  };
  const spec: ToolSpec = {
    name: 'agent',
    description: `${agentSpec.description} Declared agent types (pass one as \`type\`): ${described.map((t) => `${t.name} — ${t.description}`).join('; ')}.`,
    input_schema: { type: 'object', properties: { ...AGENT_PROPERTIES, type: typeProperty }, required: ['name', 'task'] },
  };
  const typeCheck = {
    names,
    unknown: (value: unknown) => `unknown agent type ${JSON.stringify(value)}; the declared types are ${names.map((n) => `'${n}'`).join(', ')}`,
  };
  return { spawn: [spec, cancelAgentSpec, waitForAgentsSpec], validateAgent: (input) => checkAgent(input, typeCheck) };
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
