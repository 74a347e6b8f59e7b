import { z } from 'zod';

/**
 * Schemas of the shapes exarch reads back from files it wrote before (a run's journal, a trace):
 * a history's messages and a usage count, as src/engine/types.ts declares them. What was written
 * can have been changed by anyone since, so what is read is checked against these before use.
 * Objects are loose: a field a later exarch adds still reads.
 */

/** A count of tokens or characters. */
export const COUNT = z.number().min(0).max(Number.MAX_SAFE_INTEGER);

export const USAGE = z.looseObject({ inputTokens: COUNT, outputTokens: COUNT, cacheCreationInputTokens: COUNT, cacheReadInputTokens: COUNT });

const TEXT_BLOCK = z.looseObject({ type: z.literal('text'), text: z.string() });
const TOOL_USE_BLOCK = z.looseObject({ type: z.literal('tool_use'), id: z.string(), name: z.string(), input: z.record(z.string(), z.unknown()) });
export const TOOL_RESULT_BLOCK = z.looseObject({
  type: z.literal('tool_result'),
  tool_use_id: z.string(),
  content: z.string(),
  is_error: z.boolean().optional(),
});

export const USER_CONTENT = z.array(z.discriminatedUnion('type', [TEXT_BLOCK, TOOL_RESULT_BLOCK]));
export const ASSISTANT_CONTENT = z.array(z.discriminatedUnion('type', [TEXT_BLOCK, TOOL_USE_BLOCK]));

export const MESSAGE = z.discriminatedUnion('role', [
  z.looseObject({ role: z.literal('user'), content: USER_CONTENT }),
  z.looseObject({ role: z.literal('assistant'), content: ASSISTANT_CONTENT }),
]);

export const AGENT_OUTCOME = z.enum(['replied', 'empty', 'capped', 'failed', 'cancelled']);
