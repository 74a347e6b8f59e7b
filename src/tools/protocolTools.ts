import { z } from 'zod';
import type { ToolSpec } from '../types.js';
import { inputValidator, toolSpec } from './defineTool.js';

/**
 * The agent-protocol tools (CONTRACT §2). The session machine handles them itself, since they
 * spawn, cancel and end sessions; they are validated and advertised like every other tool.
 */

export const AGENT_NAME = /^[A-Za-z0-9_-]{1,64}$/;

const agentName = z.string().regex(AGENT_NAME, 'must be 1–64 characters of A-Za-z0-9_-');

export const agentInput = z.object({
  name: agentName.describe("The sub-agent's name, unique among your running sub-agents."),
  task: z.string().min(1).describe('Everything the sub-agent needs to know: it sees nothing else of your conversation.'),
});

export const cancelAgentInput = z.object({
  name: agentName.describe('The name of a running sub-agent.'),
});

export const replyInput = z.object({
  result: z
    .unknown()
    .optional()
    .describe('Your complete result: a markdown report as a string, or a JSON object/array. Only this reaches the agent that started you.'),
});

export const waitForAgentsInput = z.object({
  until: z
    .enum(['all', 'any'])
    .optional()
    .describe("'all' (default): wait until every running sub-agent has finished; 'any': until at least one has."),
});

export const agentSpec: ToolSpec = toolSpec(
  'agent',
  'Start a sub-agent that works on `task` asynchronously. It returns at once; the sub-agent’s result arrives later as a ' +
    'message that begins with [agent \'NAME\' …]. Start several in one response to run them in parallel. When you have ' +
    'nothing else to do until they finish, call wait_for_agents in the same response.',
  agentInput,
);

export const waitForAgentsSpec: ToolSpec = toolSpec(
  'wait_for_agents',
  'Wait for your running sub-agents without another turn: call it in the same response as your `agent` calls (or later) when ' +
    'you have nothing else to do until they finish. You are woken once the condition holds, with this call’s result and every ' +
    'sub-agent result that arrived, in one message. With no sub-agent running it returns at once.',
  waitForAgentsInput,
);

export const cancelAgentSpec: ToolSpec = toolSpec(
  'cancel_agent',
  'Cancel a running sub-agent and everything it started. Its result arrives as [agent \'NAME\' was cancelled].',
  cancelAgentInput,
);

export const replySpec: ToolSpec = toolSpec(
  'reply',
  'Finish and hand your result to the agent that started you. `result` is the only thing it receives: none of your ' +
    'other messages reach it. Calling reply ends your session once the other calls of this response have run.',
  replyInput,
);

export const validateAgent = inputValidator('agent', agentInput);
export const validateCancelAgent = inputValidator('cancel_agent', cancelAgentInput);
export const validateReply = inputValidator('reply', replyInput);
export const validateWaitForAgents = inputValidator('wait_for_agents', waitForAgentsInput);

export const SPAWN_TOOLS: readonly ToolSpec[] = [agentSpec, cancelAgentSpec, waitForAgentsSpec];
export const REPLY_TOOLS: readonly ToolSpec[] = [replySpec];
export const PROTOCOL_TOOL_NAMES: ReadonlySet<string> = new Set(['agent', 'cancel_agent', 'wait_for_agents', 'reply']);
