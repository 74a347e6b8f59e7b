import { z } from 'zod';
import { ExarchError } from '../../engine/exarchError.js';
import { jsonLines } from '../../engine/jsonLines.js';
import { AGENT_OUTCOME, COUNT, MESSAGE, USAGE } from '../../engine/messageSchema.js';
import { schemaProblem } from '../../engine/schemaProblem.js';
import { TRACE_VERSION, type TraceRecord } from './format.js';

/**
 * Reading a trace file back (`exarch view TRACE`): each line checked for what the viewer reads of
 * it, in Node, before the page is written. A trace is a file anyone may have edited or cut short,
 * and the page builds its model from the records in the browser, where a record without its agent
 * or usage stopped the whole page without a word. A record that is not one is left out, and said;
 * the rest is shown. A first line that is not a trace's start is no trace.
 */

const TIME = z.number();
const STATECHART = z.looseObject({
  initial: z.string(),
  states: z.array(z.looseObject({ id: z.string(), final: z.boolean() })),
  transitions: z.array(
    z.looseObject({ source: z.string(), target: z.string(), event: z.string(), guard: z.string().optional(), actions: z.array(z.string()) }),
  ),
});

const START = z.looseObject({
  t: TIME,
  kind: z.literal('trace.start'),
  startedAt: z.string(),
  title: z.string(),
  statechart: STATECHART,
  model: z.string().optional(),
});

const RECORD = z.discriminatedUnion('kind', [
  START,
  z.looseObject({
    t: TIME,
    kind: z.literal('agent.start'),
    agent: z.string(),
    name: z.string(),
    depth: COUNT,
    parent: z.string().nullable(),
    task: z.string(),
    taskChars: COUNT,
    model: z.string().optional(),
  }),
  z.looseObject({ t: TIME, kind: z.literal('state'), agent: z.string(), state: z.string(), steps: COUNT, requests: COUNT.optional(), usage: USAGE }),
  z.looseObject({ t: TIME, kind: z.literal('message'), agent: z.string(), index: COUNT, message: MESSAGE }),
  z.looseObject({
    t: TIME,
    kind: z.literal('response'),
    agent: z.string(),
    stopReason: z.string(),
    textChars: COUNT,
    toolCalls: z.array(z.looseObject({ id: z.string(), name: z.string(), complete: z.boolean() })),
    usage: USAGE,
  }),
  z.looseObject({ t: TIME, kind: z.literal('tool.result'), agent: z.string(), toolUseId: z.string(), isError: z.boolean(), chars: COUNT }),
  z.looseObject({
    t: TIME,
    kind: z.literal('delivery'),
    parent: z.string(),
    child: z.string(),
    name: z.string(),
    outcome: AGENT_OUTCOME,
    text: z.string(),
    reason: z.string().optional(),
  }),
  z.looseObject({ t: TIME, kind: z.literal('event'), agent: z.string(), type: z.string(), detail: z.string().optional() }),
  z.looseObject({
    t: TIME,
    kind: z.literal('agent.end'),
    agent: z.string(),
    status: z.enum(['done', 'stopped', 'error']),
    outcome: AGENT_OUTCOME.optional(),
    reason: z.string().optional(),
  }),
  z.looseObject({ t: TIME, kind: z.literal('trace.end') }),
]);

/** Kinds this exarch's viewer draws; a record of another kind (a later exarch's) is kept, and the viewer passes it by. */
const KNOWN_KINDS: ReadonlySet<string> = new Set(RECORD.options.map((option) => option.shape.kind.value));

/** A line left out of a trace: its number (from 1) and what is wrong with it. */
export interface LeftOutLine {
  readonly line: number;
  readonly problem: string;
}

/** Why a file is no trace: one line, without the file's name (the caller adds it). */
class NotATraceError extends ExarchError<'not-a-trace'> {
  constructor(message: string) {
    super('not-a-trace', message);
  }
}

/**
 * The trace's records, and the lines left out. Throws `NotATraceError` (one line) when the first
 * record is not a trace's start of this version.
 */
export function readTrace(text: string): { readonly records: TraceRecord[]; readonly leftOut: readonly LeftOutLine[] } {
  const records: TraceRecord[] = [];
  const leftOut: LeftOutLine[] = [];
  for (const entry of jsonLines(text)) {
    if (!entry.json) {
      if (records.length === 0) throw new NotATraceError(`trace line ${entry.line} is not JSON`);
      leftOut.push({ line: entry.line, problem: 'it is not JSON' });
      continue;
    }
    if (records.length === 0) {
      records.push(traceStart(entry.value, entry.line));
      continue;
    }
    const problem = recordProblem(entry.value);
    if (problem === undefined) records.push(entry.value as TraceRecord);
    else leftOut.push({ line: entry.line, problem });
  }
  if (records.length === 0) throw new NotATraceError('not an exarch trace: it holds no records');
  return { records, leftOut };
}

/** The first record, if it starts a trace of this version. */
function traceStart(value: unknown, line: number): TraceRecord {
  const kind = typeof value === 'object' && value !== null ? (value as { kind?: unknown }).kind : undefined;
  if (typeof kind !== 'string') throw new NotATraceError(`trace line ${line} is not a trace record (no "kind")`);
  if (kind !== 'trace.start') throw new NotATraceError('not an exarch trace: the first record is not trace.start');
  const version = (value as { version?: unknown }).version;
  if (version !== TRACE_VERSION)
    throw new NotATraceError(
      `trace version ${typeof version === 'number' ? version : JSON.stringify(version ?? null).slice(0, 40)} is not supported (this exarch reads version ${TRACE_VERSION})`,
    );
  const parsed = START.safeParse(value, { reportInput: true });
  if (!parsed.success) throw new NotATraceError(`not an exarch trace: its trace.start record is not one (${schemaProblem(parsed.error)})`);
  return value as TraceRecord;
}

function recordProblem(value: unknown): string | undefined {
  const kind = typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as { kind?: unknown }).kind : undefined;
  if (typeof kind !== 'string') return 'it is not a trace record (no "kind")';
  if (!KNOWN_KINDS.has(kind)) return typeof (value as { t?: unknown }).t === 'number' ? undefined : 'its time t is not a number';
  const parsed = RECORD.safeParse(value, { reportInput: true });
  return parsed.success ? undefined : schemaProblem(parsed.error);
}

/** The trace's records, every line of it one: a line that is not throws `NotATraceError` naming it (`readTrace` leaves such lines out instead). */
export function parseTrace(text: string): TraceRecord[] {
  const { records, leftOut } = readTrace(text);
  const [first] = leftOut;
  if (first) throw new NotATraceError(`trace line ${first.line}: ${first.problem}`);
  return records;
}
