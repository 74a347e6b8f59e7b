import { appendAssistantBlocks, appendUserBlocks, text } from '../engine/history.js';
import type { LatchCount } from '../engine/nudges.js';
import { addUsage, ZERO_USAGE } from '../engine/usage.js';
import { childIdentity } from '../engine/identity.js';
import type { AgentIdentity, AgentResult, AssistantBlock, Message, ToolResultBlock, Usage, UserBlock } from '../engine/types.js';
import { denialMessage } from '../engine/approvals.js';
import { renderInbox } from '../engine/inbox.js';
import type { AgentBudget } from '../engine/budget.js';
import { errorResult } from '../tools/toolbox.js';
import type { JournalRecord } from '../engine/log/journalRecord.js';
import type { RestoredBatch, RestoredChild, RestoredSession, ResumeState } from './restoredSession.js';
import type { JournalRow } from './runStore.js';
import { RunError } from './runError.js';

/** How the root of a run stands in its journal. */
export type RestoredRun =
  /** Work is left: resume the root (and, through it, every unfinished session of the tree). */
  | { readonly kind: 'resumable'; readonly root: RestoredSession }
  /** The root ended in a final state. */
  | { readonly kind: 'ended'; readonly result: AgentResult; readonly messages: readonly Message[] }
  /** The root is at rest with nothing left to do: the run is finished. */
  | { readonly kind: 'settled'; readonly messages: readonly Message[] }
  /** Nothing of the root was recorded. */
  | { readonly kind: 'empty' };

/** One session's journal, replayed. */
interface Replayed {
  /** The run's id, to name it when its journal does not make sense. */
  readonly runId: string;
  agent: AgentIdentity | undefined;
  state: ResumeState;
  messages: Message[];
  pendingUser: string[];
  inbox: AgentResult[];
  steps: number;
  latchCounts: Record<string, LatchCount>;
  requests: number;
  usage: Usage;
  childUsage: Usage;
  spawned: number;
  uses: Map<string, number>;
  /** Spawned and not yet delivered, by actor id, in spawn order. */
  live: Map<string, { agent: AgentIdentity; task: string; profile: string | undefined; budget: AgentBudget | undefined }>;
  batch: {
    content: readonly AssistantBlock[];
    stopReason: RestoredBatch['stopReason'];
    incomplete: readonly string[];
    results: Map<string, ToolResultBlock>;
    awaiting: Set<string>;
    approved: Set<string>;
  } | null;
  outcome: Extract<JournalRecord, { type: 'outcome' }> | null;
}

/**
 * Rebuilds a run from its journal: for the root and, below it, every session still running, the
 * state a resume starts from. Pure: it reads rows and writes nothing.
 *
 * Undone on the way: what an interrupt (Ctrl-C) cancelled. The records between an `interrupt`
 * marker and the next `resume` marker that cancel a session (its `cancelled` outcome, a parent's
 * delivery of it, a log closed at rest) are skipped, so the run picks up where it was interrupted;
 * the calls the interrupt answered `cancelled` keep that answer, in a batch taken up open.
 */
export function restoreRun(rows: readonly JournalRow[]): RestoredRun {
  const bySession = new Map<string, JournalRecord[]>();
  const approvedTools = new Set<string>();
  let interrupted = false;
  for (const { session, record } of rows) {
    if (record.type === 'approval' && record.decision === 'always') approvedTools.add(record.tool);
    if (session === '') {
      if (record.type === 'interrupt') interrupted = true;
      else if (record.type === 'resume') interrupted = false;
      continue;
    }
    if (interrupted && undoneByInterrupt(record)) continue;
    let records = bySession.get(session);
    if (!records) bySession.set(session, (records = []));
    // The interrupt closed the session's open batch with `cancelled` for the calls still running.
    // Those answers stand, but the batch is taken up open, so the resumed session drains it and
    // decides as a drain does (a staged reply, the step cap, a truncation reminder).
    if (interrupted && isBatchCommit(record)) for (const result of record.content) records.push({ type: 'tool', result: result as ToolResultBlock });
    else records.push(record);
  }
  const rootRecords = bySession.get('root');
  if (!rootRecords) return { kind: 'empty' };
  const root = replay(rootRecords, rows[0]?.runId ?? '');
  if (root.outcome) return { kind: 'ended', result: resultOf(root, root.outcome), messages: root.messages };
  const restored = restoreSession(root, bySession);
  const atRest =
    restored.state === 'readyForUser' &&
    restored.children.length === 0 &&
    restored.inbox.length === 0 &&
    restored.undelivered.length === 0 &&
    restored.pendingUser.length === 0;
  return atRest ? { kind: 'settled', messages: restored.messages } : { kind: 'resumable', root: { ...restored, approvedTools: [...approvedTools] } };
}

/** How one session of a run spread over workers stands in its journal (see `restoreAlone`). */
export type RestoredAlone =
  | { readonly kind: 'resumable'; readonly session: RestoredSession }
  /** It ended: its result (delivered to its parent, or to be). */
  | { readonly kind: 'ended'; readonly result: AgentResult; readonly messages: readonly Message[] }
  /** Nothing of it was recorded: it starts afresh. */
  | { readonly kind: 'empty' };

/**
 * Rebuilds one session of a run whose sessions run as jobs of their own (src/workers/): from its
 * own records, and for each child it started either the child's `outcome` record (the child
 * ended: its result is delivered on resume, unless the session's journal already took it) or
 * nothing (the child runs elsewhere and is started again, or found again, from here). The rows of
 * a session that keeps its subtree (one given a budget) hold the whole subtree, restored as a
 * resume restores a tree. Pure, as `restoreRun`.
 */
export function restoreAlone(rows: readonly JournalRow[], agentId: string): RestoredAlone {
  const bySession = new Map<string, JournalRecord[]>();
  for (const { session, record } of rows) {
    if (session === '') continue;
    let records = bySession.get(session);
    if (!records) bySession.set(session, (records = []));
    records.push(record);
  }
  const own = bySession.get(agentId);
  if (!own) return { kind: 'empty' };
  const session = replay(own, rows[0]?.runId ?? '');
  if (session.outcome) return { kind: 'ended', result: resultOf(session, session.outcome), messages: session.messages };
  const restored = restoreSession(session, bySession);
  // Results not yet taken are delivered in the order the children ended (their outcomes' order), as a live session takes them.
  const agentOf = new Map<string, string>();
  for (const record of own) if (record.type === 'spawn') agentOf.set(record.actorId, record.id);
  const endedAt = new Map<string, number>();
  for (const [at, { session: id, record }] of rows.entries()) if (record.type === 'outcome') endedAt.set(id, at);
  const order = (actorId: string): number => endedAt.get(agentOf.get(actorId) ?? '') ?? Number.MAX_SAFE_INTEGER;
  const undelivered = [...restored.undelivered].sort((a, b) => order(a.actorId) - order(b.actorId));
  return { kind: 'resumable', session: { ...restored, undelivered, alone: true } };
}

/** A journal no exarch writes: its records are each readable, and do not make a run. */
function inconsistent(runId: string, what: string): RunError {
  return new RunError(`run ${runId} cannot be taken up: its journal does not make sense (${what})`, 'inconsistent', runId);
}

/** The agent ids of the children a session started and whose results its journal has not taken yet. */
export function liveChildrenOf(records: readonly JournalRecord[]): string[] {
  const live = new Map<string, string>();
  for (const record of records) {
    if (record.type === 'spawn') live.set(record.actorId, record.id);
    else if (record.type === 'inbox') live.delete(record.actorId);
  }
  return [...live.values()];
}

function isWaitCall(content: readonly AssistantBlock[] | undefined, id: string): boolean {
  return content?.some((block) => block.type === 'tool_use' && block.id === id && block.name === 'wait_for_agents') === true;
}

function isBatchCommit(record: JournalRecord): record is Extract<JournalRecord, { type: 'message' }> {
  return record.type === 'message' && record.role === 'user' && record.content.length > 0 && record.content.every((block) => block.type === 'tool_result');
}

function undoneByInterrupt(record: JournalRecord): boolean {
  if (record.type === 'outcome') return record.outcome === 'cancelled';
  if (record.type === 'inbox') return record.result.outcome === 'cancelled';
  return record.type === 'stopped';
}

function restoreSession(session: Replayed, bySession: ReadonlyMap<string, readonly JournalRecord[]>): RestoredSession {
  const children: RestoredChild[] = [];
  const undelivered: { actorId: string; result: AgentResult }[] = [];
  for (const [actorId, { agent, task, profile, budget }] of session.live) {
    const typed = { ...(profile === undefined ? {} : { profile }), ...(budget === undefined ? {} : { budget }) };
    const records = bySession.get(agent.id);
    if (!records) {
      children.push({ actorId, agent, task, ...typed, restore: undefined });
      continue;
    }
    const child = replay(records, session.runId, agent);
    if (child.outcome) undelivered.push({ actorId, result: resultOf(child, child.outcome) });
    else children.push({ actorId, agent, task, ...typed, restore: restoreSession(child, bySession) });
  }
  const agent = session.agent;
  if (!agent) throw inconsistent(session.runId, 'a session has records but no session record');
  const batch = session.batch;
  return {
    agent,
    state: session.state,
    messages: session.messages,
    pendingUser: session.pendingUser,
    inbox: session.inbox,
    steps: session.steps,
    latchCounts: session.latchCounts,
    requests: session.requests,
    usage: session.usage,
    childUsage: session.childUsage,
    spawned: session.spawned,
    uses: [...session.uses],
    children,
    undelivered,
    batch: batch && {
      content: batch.content,
      stopReason: batch.stopReason,
      incomplete: batch.incomplete,
      results: [...batch.results.values()],
      awaiting: [...batch.awaiting],
      approved: [...batch.approved],
    },
  };
}

/**
 * A committed batch may carry, after its results, the inbox its `wait_for_agents` waited for
 * (rendered as one text) and then the messages sent to the sub-agent meanwhile (one text each):
 * the machine delivered those there, so they are no longer waiting.
 */
function deliveredWithBatch(session: Replayed, content: readonly UserBlock[]): void {
  const texts = content.flatMap((block) => (block.type === 'text' ? [block.text] : []));
  if (texts.length === 0) return;
  if (session.inbox.length > 0 && texts[0] === renderInbox(session.inbox)) {
    session.inbox = [];
    texts.shift();
  }
  if (texts.length > 0) session.pendingUser = [];
}

function resultOf(session: Replayed, outcome: Extract<JournalRecord, { type: 'outcome' }>): AgentResult {
  return {
    name: session.agent?.name ?? 'unknown',
    outcome: outcome.outcome,
    text: outcome.text,
    ...(outcome.reason === undefined ? {} : { reason: outcome.reason }),
    ...('value' in outcome ? { value: outcome.value } : {}),
    usage: outcome.totalUsage,
  };
}

/**
 * Replays one session's records through the same history helpers the machine uses. Which state
 * the session was in follows from its last records, as the machine's transitions wrote them:
 * a turn's first message or a committed batch is followed by a request (`streaming`); a committed
 * response with tool calls opens a batch; one without, paused, asks again; otherwise the turn
 * ended (`readyForUser`) unless a nudge followed (`nudged`).
 */
function replay(records: readonly JournalRecord[], runId: string, agent?: AgentIdentity): Replayed {
  const session: Replayed = {
    runId,
    agent,
    state: 'readyForUser',
    messages: [],
    pendingUser: [],
    inbox: [],
    steps: 0,
    latchCounts: {},
    requests: 0,
    usage: ZERO_USAGE,
    childUsage: ZERO_USAGE,
    spawned: 0,
    uses: new Map(),
    live: new Map(),
    batch: null,
    outcome: null,
  };
  // The content of the response being committed: its message record comes before its usage record,
  // and joins the history only with it. A journal cut between the two (a store that does not write
  // a burst at once) holds a response that was never committed: the request is asked again.
  let response: readonly AssistantBlock[] = [];
  for (const record of records) {
    switch (record.type) {
      case 'session':
        session.agent = record.agent;
        if (record.task !== undefined) session.pendingUser.push(record.task);
        break;
      case 'queued':
        session.pendingUser.push(record.text);
        break;
      case 'message':
        if (record.role === 'assistant') {
          response = record.content as readonly AssistantBlock[];
          break;
        }
        appendUserBlocks(session.messages, record.content as readonly UserBlock[]);
        // A batch whose wait_for_agents drained delivers the inbox after its results, in the same
        // message (commitBatchTo): those reports were delivered.
        if (record.content.some((block) => block.type === 'tool_result') && record.content.some((block) => block.type === 'text')) session.inbox = [];
        if (!record.content.some((block) => block.type === 'tool_result')) {
          // A turn starts: the inbox and queued messages were delivered, the turn's counts restart.
          session.inbox = [];
          session.pendingUser = [];
          session.steps = 0;
          for (const [id, count] of Object.entries(session.latchCounts)) session.latchCounts[id] = { turn: 0, total: count.total };
        } else {
          deliveredWithBatch(session, record.content as readonly UserBlock[]);
        }
        session.batch = null;
        session.state = 'streaming';
        break;
      case 'usage': {
        appendAssistantBlocks(session.messages, response);
        session.usage = record.session;
        session.requests += record.requests ?? 1;
        session.steps += 1;
        const calls = response.some((block) => block.type === 'tool_use');
        if (calls) {
          session.batch = {
            content: response,
            stopReason: record.stopReason,
            incomplete: record.incomplete ?? [],
            results: new Map(),
            awaiting: new Set(),
            approved: new Set(),
          };
          session.state = 'dispatchingBatch';
        } else {
          session.state = record.stopReason === 'pause_turn' ? 'streaming' : 'readyForUser';
        }
        response = [];
        break;
      }
      case 'lost':
        // Requests served and not kept: counted, nothing of them in the history.
        session.usage = addUsage(session.usage, record.usage);
        session.requests += record.requests;
        break;
      case 'tool':
        // A call waiting for a person has no result until one answers: what the interrupt that
        // stopped the run to wait answered it with (`cancelled`) is undone.
        // An approved call that had not started yet (the batch still waited on others) did not run either.
        if (session.batch?.awaiting.has(record.result.tool_use_id) || session.batch?.approved.has(record.result.tool_use_id)) break;
        // Likewise a wait for sub-agents: live, it is answered in the message that commits its batch
        // (one answered at open, with nothing to wait for, was noted before the batch could wait).
        if ((session.state === 'waitingForAgents' || session.state === 'awaitingApproval') && isWaitCall(session.batch?.content, record.result.tool_use_id))
          break;
        session.batch?.results.set(record.result.tool_use_id, record.result);
        break;
      case 'awaiting':
        if (!session.batch) break;
        for (const id of record.calls) session.batch.awaiting.add(id);
        session.state = 'awaitingApproval';
        break;
      case 'approval': {
        const batch = session.batch;
        if (!batch?.awaiting.delete(record.callId)) break;
        if (record.decision === 'deny') batch.results.set(record.callId, errorResult(record.callId, denialMessage(record.tool, record.reason)));
        else batch.approved.add(record.callId);
        break;
      }
      case 'dispatching':
        // From here an approved call without a result was running, or about to: as any running call.
        session.batch?.awaiting.clear();
        session.batch?.approved.clear();
        session.state = 'dispatchingBatch';
        break;
      case 'waiting':
        session.state = 'waitingForAgents';
        break;
      case 'nudge': {
        const count = session.latchCounts[record.latch] ?? { turn: 0, total: 0 };
        session.latchCounts[record.latch] = { turn: count.turn + 1, total: count.total + 1 };
        appendUserBlocks(session.messages, [text(record.text)]);
        session.state = 'nudged';
        break;
      }
      case 'spawn': {
        session.spawned += 1;
        session.uses.set(record.name, (session.uses.get(record.name) ?? 0) + 1);
        const parent = session.agent;
        if (!parent) throw inconsistent(session.runId, `session ${record.id.slice(0, record.id.lastIndexOf('/')) || 'root'} spawns before its session record`);
        session.live.set(record.actorId, {
          agent: { ...childIdentity(parent, record.name), id: record.id },
          task: record.task,
          profile: record.profile,
          budget: record.budget,
        });
        break;
      }
      case 'inbox':
        session.inbox.push(record.result);
        session.childUsage = addUsage(session.childUsage, record.result.usage);
        session.live.delete(record.actorId);
        break;
      case 'outcome':
        session.outcome = record;
        break;
      case 'stopped':
      case 'resumed':
      case 'retry':
      case 'interrupt':
      case 'resume':
        break;
    }
  }
  return session;
}
