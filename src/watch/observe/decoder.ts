import type { ActorRefLike, InspectionEvent } from 'xstate';
import type { ApprovalDecision } from '../../engine/approvals.js';
import type { BudgetCrossing } from '../../engine/budget.js';
import type { BudgetMeter } from '../../engine/budgetMeter.js';
import type { SessionSnapshot } from '../../run/runtime.js';
import type { RequestSpend } from '../../engine/model/streamModel.js';
import type { AgentIdentity, AgentResult, Message, ModelResponse, ToolResultBlock, Usage } from '../../engine/types.js';
import { addUsage, ZERO_USAGE } from '../../engine/usage.js';
import type { RunEventListener } from './events.js';

/**
 * The one place that reads XState's inspection events and decides what they mean for a run:
 * which snapshots are sessions, which agent an event reached, which child a `done` event came
 * from, when a model request began. Everything else sees `RunEvent`s (src/watch/observe/events.ts), so
 * XState's changes to inspection touch this folder only.
 */

/** A session snapshot, as far as decoding reads it (a test may hand a partial one: `messages` may be absent). */
type SessionView = SessionSnapshot;

/** Whether a snapshot is a session's: its context carries the agent's identity. */
export function sessionOf(snapshot: unknown): SessionView | undefined {
  const context = (snapshot as { context?: { agent?: { id?: unknown } } } | undefined)?.context;
  return typeof context?.agent?.id === 'string' ? (snapshot as SessionView) : undefined;
}

/** The parent's agent id: a child's id is its parent's id, a slash, and its name (null for a root). */
export function parentIdOf(agent: AgentIdentity): string | null {
  return agent.depth === 0 ? null : agent.id.slice(0, agent.id.lastIndexOf('/'));
}

/** XState's event for a child actor that finished (`done`) or crashed (`error`). */
const CHILD_ENDED = /^xstate\.(done|error)\.actor\./;

interface Track {
  readonly agent: AgentIdentity;
  readonly path: readonly string[];
  state: string;
  steps: number;
  requests: number;
  /** The session's count of requests served, and their tokens, as far as events have accounted for them (see `model.lost`). */
  served: number;
  servedUsage: Usage;
  /** Messages sent so far, and the last one (an append may merge into it in place). */
  messages: number;
  last: Message | undefined;
  snapshot: SessionView | undefined;
  ended: boolean;
  /** Deltas that came before the snapshot showing their request (a provider may stream at once, within the step that starts it). */
  early: string[] | undefined;
  /** Calls of its batch announced as waiting for a person (while it is in `awaitingApproval`). */
  asked: Set<string> | undefined;
}

function firstUserText(messages: readonly Message[]): string {
  const first = messages.find((m) => m.role === 'user');
  return first?.content.map((b) => (b.type === 'text' ? b.text : '')).join('') ?? '';
}

/** `a − b`, kind by kind, never below zero. */
function subtractUsage(a: Usage, b: Usage): Usage {
  return {
    inputTokens: Math.max(0, a.inputTokens - b.inputTokens),
    outputTokens: Math.max(0, a.outputTokens - b.outputTokens),
    cacheCreationInputTokens: Math.max(0, a.cacheCreationInputTokens - b.cacheCreationInputTokens),
    cacheReadInputTokens: Math.max(0, a.cacheReadInputTokens - b.cacheReadInputTokens),
  };
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Turns XState inspection events (and text deltas, which never pass through a machine) into run
 * events, in the order they are observed, with one repair: a child's final snapshot is decoded
 * when its `done` event is, so its end comes before its parent reacts to it (XState reports the
 * parent's handling first).
 */
export class RunDecoder {
  private readonly agents = new Map<string, Track>();
  /** Session actors by XState session id, for the events they receive. */
  private readonly bySession = new Map<string, Track>();
  /** The budget meters of the trees followed (one per root), each with what unsubscribes from it. */
  private readonly meters = new Map<BudgetMeter, () => void>();

  constructor(private readonly emit: RunEventListener) {}

  /** Stops following the budget meters (the run is over). */
  close(): void {
    for (const unsubscribe of this.meters.values()) unsubscribe();
    this.meters.clear();
  }

  /** A budget being reached is no machine event of the agent it stops: the tree's meter tells it. */
  private followBudgets(session: SessionView): void {
    const meter = (session.context as { options?: { budget?: BudgetMeter } }).options?.budget;
    if (!meter || typeof meter.onCrossing !== 'function' || this.meters.has(meter)) return;
    this.meters.set(
      meter,
      meter.onCrossing((crossing: BudgetCrossing) => {
        const { id } = crossing.agent;
        this.emit({
          type: 'budget.exceeded',
          agent: id,
          path: id.split('/'),
          time: Date.now(),
          scope: crossing.scope,
          tokens: crossing.tokens,
          cost: crossing.cost,
          limit: crossing.limit,
        });
      }),
    );
  }

  inspect(event: InspectionEvent): void {
    if (event.type === '@xstate.snapshot') {
      const session = sessionOf(event.snapshot);
      if (session) this.onSnapshot((event.actorRef as ActorRefLike | undefined)?.sessionId, session);
    } else if (event.type === '@xstate.event') {
      this.onEvent(event.actorRef, event.event as { readonly type: string; readonly [key: string]: unknown }, event.sourceRef);
    }
  }

  /** A text delta of `agent`'s model request under way. */
  textDelta(agent: AgentIdentity, text: string): void {
    const track = this.agents.get(agent.id);
    // Deltas come only while a request runs, long after the session's first snapshot.
    if (!track || track.ended) return;
    if (track.state !== 'streaming') (track.early ??= []).push(text);
    else this.emit({ type: 'text.delta', agent: agent.id, path: track.path, time: Date.now(), text });
  }

  /** A session's snapshot, as a catch-up when attaching to a running system. */
  snapshot(sessionId: string, snapshot: unknown): void {
    const session = sessionOf(snapshot);
    if (session) this.onSnapshot(sessionId, session);
  }

  private track(sessionId: string | undefined, session: SessionView): Track {
    const { agent } = session.context;
    let track = this.agents.get(agent.id);
    if (!track) {
      track = {
        agent,
        path: agent.id.split('/'),
        state: '',
        steps: 0,
        // A resumed session's counts start where its journal left them (a test's partial snapshot
        // may have none): its steps are numbered over its whole life, across processes.
        requests: session.context.requests ?? 0,
        served: session.context.requests ?? 0,
        servedUsage: session.context.usage ?? ZERO_USAGE,
        messages: 0,
        last: undefined,
        snapshot: undefined,
        ended: false,
        early: undefined,
        asked: undefined,
      };
      this.followBudgets(session);
      this.agents.set(agent.id, track);
      const messages = session.context.messages ?? [];
      const task = session.context.pendingUser?.[0] ?? firstUserText(messages);
      const model = (session.context.options as { model?: unknown } | undefined)?.model;
      this.emit({
        type: 'agent.started',
        agent: agent.id,
        path: track.path,
        time: Date.now(),
        name: agent.name,
        depth: agent.depth,
        parent: parentIdOf(agent),
        task,
        ...(typeof model === 'string' ? { model } : {}),
      });
    }
    if (sessionId !== undefined) this.bySession.set(sessionId, track);
    return track;
  }

  private onSnapshot(sessionId: string | undefined, session: SessionView): void {
    const track = this.track(sessionId, session);
    if (track.ended || track.snapshot === session) return;
    track.snapshot = session;
    const { agent, path } = track;
    const time = Date.now();
    const { context } = session;
    const messages: readonly Message[] = context.messages ?? [];
    let assistants = 0;
    // A merge replaced the last message sent; then whatever was appended after it.
    if (track.messages > 0 && messages[track.messages - 1] !== track.last) {
      const index = track.messages - 1;
      const message = messages[index];
      if (message) this.emit({ type: 'message', agent: agent.id, path, time, index, message });
    }
    for (let index = track.messages; index < messages.length; index++) {
      const message = messages[index];
      if (!message) continue;
      if (message.role === 'assistant') assistants++;
      this.emit({ type: 'message', agent: agent.id, path, time, index, message });
    }
    track.messages = messages.length;
    track.last = messages[messages.length - 1];
    // Requests counted with no response or error to show for them were aborted (a cancel, a spent budget).
    if (context.requests !== undefined && context.requests > track.served) {
      this.emit({
        type: 'model.lost',
        agent: agent.id,
        path,
        time,
        reason: 'aborted',
        requests: context.requests - track.served,
        usage: subtractUsage(context.usage, track.servedUsage),
      });
      track.served = context.requests;
      track.servedUsage = context.usage;
    }

    const state = String(session.value);
    const steps = context.steps;
    // Each entry into `streaming` is one request. Staying in `streaming`, a request began when the
    // turn's count rose (a continuation after pause_turn) or a step was committed (a turn ended and
    // the next began within one macrostep: the count restarted).
    let began = 0;
    if (state === 'streaming') {
      if (track.state !== 'streaming') began = 1;
      else if (steps > track.steps) began = steps - track.steps;
      else if (assistants > 0) began = 1;
    }
    track.requests += began;
    track.steps = steps;
    if (state !== track.state || began > 0) {
      track.state = state;
      this.emit({ type: 'agent.state', agent: agent.id, path, time, state, steps, requests: track.requests, usage: context.usage });
    }
    this.announceApprovals(track, session, state, time);
    this.emit({ type: 'agent.snapshot', agent: agent.id, path, time, state, requests: track.requests, snapshot: session });
    if (track.early) {
      const early = track.early;
      track.early = undefined;
      for (const text of early) this.emit({ type: 'text.delta', agent: agent.id, path, time, text });
    }
    if (session.status === 'active') return;
    track.ended = true;
    // An ended agent's history is not kept alive for the rest of the run (a wide fan-out has thousands).
    track.snapshot = undefined;
    track.last = undefined;
    if (sessionId !== undefined) this.bySession.delete(sessionId);
    if (session.status === 'done') {
      const result = session.output as AgentResult | undefined;
      this.emit({
        type: 'agent.ended',
        agent: agent.id,
        path,
        time,
        status: 'done',
        ...(result ? { outcome: result.outcome, result } : {}),
        ...(result?.reason ? { reason: result.reason } : {}),
      });
    } else {
      const crashed = session.status === 'error';
      this.emit({
        type: 'agent.ended',
        agent: agent.id,
        path,
        time,
        status: crashed ? 'error' : 'stopped',
        ...(crashed ? { reason: errorText(session.error) } : {}),
      });
    }
  }

  /** Each call of the batch that waits for a person, once, while the session is in `awaitingApproval`. */
  private announceApprovals(track: Track, session: SessionView, state: string, time: number): void {
    if (state !== 'awaitingApproval' || session.status !== 'active') {
      track.asked = undefined;
      return;
    }
    const awaiting = session.context.batch?.awaiting;
    if (!awaiting) return;
    const asked = (track.asked ??= new Set());
    let task: string | undefined;
    for (const [callId, call] of awaiting) {
      if (asked.has(callId)) continue;
      asked.add(callId);
      task ??= firstUserText(session.context.messages ?? []);
      this.emit({ type: 'approval.requested', agent: track.agent.id, path: track.path, time, callId, tool: call.tool, input: call.input, task });
    }
  }

  private onEvent(target: ActorRefLike, event: { readonly type: string; readonly [key: string]: unknown }, source: ActorRefLike | undefined): void {
    const { type } = event;
    const childEnded = CHILD_ENDED.test(type);
    // The child has ended already: decode that before whoever receives its `done` reacts.
    if (childEnded && source) {
      const child = sessionOf(source.getSnapshot());
      if (child) this.onSnapshot(source.sessionId, child);
    }
    const track = this.bySession.get(target.sessionId);
    if (!track || track.ended) return;
    const agent = track.agent.id;
    const { path } = track;
    const time = Date.now();
    if (type === 'model.done') {
      const response = event['output'] as ModelResponse;
      const incomplete = new Set(response.incompleteToolUseIds);
      let textChars = 0;
      const toolCalls: { id: string; name: string; complete: boolean }[] = [];
      for (const block of response.content) {
        if (block.type === 'text') textChars += block.text.length;
        else if (block.type === 'tool_use') toolCalls.push({ id: block.id, name: block.name, complete: !incomplete.has(block.id) });
      }
      this.emit({ type: 'model.response', agent, path, time, stopReason: response.stopReason, textChars, toolCalls, usage: response.usage });
      for (const block of response.content) {
        if (block.type === 'tool_use')
          this.emit({ type: 'tool.call', agent, path, time, id: block.id, name: block.name, input: block.input, complete: !incomplete.has(block.id) });
      }
      this.emit({ type: 'usage', agent, path, time, usage: response.usage });
      const requests = typeof event['requests'] === 'number' ? event['requests'] : 1;
      const lost = (event['lost'] as Usage | undefined) ?? ZERO_USAGE;
      if (requests > 1) this.emit({ type: 'model.lost', agent, path, time, reason: 'retried', requests: requests - 1, usage: lost });
      track.served += requests;
      track.servedUsage = addUsage(track.servedUsage, addUsage(response.usage, lost));
    } else if ((type === 'tool.settled' || type === 'batch.drained') && event['result'] !== undefined) {
      const result = event['result'] as ToolResultBlock;
      this.emit({ type: 'tool.result', agent, path, time, id: result.tool_use_id, isError: result.is_error === true, content: result.content });
    } else if (childEnded) {
      this.onDelivery(track, target, event, time);
    } else if (type === 'user.message') {
      this.emit({ type: 'user.message', agent, path, time, text: String(event['text'] ?? '') });
    } else if (type === 'cancel') {
      const reason = event['reason'];
      this.emit({ type: 'agent.cancel', agent, path, time, ...(typeof reason === 'string' ? { reason } : {}) });
    } else if (type === 'model.error') {
      // What the failed requests spent first: a watcher ending the request on the error has it by then.
      const spent = event['spent'] as RequestSpend | undefined;
      if (spent) {
        this.emit({ type: 'model.lost', agent, path, time, reason: 'failed', requests: spent.requests, usage: spent.usage });
        track.served += spent.requests;
        track.servedUsage = addUsage(track.servedUsage, spent.usage);
      }
      this.emit({ type: 'model.error', agent, path, time, message: errorText(event['error']) });
    } else if (type === 'approval.answer') {
      // Observed before the session takes it: the call is still among those waiting (else it is ignored).
      const callId = String(event['callId']);
      const call = track.snapshot?.context.batch?.awaiting.get(callId);
      if (!call || track.snapshot?.value !== 'awaitingApproval') return;
      const reason = event['reason'];
      this.emit({
        type: 'approval.answered',
        agent,
        path,
        time,
        callId,
        tool: call.tool,
        decision: event['decision'] as ApprovalDecision,
        ...(typeof reason === 'string' ? { reason } : {}),
      });
    }
  }

  /** A child's `done` (or `error`) event, forwarded to its parent session by the crew that held it. */
  private onDelivery(parent: Track, target: ActorRefLike, event: { readonly type: string; readonly [key: string]: unknown }, time: number): void {
    // Still registered with the parent: the event is observed before the parent processes it.
    const registry = sessionOf(target.getSnapshot())?.context.children;
    const found = registry?.byActorId(String(event['actorId']))?.agent.id;
    const child = found ?? `${parent.agent.id}/?`;
    const name = this.agents.get(child)?.agent.name ?? child.slice(child.lastIndexOf('/') + 1);
    const base = { type: 'delivery', agent: parent.agent.id, path: parent.path, time, child, name } as const;
    const result = event['output'] as AgentResult | undefined;
    if (result) {
      this.emit({
        ...base,
        outcome: result.outcome,
        text: result.text,
        ...(result.reason ? { reason: result.reason } : {}),
        ...('value' in result ? { value: result.value } : {}),
        result,
      });
    } else {
      this.emit({ ...base, outcome: 'failed', text: '', reason: `sub-agent crashed: ${errorText(event['error'])}` });
    }
  }
}
