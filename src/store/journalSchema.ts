import { z } from 'zod';
import { AGENT_OUTCOME, ASSISTANT_CONTENT, COUNT, TOOL_RESULT_BLOCK, USAGE, USER_CONTENT } from '../engine/messageSchema.js';
import { schemaProblem } from '../engine/schemaProblem.js';
import { STOP_REASONS } from '../engine/types.js';
import type { JournalRecord } from '../engine/log/journalRecord.js';

/**
 * What a journal record must hold to be read back: every field a resume (`restoreRun`), the
 * viewer (`traceFromJournal`) and the totals read, of the type they read it as. A store's file is
 * hostile like any input (an agent with a shell can write the SQLite file in its workspace), and a
 * record of the wrong shape would otherwise fail deep inside a resume with JavaScript's own words.
 * Fields a reader does not know are kept, so a record of a later exarch with more fields still reads.
 */

const usage = USAGE;
const count = COUNT;
const identity = z.looseObject({ name: z.string(), path: z.array(z.string()), depth: z.int().min(0), id: z.string() });
const agentResult = z.looseObject({ name: z.string(), outcome: AGENT_OUTCOME, text: z.string(), reason: z.string().optional(), usage });

const RECORD = z.discriminatedUnion('type', [
  z.looseObject({ type: z.literal('session'), agent: identity, task: z.string().optional() }),
  z.discriminatedUnion('role', [
    z.looseObject({ type: z.literal('message'), role: z.literal('user'), content: USER_CONTENT }),
    z.looseObject({ type: z.literal('message'), role: z.literal('assistant'), content: ASSISTANT_CONTENT }),
  ]),
  z.looseObject({
    type: z.literal('usage'),
    request: usage,
    session: usage,
    stopReason: z.enum(STOP_REASONS),
    incomplete: z.array(z.string()).optional(),
    requests: count.optional(),
    lost: usage.optional(),
  }),
  z.looseObject({ type: z.literal('lost'), requests: count, usage }),
  z.looseObject({
    type: z.literal('spawn'),
    name: z.string(),
    id: z.string(),
    actorId: z.string(),
    task: z.string(),
    profile: z.string().optional(),
    budget: z.looseObject({ tokens: count.optional(), cost: z.number().min(0).optional() }).optional(),
  }),
  z.looseObject({ type: z.literal('inbox'), actorId: z.string(), result: agentResult }),
  z.looseObject({ type: z.literal('resumed'), state: z.string(), alone: z.literal(true).optional() }),
  z.looseObject({ type: z.literal('nudge'), latch: z.string(), text: z.string() }),
  z.looseObject({ type: z.literal('retry'), attempt: z.number(), delayMs: z.number(), reason: z.string() }),
  z.looseObject({ type: z.literal('stopped'), state: z.string(), usage, totalUsage: usage }),
  z.looseObject({ type: z.literal('outcome'), outcome: AGENT_OUTCOME, text: z.string(), reason: z.string().optional(), usage, totalUsage: usage }),
  z.looseObject({ type: z.literal('tool'), result: TOOL_RESULT_BLOCK }),
  z.looseObject({ type: z.literal('waiting') }),
  z.looseObject({ type: z.literal('awaiting'), calls: z.array(z.string()) }),
  z.looseObject({
    type: z.literal('approval'),
    callId: z.string(),
    tool: z.string(),
    decision: z.enum(['approve', 'deny', 'always']),
    reason: z.string().optional(),
  }),
  z.looseObject({ type: z.literal('dispatching') }),
  z.looseObject({ type: z.literal('queued'), text: z.string() }),
  z.looseObject({ type: z.literal('interrupt') }),
  z.looseObject({ type: z.literal('resume') }),
]);

/** Takes a type only if it is `never`: see below. */
function none<_T extends never>(): void {}
// Every type of JournalRecord has its schema here: a record type added there and not here fails to
// compile, rather than every journal that holds one reading as damaged.
none<Exclude<JournalRecord['type'], z.infer<typeof RECORD>['type']>>();

/** Why `value` is not a journal record, in one line (`usage.inputTokens is missing`); undefined when it is one. */
function journalRecordProblem(value: unknown): string | undefined {
  const parsed = RECORD.safeParse(value, { reportInput: true });
  return parsed.success ? undefined : schemaProblem(parsed.error);
}

/** `value` as a journal record, or why it is not one. The value itself is kept (not zod's copy): fields a reader does not know stay as written. */
export function asJournalRecord(value: unknown): { readonly record: JournalRecord } | { readonly problem: string } {
  const problem = journalRecordProblem(value);
  return problem === undefined ? { record: value as JournalRecord } : { problem };
}
