import { text } from '../../engine/history.js';
import { PROTOCOL_TOOL_NAMES } from '../../tools/protocolTools.js';
import type { AssistantBlock, UserBlock } from '../../engine/types.js';
import type { JournalRecord } from '../../engine/log/journalRecord.js';
import type { JournalRow } from '../../store/runStore.js';
import { TraceTracks, type Track } from './traceTracks.js';

const TASK_EXCERPT = 500;
/** The root session's agent id, whose lane the run-level markers are drawn in. */
export const ROOT_ID = 'root';
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
export class JournalConverter extends TraceTracks {
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
        this.onResumed(track, record);
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

  private onResumed(track: Track, record: Of<'resumed'>): void {
    track.steps = track.committed;
    // Taken up before its first turn (its journal holds its session record alone, so it says
    // `readyForUser`): it rests in `starting` again, as the machine does (`beforeFirstTurn`).
    const state = record.state === 'readyForUser' && track.state === 'starting' ? 'starting' : record.state;
    // One session of a spread run taken up by a worker in the state it was shown in (it parked
    // there): a run here would have shown nothing, so nothing is shown.
    if (record.alone && !track.ended && track.state === state) return;
    track.ended = false;
    track.state = '';
    this.enter(track, state);
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
    // With a task it rests in `starting` until its first turn (the user `message` that follows);
    // without one it waits for the user.
    this.enter(track, record.task === undefined ? 'readyForUser' : 'starting');
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
