import { appendAssistantBlocks, appendUserBlocks, text } from '../../engine/history.js';
import { sessionStatechart } from '../statechart/extract.js';
import { PROTOCOL_TOOL_NAMES } from '../../tools/protocolTools.js';
import { TRACE_VERSION, type TraceRecord } from './format.js';
import type { AgentIdentity, AssistantBlock, Message, Usage, UserBlock } from '../../engine/types.js';
import { ZERO_USAGE } from '../../engine/usage.js';
import { renderViewerHtml } from '../viewer/html.js';
import { writeViewerPage, type WrittenViewer } from '../viewer/write.js';
import { RunError } from '../../run/durableRun.js';
import type { JournalRecord } from '../../engine/log/journalRecord.js';
import type { JournalRow, RunStore } from '../../store/runStore.js';

/**
 * A durable run's journal as a turn-flow trace (src/watch/trace/format.ts), so `exarch view` can show a
 * run from its store as it shows a trace recorded live by `TraceRecorder`.
 *
 * The journal holds what the sessions recorded, not their state values: the state timeline is
 * derived from the records, by the transitions of machines/session.ts that write them.
 *
 * - `session`: the agent starts (`agent.start`), in `readyForUser` (a new session leaves the
 *   initial `resuming` in its first macrostep, so observers never see it).
 * - a user `message` of text only: a turn starts (`startTurn`), then `streaming` (request 1).
 * - `usage`: a response was committed (`response`). With tool calls: `dispatchingBatch`. Refused:
 *   `failed`. A record of the same macrostep that follows it names the target when one does:
 *   `nudge` (`nudged`), `outcome` capped / empty (`finishedWithoutReply`) / failed after a
 *   truncation. Otherwise `pause_turn` asks again (`streaming`, one more request) and anything else
 *   ends the turn (`readyForUser`).
 * - a user `message` of tool results while a batch is open: the batch was committed. On its drain
 *   (every result was recorded by a `tool` record first) the next record names the target as
 *   above (`outcome` replied/empty → `replied`, capped, failed after a truncation; `nudge`),
 *   else `streaming`. Results that were never recorded were filled in by a cancellation or a stop
 *   (`closeOpenCalls`): the `outcome` that follows decides.
 * - `nudge`: `nudged`; the tick that follows starts the next request one event-loop turn later,
 *   written at the same time (`streaming`), unless the session ended first.
 * - `outcome`: the final state (`replied`, `finishedWithoutReply`, `capped`, `failed`,
 *   `cancelled`) and `agent.end` (`done`). `empty` is `replied` when it follows a committed batch
 *   (a `reply` whose payload rendered empty) and `finishedWithoutReply` when it follows a response.
 *   An outcome the session recorder wrote for an actor stopped from outside (`session actor
 *   stopped`) or crashed (`session crashed: …`) is no state: `agent.end` `stopped` / `error`.
 * - `stopped`: the actor was stopped at rest: `readyForUser`, `agent.end` `stopped`.
 * - `resumed`: a new process took the session up in the state it names (a resumed `streaming` is
 *   a new request).
 *
 * Records an interrupt cancelled and a later resume undid (as `restoreRun` skips them) become
 * `event` records (`cancel`, `stop`) rather than ends; the run-level markers become `event`
 * records (`interrupt`, `resume`) on the root.
 *
 * Where it differs from a live trace of the same run (test/e2e/watch/journalTrace.test.ts checks the rest):
 * - times: `t` is whole milliseconds of the journal's `ts`, from the first row; a derived state
 *   change is written at the time of the record that implies it (`nudged` → `streaming` at the
 *   nudge's, as the tick comes within the event-loop turn).
 * - a message merged into within one macrostep (tool results, then a reminder) is written once per
 *   append, not once per snapshot; the last record per index is the same.
 * - no `delivery` for a child whose parent was already ending in a final state (a child cancelled
 *   by its replied or capped parent): its result never entered the parent's inbox, so the journal
 *   has no `inbox` record, while the live recorder writes the done event the parent was sent.
 * - events: `user.message` from `queued` records, `retry` (live traces have none), `cancel` and
 *   `model.error` from the outcome's reason (a crash's or model error's text is the
 *   `describeError` line the session recorded, not the raw `Error.message`).
 * - across a resume, one lane per agent: one `agent.start` and at most one end; the resumed state
 *   is written again (a new bar) where the new process took the session up. `resuming` itself is
 *   never written, as it is never observed live. A stream in flight at a crash was never committed,
 *   so it has no `response`.
 * - a cancel that reaches a batch of protocol calls only between its opening and its drain (one
 *   microtask) reads as drained then cancelled in `streaming`; a cancel within a `nudged` state's
 *   tick (same millisecond) is told from one in the `streaming` that follows by the timestamps.
 */
export function traceFromJournal(rows: readonly JournalRow[], title: string): TraceRecord[] {
  const out: TraceRecord[] = [];
  const converter = new JournalTraceStream(title, (record) => out.push(record));
  converter.add(rows);
  converter.end();
  return out;
}

/** `exarch view RUN_ID`: writes the turn-flow viewer for a durable run of `store`. */
export async function writeViewerForRun(store: RunStore, runId: string, outFile: string, title?: string): Promise<WrittenViewer> {
  const run = await store.getRun(runId);
  if (!run) throw new RunError(`no run with id ${runId}`, 'unknown-run', runId);
  const records = traceFromJournal(await store.journal(runId), title ?? `exarch run ${runId}`);
  // The model the run was started with prices its costs in the page.
  const model = run.options['model'];
  const first = records[0];
  if (typeof model === 'string' && first?.kind === 'trace.start') records[0] = { ...first, model };
  const html = renderViewerHtml(records);
  writeViewerPage(outFile, html);
  return { outFile, agents: records.filter((record) => record.kind === 'agent.start').length, records: records.length, leftOut: [] };
}

/** A row not yet converted, with what deciding its meaning needs to know of the rows after it. */
interface Pending {
  readonly row: JournalRow;
  /** The next row of the same session, once it has arrived. */
  next: JournalRow | undefined;
  /** It came after an interrupt marker and before any resume marker that followed it. */
  readonly afterInterrupt: boolean;
  /** Resume markers that had arrived before it. */
  readonly resumesBefore: number;
}

/**
 * `traceFromJournal` for a journal that is still being written: rows are `push`ed as a follower
 * reads them (`exarch run --db` polling the store) and each trace record is handed to `emit` as
 * soon as the rows after it can no longer change it, so a run can be watched live from its store.
 *
 * Some records are told only by what follows them in their session (a response that ended a turn,
 * tool results, a nudge: see above), and a cancellation after an interrupt only by whether a
 * resume comes: such a row waits, and the rows of its session after it, until that arrives or
 * `end`. Other sessions' rows go on meanwhile, so records of different agents may come in another
 * order than in `traceFromJournal` (and their `t`, never decreasing, a little later); each
 * agent's records are the same, in the same order. Memory: one entry per session and the rows
 * waiting, never the journal.
 */
export class JournalTraceStream {
  private pending: Pending[] = [];
  /** The last row of each session that has arrived (to link its successor). */
  private readonly lastOf = new Map<string, Pending>();
  private afterInterrupt = false;
  private resumes = 0;
  private ended = false;
  /** What the rows mean, once they are settled. */
  private readonly converter: JournalConverter;

  constructor(title: string, emit: (record: TraceRecord) => void) {
    this.converter = new JournalConverter(title, emit);
  }

  /** Rows that follow those pushed before (in `seq` order); emits what they settle. */
  push(rows: readonly JournalRow[]): void {
    this.add(rows);
    this.drain();
  }

  /** Rows in `seq` order, taken in without converting any yet (`traceFromJournal` converts them all at `end`). */
  add(rows: readonly JournalRow[]): void {
    for (const row of rows) {
      const pending: Pending = { row, next: undefined, afterInterrupt: this.afterInterrupt, resumesBefore: this.resumes };
      const previous = this.lastOf.get(row.session);
      if (previous) previous.next = row;
      this.lastOf.set(row.session, pending);
      if (row.session === '' && row.record.type === 'interrupt') this.afterInterrupt = true;
      if (row.session === '' && row.record.type === 'resume') {
        this.afterInterrupt = false;
        this.resumes += 1;
      }
      this.pending.push(pending);
    }
  }

  /** No more rows will come: converts those still waiting and ends the trace. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.drain();
    this.converter.end();
  }

  /** Converts, in order, every row nothing to come can change; a row that must wait holds back its session's later rows. */
  private drain(): void {
    const held = new Set<string>();
    const rest: Pending[] = [];
    for (const pending of this.pending) {
      // Run-level markers are written as the root's events: they keep their place among its records.
      const lane = pending.row.session === '' ? ROOT_ID : pending.row.session;
      if (held.has(lane) || !this.settled(pending)) {
        held.add(lane);
        rest.push(pending);
        continue;
      }
      this.convert(pending);
    }
    this.pending = rest;
  }

  /** An interrupt's cancellation is undone only by a resume that follows it. */
  private undone(pending: Pending): boolean {
    return pending.afterInterrupt && this.resumes > pending.resumesBefore && undoneByInterrupt(pending.row.record);
  }

  /** Whether the rows after `pending` can no longer change what it means. */
  private settled(pending: Pending): boolean {
    if (this.ended) return true;
    const { row } = pending;
    if (row.session === '') return true;
    if (pending.afterInterrupt && this.resumes === pending.resumesBefore && undoneByInterrupt(row.record)) return false;
    return pending.next !== undefined || !this.converter.needsNext(row.session, row.record);
  }

  private convert(pending: Pending): void {
    this.converter.convert(pending.row, pending.next, this.undone(pending));
  }
}

function undoneByInterrupt(record: JournalRecord): boolean {
  if (record.type === 'outcome') return record.outcome === 'cancelled';
  if (record.type === 'inbox') return record.result.outcome === 'cancelled';
  return record.type === 'stopped';
}

type Draft = TraceRecord extends infer R ? (R extends TraceRecord ? Omit<R, 't'> : never) : never;

interface OpenBatch {
  /** Tool name by tool_use id, from the response that opened it. */
  readonly calls: ReadonlyMap<string, string>;
  readonly incomplete: ReadonlySet<string>;
  /** Calls whose result a `tool` record holds. */
  readonly noted: Set<string>;
  /** Until a record other than `spawn` / `tool`: the answers `openBatch` recorded. */
  opening: boolean;
}

interface Track {
  agent: AgentIdentity;
  started: boolean;
  ended: boolean;
  state: string;
  /** Model requests in the current turn (each `streaming` entry), and responses committed in it. */
  steps: number;
  committed: number;
  usage: Usage;
  readonly messages: Message[];
  /** The blocks of the response being committed, and its message records not yet written. */
  response: AssistantBlock[];
  deferred: Set<number>;
  batch: OpenBatch | null;
  /** Children by the actor id their deliveries carry. */
  readonly spawns: Map<string, string>;
  /** The session's previous record. */
  prev: JournalRecord | undefined;
}

/**
 * The trace being written: its clock, and a track per session (its agent, state, history and open
 * batch) with the writes that keep the trace in step with it. `JournalConverter` says what each
 * record means.
 */
abstract class TraceTracks {
  private started = false;
  protected readonly tracks = new Map<string, Track>();
  protected t0 = 0;
  protected t = 0;

  constructor(
    private readonly title: string,
    private readonly emit: (record: TraceRecord) => void,
  ) {}

  /** Ends the trace (started at 0 if no row came). */
  end(): void {
    this.start(0);
    this.write({ kind: 'trace.end' });
  }

  protected start(ts: number): void {
    if (this.started) return;
    this.started = true;
    this.t0 = ts;
    this.emit({ t: 0, kind: 'trace.start', version: TRACE_VERSION, startedAt: new Date(ts).toISOString(), title: this.title, statechart: sessionStatechart() });
  }

  protected write(draft: Draft): void {
    this.emit({ t: this.t, ...draft } as TraceRecord);
  }

  protected track(id: string): Track {
    let track = this.tracks.get(id);
    if (!track) {
      const name = id.slice(id.lastIndexOf('/') + 1);
      const path = id.split('/');
      track = {
        agent: { name, path, depth: path.length - 1, id },
        started: false,
        ended: false,
        state: '',
        steps: 0,
        committed: 0,
        usage: ZERO_USAGE,
        messages: [],
        response: [],
        deferred: new Set(),
        batch: null,
        spawns: new Map(),
        prev: undefined,
      };
      this.tracks.set(id, track);
    }
    return track;
  }

  /** Enters `state`; `request`: a `streaming` entry, a new model request. */
  protected enter(track: Track, state: string, request = state === 'streaming'): void {
    if (request) track.steps += 1;
    if (state === track.state && !request) return;
    track.state = state;
    this.write({ kind: 'state', agent: track.agent.id, state, steps: track.steps, usage: track.usage });
  }

  /** Appends to the history as the machine does, and writes the message it added or merged into. */
  protected append(track: Track, role: Message['role'], content: readonly (AssistantBlock | UserBlock)[], defer = false): void {
    const { messages } = track;
    const before = messages.length;
    const last = messages[before - 1];
    if (role === 'assistant') appendAssistantBlocks(messages, content as readonly AssistantBlock[]);
    else appendUserBlocks(messages, content as readonly UserBlock[]);
    if (messages.length === before && messages[before - 1] === last) return;
    const index = messages.length - 1;
    if (defer) track.deferred.add(index);
    else this.writeMessage(track, index);
  }

  protected writeMessage(track: Track, index: number): void {
    const message = track.messages[index];
    if (message) this.write({ kind: 'message', agent: track.agent.id, index, message });
  }

  protected flushDeferred(track: Track): void {
    for (const index of track.deferred) this.writeMessage(track, index);
    track.deferred.clear();
  }

  protected endAgent(track: Track, draft: Extract<Draft, { kind: 'agent.end' }>): void {
    track.ended = true;
    track.batch = null;
    this.write(draft);
  }
}

const TASK_EXCERPT = 500;
/** The root session's agent id, whose lane the run-level markers are drawn in. */
const ROOT_ID = 'root';
const STOPPED_FROM_OUTSIDE = 'session actor stopped';
const CRASHED = 'session crashed: ';
const TRUNCATED_REPEATEDLY = 'output truncated repeatedly';
const REFUSALS: ReadonlySet<string> = new Set(['refusal', 'model_context_window_exceeded']);
/** Answers `planBatch` gives as a batch opens (never run, so a live trace has no `tool.result` for them). */
const ANSWERED_AT_OPEN = /^(unknown tool '|tool '[^']*' is not available to this agent|invalid input for tool ')/;

type Of<T extends JournalRecord['type']> = Extract<JournalRecord, { type: T }>;

/**
 * What each journal record means, written as trace records. `JournalTraceStream` hands it each row
 * once the rows after it can no longer change it.
 */
class JournalConverter extends TraceTracks {
  /** Parent agent id by child agent id, from `spawn` records. */
  private readonly parents = new Map<string, string>();

  /** Records whose meaning the session's next record decides (see `onMessage`, `onUsage`, a nudge). */
  needsNext(session: string, record: JournalRecord): boolean {
    if (record.type === 'nudge') return true;
    if (record.type === 'message') return record.role === 'user' && record.content.some((block) => block.type === 'tool_result');
    if (record.type === 'usage') return !(this.tracks.get(session)?.response.some((block) => block.type === 'tool_use') ?? false);
    return false;
  }

  /** Writes what `row` means; `next`: the next row of its session, if any; `undone`: a resume undid it. */
  convert(row: JournalRow, next: JournalRow | undefined, undone: boolean): void {
    this.start(row.ts);
    this.t = Math.max(this.t, row.ts - this.t0);
    if (row.session === '') this.onMarker(row.record);
    else this.onRecord(row, next, undone);
  }

  private onMarker(record: JournalRecord): void {
    if (record.type === 'interrupt' || record.type === 'resume') this.write({ kind: 'event', agent: ROOT_ID, type: record.type });
  }

  private onRecord(row: JournalRow, nextRow: JournalRow | undefined, undone: boolean): void {
    const { session, record } = row;
    const track = this.track(session);
    const next = nextRow?.record;
    if (record.type !== 'usage') this.flushDeferred(track);
    if (record.type !== 'spawn' && record.type !== 'tool' && track.batch) track.batch.opening = false;
    if (undone) {
      this.onUndone(track, record);
      return;
    }
    if (track.ended && record.type !== 'resumed' && record.type !== 'session') return;
    switch (record.type) {
      case 'session':
        this.onSession(track, record);
        break;
      case 'message':
        this.onMessage(track, record, next);
        break;
      case 'usage':
        this.onUsage(track, record, next);
        break;
      case 'tool':
        this.onTool(track, record);
        break;
      case 'nudge':
        this.append(track, 'user', [text(record.text)]);
        this.enter(track, 'nudged');
        // The tick starts the next request one event-loop turn later, unless the session ends first.
        if (next !== undefined && next.type !== 'resumed' && !(next.type === 'outcome' && sameTick(row.ts, nextRow?.ts))) {
          this.enter(track, 'streaming');
        }
        break;
      case 'spawn':
        track.spawns.set(record.actorId, record.id);
        this.parents.set(record.id, session);
        break;
      case 'inbox':
        this.onInbox(track, record);
        break;
      case 'waiting':
        this.enter(track, 'waitingForAgents');
        break;
      case 'awaiting':
        this.enter(track, 'awaitingApproval');
        break;
      case 'approval':
        this.write({
          kind: 'event',
          agent: session,
          type: 'approval.answer',
          detail: `${record.decision} ${record.tool} (${record.callId})${record.reason ? `: ${record.reason}` : ''}`,
        });
        break;
      case 'dispatching':
        this.enter(track, 'dispatchingBatch');
        break;
      case 'queued':
        this.write({ kind: 'event', agent: session, type: 'user.message', detail: `${record.text.length} characters` });
        break;
      case 'retry':
        this.write({ kind: 'event', agent: session, type: 'retry', detail: `attempt ${record.attempt} in ${record.delayMs} ms: ${record.reason}` });
        break;
      case 'resumed':
        track.steps = track.committed;
        // One session of a spread run taken up by a worker in the state it was shown in (it parked
        // there): a run here would have shown nothing, so nothing is shown.
        if (record.alone && !track.ended && track.state === record.state) break;
        track.ended = false;
        track.state = '';
        this.enter(track, record.state);
        break;
      case 'stopped':
        this.enter(track, 'readyForUser');
        this.endAgent(track, { kind: 'agent.end', agent: session, status: 'stopped' });
        break;
      case 'outcome':
        this.onOutcome(track, record);
        break;
      case 'interrupt':
      case 'resume':
        break;
    }
    track.prev = record;
  }

  private onUndone(track: Track, record: JournalRecord): void {
    const agent = track.agent.id;
    if (record.type === 'outcome') this.write({ kind: 'event', agent, type: 'cancel', detail: `${record.reason ?? 'cancelled'} (undone by the resume)` });
    else if (record.type === 'stopped') this.write({ kind: 'event', agent, type: 'stop', detail: 'stopped by the interrupt (undone by the resume)' });
    // A cancelled child's delivery is undone too: the resumed child delivers again.
  }

  private onSession(track: Track, record: Of<'session'>): void {
    track.agent = record.agent;
    track.ended = false;
    if (!track.started) {
      track.started = true;
      const { agent } = record;
      const parent = this.parents.get(agent.id) ?? (agent.depth === 0 ? null : agent.id.slice(0, agent.id.lastIndexOf('/')));
      const task = record.task ?? '';
      this.write({
        kind: 'agent.start',
        agent: agent.id,
        name: agent.name,
        depth: agent.depth,
        parent,
        task: task.slice(0, TASK_EXCERPT),
        taskChars: task.length,
      });
    }
    this.enter(track, 'readyForUser');
  }

  private onMessage(track: Track, record: Of<'message'>, next: JournalRecord | undefined): void {
    if (record.role === 'assistant') {
      // Written after the `response` its usage record makes, as a live trace orders them.
      const blocks = record.content as readonly AssistantBlock[];
      track.response.push(...blocks);
      this.append(track, 'assistant', blocks, true);
      return;
    }
    const content = record.content as readonly UserBlock[];
    this.append(track, 'user', content);
    const results = content.flatMap((block) => (block.type === 'tool_result' ? [block.tool_use_id] : []));
    if (results.length === 0) {
      // A turn starts: the inbox and queued messages were delivered, the turn's counts restart.
      track.steps = 0;
      track.committed = 0;
      track.batch = null;
      this.enter(track, 'streaming');
      return;
    }
    const batch = track.batch;
    track.batch = null;
    // Tool results with no open batch answer the calls a failure or a cancellation left open: no state of their own.
    if (!batch || isFinal(track.state)) return;
    // Results never recorded were filled in as the batch was abandoned: the outcome that follows
    // decides. A `wait_for_agents` call is answered as its batch drains (not an error, then).
    const drained = (block: UserBlock): boolean =>
      block.type === 'tool_result' &&
      (batch.noted.has(block.tool_use_id) || (batch.calls.get(block.tool_use_id) === 'wait_for_agents' && block.is_error !== true));
    if (content.some((block) => block.type === 'tool_result' && !drained(block))) return;
    if (next?.type === 'nudge') return;
    if (
      next?.type === 'outcome' &&
      (next.outcome === 'replied' ||
        next.outcome === 'empty' ||
        next.outcome === 'capped' ||
        (next.outcome === 'failed' && next.reason === TRUNCATED_REPEATEDLY))
    )
      return;
    this.enter(track, 'streaming');
  }

  private onUsage(track: Track, record: Of<'usage'>, next: JournalRecord | undefined): void {
    const blocks = track.response;
    track.response = [];
    const incomplete = new Set(record.incomplete ?? []);
    const calls = blocks.flatMap((block) => (block.type === 'tool_use' ? [block] : []));
    this.write({
      kind: 'response',
      agent: track.agent.id,
      stopReason: record.stopReason,
      textChars: blocks.reduce((n, block) => n + (block.type === 'text' ? block.text.length : 0), 0),
      toolCalls: calls.map((call) => ({ id: call.id, name: call.name, complete: !incomplete.has(call.id) })),
      usage: record.request,
    });
    this.flushDeferred(track);
    track.usage = record.session;
    track.committed += 1;
    if (REFUSALS.has(record.stopReason)) {
      this.enter(track, 'failed');
      return;
    }
    if (calls.length > 0) {
      track.batch = { calls: new Map(calls.map((call) => [call.id, call.name])), incomplete, noted: new Set(), opening: true };
      this.enter(track, 'dispatchingBatch');
      return;
    }
    if (next?.type === 'nudge') return;
    if (next?.type === 'outcome') {
      if (next.outcome === 'capped' || next.outcome === 'empty') return;
      if (next.outcome === 'failed' && record.stopReason === 'max_tokens' && !next.reason?.startsWith(CRASHED)) return;
    }
    this.enter(track, record.stopReason === 'pause_turn' ? 'streaming' : 'readyForUser');
  }

  private onTool(track: Track, record: Of<'tool'>): void {
    const { result } = record;
    const batch = track.batch;
    batch?.noted.add(result.tool_use_id);
    const name = batch?.calls.get(result.tool_use_id);
    // Calls the machine answered itself (protocol calls, cut-off or refused calls) never ran.
    const answered =
      batch !== null &&
      ((name !== undefined && PROTOCOL_TOOL_NAMES.has(name)) ||
        batch.incomplete.has(result.tool_use_id) ||
        (batch.opening && result.is_error === true && ANSWERED_AT_OPEN.test(result.content)));
    if (answered) return;
    this.write({ kind: 'tool.result', agent: track.agent.id, toolUseId: result.tool_use_id, isError: result.is_error === true, chars: result.content.length });
  }

  private onInbox(track: Track, record: Of<'inbox'>): void {
    const { result } = record;
    const child = track.spawns.get(record.actorId) ?? `${track.agent.id}/?`;
    this.write({
      kind: 'delivery',
      parent: track.agent.id,
      child,
      name: result.name,
      outcome: result.outcome,
      text: result.text,
      ...(result.reason === undefined ? {} : { reason: result.reason }),
    });
  }

  private onOutcome(track: Track, record: Of<'outcome'>): void {
    const agent = track.agent.id;
    if (record.outcome === 'cancelled' && record.reason === STOPPED_FROM_OUTSIDE) {
      this.endAgent(track, { kind: 'agent.end', agent, status: 'stopped' });
      return;
    }
    if (record.outcome === 'failed' && record.reason?.startsWith(CRASHED)) {
      this.endAgent(track, { kind: 'agent.end', agent, status: 'error', reason: record.reason.slice(CRASHED.length) });
      return;
    }
    if (record.outcome === 'cancelled') this.write({ kind: 'event', agent, type: 'cancel', ...(record.reason === undefined ? {} : { detail: record.reason }) });
    else if (record.outcome === 'failed' && track.state === 'streaming') this.write({ kind: 'event', agent, type: 'model.error', detail: record.reason ?? '' });
    this.enter(track, finalState(record, track.prev));
    this.endAgent(track, {
      kind: 'agent.end',
      agent,
      status: 'done',
      outcome: record.outcome,
      ...(record.reason === undefined ? {} : { reason: record.reason }),
    });
  }
}

function sameTick(a: number | undefined, b: number | undefined): boolean {
  return a !== undefined && b !== undefined && b - a < 1;
}

const FINAL_STATES: ReadonlySet<string> = new Set(['replied', 'finishedWithoutReply', 'capped', 'failed', 'cancelled']);

function isFinal(state: string): boolean {
  return FINAL_STATES.has(state);
}

/**
 * The final state an outcome was settled in. `empty` is settled by `finishedWithoutReply` (a quiet
 * sub-agent's turn ended without a reply: right after its response) and by `replied` when the
 * reply's payload rendered empty (right after the batch that held it was committed).
 */
function finalState(record: Of<'outcome'>, prev: JournalRecord | undefined): string {
  switch (record.outcome) {
    case 'replied':
      return 'replied';
    case 'empty':
      return prev?.type === 'message' && prev.role === 'user' && prev.content.some((block) => block.type === 'tool_result')
        ? 'replied'
        : 'finishedWithoutReply';
    default:
      return record.outcome;
  }
}
