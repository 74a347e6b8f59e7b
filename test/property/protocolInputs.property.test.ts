import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_PROTOCOL, typedAgentTool, validateCancelAgent, validateWaitForAgents } from '../../src/tools/protocolTools.js';

/**
 * The protocol tools' inputs are checked by hand (src/tools/protocolInputs.ts: zod stays out of a
 * cold `import('exarch')`). The oracle is the zod schemas they replaced, written out here: the same
 * JSON Schema to the byte (recordings and replays compare request bodies), the same verdict and the
 * same words (the model reads them) for any input a model's JSON can hold.
 */

const agentName = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'must be 1–64 characters of A-Za-z0-9_-');
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
const cancelAgentInput = z.object({ name: agentName.describe('The name of a running sub-agent.') });
const replyInput = z.object({
  result: z
    .unknown()
    .optional()
    .describe('Your complete result: a markdown report as a string, or a JSON object/array. Only this reaches the agent that started you.'),
});
const waitForAgentsInput = z.object({
  until: z.enum(['all', 'any']).optional().describe("'all' (default): wait until every running sub-agent has finished; 'any': until at least one has."),
});
const TYPES = ['researcher', 'writer'] as const;
const typedAgentInput = agentInput.extend({
  type: z
    .enum(TYPES, { error: (issue) => `unknown agent type ${JSON.stringify(issue.input)}; the declared types are 'researcher', 'writer'` })
    .optional()
    .describe(
      "The kind of sub-agent to start, with its own tools, model and instructions: 'researcher': Reads; 'writer': Writes. Leave it out for a general sub-agent.",
    ),
});

/** The schema as a tool's input_schema, as zod wrote it. */
function jsonSchema(schema: z.ZodType): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io: 'input' }) as Record<string, unknown>;
  return rest;
}

/** zod's verdict in the words exarch answered a model with. */
function oracle(tool: string, schema: z.ZodType, input: unknown): { ok: true; value: unknown } | { ok: false; error: string } {
  const parsed = schema.safeParse(input);
  if (parsed.success) return { ok: true, value: parsed.data };
  const fields = parsed.error.issues.map((issue) => `${issue.path.length > 0 ? issue.path.map(String).join('.') : '(input)'}: ${issue.message}`);
  return { ok: false, error: `invalid input for tool '${tool}': ${fields.join('; ')}` };
}

/** Values a model's JSON can hold, leaning to the ones the checks look at. */
const scalar = fc.oneof(
  fc.constantFrom(null, true, '', 'a', 'a b', 'all', 'any', 'researcher', 'writer', 'x'.repeat(65), 0, -1, 1, 1.5, -1.5, 2 ** 53, 1e300, -0),
  fc.string({ maxLength: 6 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);
const json = fc.letrec((tie) => ({
  value: fc.oneof(
    { depthSize: 'small' },
    scalar,
    fc.array(tie('value'), { maxLength: 2 }),
    fc.dictionary(fc.constantFrom('tokens', 'cost', 'x'), tie('value'), { maxKeys: 2 }),
  ),
})).value;
const maybe = (arb: fc.Arbitrary<unknown>) => fc.option(arb, { nil: undefined });
const budget = fc.oneof(
  json,
  fc.record({ tokens: maybe(scalar), cost: maybe(scalar) }, { requiredKeys: [] }),
  fc.record({ tokens: maybe(scalar), cost: maybe(scalar), x: scalar }, { requiredKeys: ['x'] }),
);
const agentCall = fc.oneof(
  json,
  fc.record({ name: maybe(scalar), task: maybe(scalar), budget: maybe(budget), type: maybe(scalar), other: scalar }, { requiredKeys: [] }),
);

const runs = { numRuns: 2000 };

describe('the protocol tools without zod, against zod', () => {
  it('advertise the JSON Schemas zod made of their inputs', () => {
    const [agent, cancel, wait] = DEFAULT_PROTOCOL.spawn;
    expect(agent?.input_schema).toEqual(jsonSchema(agentInput));
    expect(cancel?.input_schema).toEqual(jsonSchema(cancelAgentInput));
    expect(wait?.input_schema).toEqual(jsonSchema(waitForAgentsInput));
    expect(DEFAULT_PROTOCOL.reply[0]?.input_schema).toEqual(jsonSchema(replyInput));
    const typed = typedAgentTool([
      { name: 'researcher', description: 'Reads.' },
      { name: 'writer', description: 'Writes..' },
    ]);
    expect(JSON.stringify(typed.spawn[0]?.input_schema)).toBe(JSON.stringify(jsonSchema(typedAgentInput)));
    // Byte for byte, key order included: a recorded request body is compared as it was sent.
    expect(JSON.stringify(agent?.input_schema)).toBe(JSON.stringify(jsonSchema(agentInput)));
  });

  it('agent: the same verdict and words as zod', () => {
    fc.assert(
      fc.property(agentCall, (input) => {
        expect(DEFAULT_PROTOCOL.validateAgent(input)).toEqual(oracle('agent', agentInput, input));
      }),
      runs,
    );
  });

  it('agent with declared types: the same verdict and words as zod', () => {
    const typed = typedAgentTool([
      { name: 'researcher', description: 'Reads.' },
      { name: 'writer', description: 'Writes..' },
    ]);
    fc.assert(
      fc.property(agentCall, (input) => {
        expect(typed.validateAgent(input)).toEqual(oracle('agent', typedAgentInput, input));
      }),
      runs,
    );
  });

  it('cancel_agent, wait_for_agents and reply: the same verdict and words as zod', () => {
    const call = fc.oneof(json, fc.record({ name: maybe(scalar), until: maybe(scalar), result: maybe(json) }, { requiredKeys: [] }));
    fc.assert(
      fc.property(call, (input) => {
        expect(validateCancelAgent(input)).toEqual(oracle('cancel_agent', cancelAgentInput, input));
        expect(validateWaitForAgents(input)).toEqual(oracle('wait_for_agents', waitForAgentsInput, input));
        const reply = oracle('reply', replyInput, input);
        expect(DEFAULT_PROTOCOL.validateReply(input)).toEqual(reply.ok ? { ok: true, value: (reply.value as { result?: unknown }).result } : reply);
      }),
      runs,
    );
  });
});
