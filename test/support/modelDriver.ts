import type { AnyActorRef, AnyTransitionDefinition, InspectionEvent } from 'xstate';
import { createSessionActor, type SessionActor, type SessionSnapshot } from '../../src/run/runtime.js';
import { findPairingProblems } from '../../src/engine/pairing.js';
import { clip, renderValue } from '../../src/engine/render.js';
import { MemoryLogSink, type LogSink } from '../../src/engine/log/sessionLog.js';
import { ScriptedProvider, type ScriptedStep } from '../../src/testing/scriptedProvider.js';
import type { AssistantBlock, ModelRequest, ModelResponse, Provider, StreamSink } from '../../src/engine/types.js';
import { RunJournal } from '../../src/store/runJournal.js';
import type { RestoredSession } from '../../src/store/restoredSession.js';
import type { FrozenStore, RecordingStore } from './durableStore.js';
import { KID_REPLY, MODEL_ERROR, MODEL_LIMITS, modelInput, stateKey, type ModelEvent, type ModelKind } from './sessionModel.js';

/**
 * Drives a real session along a path of the model (test/support/sessionModel.ts).
 *
 * Every model request and every `work` tool call of the real session waits at a gate until the
 * path says what happens: the gate is released with the scripted step that makes the real model
 * respond as the path's event did, a tool call settles, a child (itself a real session held at its
 * own gate) replies or crashes. Events from outside (cancel, a user message) are sent while the
 * session waits. The real session's abstract states and the transitions it takes (XState's
 * inspection events) are recorded and compared with the path's.
 */

/** Holds requests (or tool calls) per agent until released. */
class Gate<T> {
  private readonly waiting = new Map<string, { release: (value: T) => void }[]>();
  private readonly arrivals = new Map<string, (() => void)[]>();

  /** Waits to be released; an abort rejects and leaves the gate. */
  hold(agentId: string, signal: AbortSignal): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const entry = {
        release: (value: T) => {
          signal.removeEventListener('abort', onAbort);
          resolve(value);
        },
      };
      const onAbort = (): void => {
        const list = this.waiting.get(agentId) ?? [];
        list.splice(list.indexOf(entry), 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      const list = this.waiting.get(agentId) ?? [];
      list.push(entry);
      this.waiting.set(agentId, list);
      for (const arrived of this.arrivals.get(agentId)?.splice(0) ?? []) arrived();
    });
  }

  /** Waits until something of `agentId` waits at the gate. */
  async waitFor(agentId: string, timeoutMs = 1_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((this.waiting.get(agentId)?.length ?? 0) === 0) {
      if (Date.now() > deadline) throw new Error(`nothing of '${agentId}' is waiting at the gate`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 50);
        const list = this.arrivals.get(agentId) ?? [];
        list.push(() => {
          clearTimeout(timer);
          resolve();
        });
        this.arrivals.set(agentId, list);
      });
    }
  }

  /** Releases the oldest waiter of `agentId`, waiting for one to arrive if needed. */
  async release(agentId: string, value: T): Promise<void> {
    await this.waitFor(agentId);
    this.waiting.get(agentId)?.shift()?.release(value);
  }

  get size(): number {
    let n = 0;
    for (const list of this.waiting.values()) n += list.length;
    return n;
  }
}

/** A model whose every request waits until the test releases it with a scripted step. */
class GatedProvider implements Provider {
  readonly name = 'gated';
  readonly gate = new Gate<ScriptedStep>();
  private readonly decided = new Map<string, ScriptedStep>();
  /** Plays the released steps; checks every request against the pairing rule. */
  readonly scripted = new ScriptedProvider({
    agents: {
      '*': (request) => {
        const step = this.decided.get(request.agent.id);
        if (!step) throw new Error(`no step was released for '${request.agent.id}'`);
        this.decided.delete(request.agent.id);
        return step;
      },
    },
  });

  async stream(request: ModelRequest, sink: StreamSink): Promise<ModelResponse> {
    const step = await this.gate.hold(request.agent.id, request.signal);
    this.decided.set(request.agent.id, step);
    return this.scripted.stream(request, sink);
  }
}

function blockText(block: AssistantBlock): string {
  return block.type === 'text' ? `text:${block.text}` : `${block.name}:${JSON.stringify(block.input)}`;
}

/** What a response puts in the history, as the driver compares it (empty text blocks are dropped). */
export function saidBy(response: ModelResponse): string[] {
  return response.content.filter((b) => b.type !== 'text' || b.text.length > 0).map(blockText);
}

/**
 * tool_use ids for the real sessions' responses, unique in this test process. (A `ScriptedProvider`
 * numbers its ids from 1: a resumed session's new provider would repeat ids its history holds,
 * which no real model does.)
 */
let nextRealToolId = 0;

function scriptedStepOf(response: ModelResponse): ScriptedStep {
  return {
    content: response.content.map((block) =>
      block.type === 'text'
        ? block.text
        : {
            name: block.name,
            input: { ...block.input },
            id: `toolu_real_${++nextRealToolId}`,
            ...(response.incompleteToolUseIds.includes(block.id) ? { cutOff: true } : {}),
          },
    ),
    stopReason: response.stopReason,
  };
}

/** The payload of the reply that stands in the last batch of a history, if there is one. */
function standingReply(snapshot: SessionSnapshot): { found: boolean; result?: unknown } {
  const messages = snapshot.context.messages;
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message?.role !== 'assistant') continue;
    const results = messages[i + 1]?.content ?? [];
    for (const block of message.content) {
      if (block.type !== 'tool_use' || block.name !== 'reply') continue;
      const result = results.find((r) => r.type === 'tool_result' && r.tool_use_id === block.id);
      if (result?.type === 'tool_result' && !result.is_error) return { found: true, result: block.input['result'] };
    }
    return { found: false };
  }
  return { found: false };
}

/** What must hold of a step from one snapshot of a session to the next. */
export function stepViolations(before: SessionSnapshot | undefined, after: SessionSnapshot): string[] {
  const out: string[] = [];
  const fired = (after.context.latchCounts['reply-reminder']?.total ?? 0) - (before?.context.latchCounts['reply-reminder']?.total ?? 0);
  const c = after.context;
  if (fired > 0 && (c.children.size > 0 || c.inbox.length > 0))
    out.push(`the reply reminder fired with ${c.children.size} children running and ${c.inbox.length} results waiting`);
  if (fired > 0 && before?.value === 'replied') out.push('the reply reminder fired after replied');
  return out;
}

/**
 * What must hold in a state, checked on the snapshot the moment the session enters it (the
 * history is shared and appended to later). Returns the violations.
 */
export function stateViolations(snapshot: SessionSnapshot, kind: ModelKind | 'any', limits: { maxSteps: number; replyCap: number }): string[] {
  const out: string[] = [];
  const c = snapshot.context;
  const value = String(snapshot.value);
  const problems = c.messages.length === 0 ? [] : findPairingProblems(c.messages);
  // Only while a batch runs, or waits for sub-agents, may the history end with calls still unanswered.
  const open = (value === 'dispatchingBatch' || value === 'waitingForAgents' || value === 'awaitingApproval') && snapshot.status === 'active';
  const allowed = open ? problems.filter((p) => !/without tool_result \(history ends\)$/.test(p)) : problems;
  // A waiting session waits for someone: with no sub-agent running, its wait would never end.
  if (value === 'waitingForAgents' && snapshot.status === 'active' && c.children.size === 0) out.push('waitingForAgents with no sub-agent running');
  if (allowed.length > 0) out.push(`${value}: history breaks the pairing rule: ${allowed.join('; ')}`);
  if (value === 'readyForUser' && c.messages.length === 0 && c.steps > 0) out.push('readyForUser after a turn with an empty history');
  const reminders = c.latchCounts['reply-reminder']?.total ?? 0;
  if (reminders > (c.agent.depth > 0 ? 1 : 0)) out.push(`the reply reminder fired ${reminders} times`);
  if (c.steps > limits.maxSteps) out.push(`${c.steps} model requests in one turn, over the cap of ${limits.maxSteps}`);
  // Before the cap only for a budget (issue 17).
  const cappedFor = snapshot.status === 'done' ? snapshot.output?.reason : undefined;
  if (value === 'capped' && c.steps < limits.maxSteps && cappedFor !== 'budget') out.push(`capped after ${c.steps} of ${limits.maxSteps} steps`);
  const quiet = c.children.size === 0 && c.inbox.length === 0;
  if (value === 'finishedWithoutReply' && (reminders !== 1 || !quiet))
    out.push(`finished without reply after ${reminders} reminders, with ${c.children.size} children and ${c.inbox.length} results waiting`);
  // A sub-agent rests only to wait for something; with nothing to wait for it would wait forever.
  if (value === 'readyForUser' && snapshot.status === 'active' && c.agent.depth > 0 && quiet && c.pendingUser.length === 0)
    out.push('a sub-agent waits in readyForUser with nothing to wait for');
  if (value === 'replied') {
    if (kind === 'root' || c.agent.depth === 0) out.push('the root replied');
    const reply = standingReply(snapshot);
    if (!reply.found) out.push('replied without a complete reply in its last batch');
    const rendered = clip(renderValue(reply.result), limits.replyCap);
    const output = snapshot.status === 'done' ? snapshot.output : undefined;
    if (output?.text !== rendered) out.push(`replied with ${JSON.stringify(output?.text)}, expected the rendered payload ${JSON.stringify(rendered)}`);
    if (output?.outcome !== (rendered.length > 0 ? 'replied' : 'empty'))
      out.push(`replied with outcome ${output?.outcome} for a payload rendering to ${rendered.length} characters`);
  }
  return out;
}

/**
 * A durable real session: journaled into `store` (every append kept as a frozen copy, see
 * test/support/durableStore.ts), or taken up again from a journal (`restore`).
 */
export interface DurableDriving {
  readonly store: RecordingStore;
  readonly runId: string;
  /** The seq of the session's first journal record (one past the crashed run's last). */
  readonly nextSeq: number;
  /** Whether the work tool is idempotent (a call in flight at the crash is run again on resume). */
  readonly idempotent: boolean;
  /** A resumed session: where its journal left it (see `restoreRun`). */
  readonly restore?: RestoredSession;
  /** Of a resumed session: the responses the crashed process committed (its history holds them). */
  readonly said?: readonly string[];
  /** Children marked to crash, shared with the crashed process (a child crashes once). */
  readonly crashing?: Set<string>;
}

/** An append of a durable session's journal, and the abstract state it holds (see `PathDriver.appends`). */
export interface TaggedAppend {
  readonly frozen: FrozenStore;
  /** Index into `PathDriver.keys`; undefined until the session's macrostep that wrote it ends. */
  key: number | undefined;
}

/** One real session, driven step by step. */
export class PathDriver {
  readonly provider = new GatedProvider();
  readonly tools = new Gate<unknown>();
  readonly logs = new MemoryLogSink();
  readonly actor: SessionActor;
  readonly sutId: string;
  /** The session's abstract states, consecutive repeats collapsed. */
  readonly keys: string[] = [];
  readonly transitions: AnyTransitionDefinition[] = [];
  /** How many transitions had been taken when each state of `keys` was entered. */
  private readonly transitionCounts: number[] = [];
  readonly states = new Set<string>();
  readonly violations: string[] = [];
  /** Of a durable session: each append of its journal, with the abstract state whose records it holds. */
  readonly appends: TaggedAppend[] = [];
  /** tool_use ids of the work calls the session started, in order (runs of a call counted). */
  readonly workStarted: string[] = [];
  /** For each of `workStarted`: how many appends the session's journal had written when it started. */
  readonly workStartedAt: number[] = [];
  readonly journal: RunJournal | undefined;
  private cursor = 0;
  private readonly crashing: Set<string>;
  private readonly changed = new Set<() => void>();
  private requestsAtReplied: number | undefined;
  private previous: SessionSnapshot | undefined;
  /** The assistant blocks of every response released to the session, in order. */
  private readonly said: string[];
  /** The session's own actor (the system's root), known from its first inspection event. */
  private sut: AnyActorRef | undefined;
  /** Between the session's first action of a macrostep and the snapshot that ends it. */
  private busy = false;

  constructor(
    readonly kind: ModelKind,
    readonly durable?: DurableDriving,
  ) {
    const input = modelInput(kind, this.provider, () => Promise.reject(new Error('unreachable')), durable?.idempotent ?? false);
    this.sutId = input.agent?.id ?? 'root';
    this.said = [...(durable?.said ?? [])];
    this.crashing = durable?.crashing ?? new Set<string>();
    const tools = this.tools;
    const started = this.workStarted;
    const startedAt = this.workStartedAt;
    const appends = this.appends;
    const work = input.tools?.[0];
    if (!work) throw new Error('the model input has no work tool');
    const gatedWork = {
      ...work,
      prepare: (raw: unknown) => {
        const prepared = work.prepare(raw);
        if (!prepared.ok) return prepared;
        return {
          ok: true as const,
          value: async (context: { agent: { id: string }; toolUseId: string; signal: AbortSignal }) => {
            started.push(context.toolUseId);
            startedAt.push(appends.length);
            return tools.hold(context.agent.id, context.signal);
          },
        };
      },
    };
    const crashing = this.crashing;
    const inner = this.logs;
    // A child marked as crashing throws from its log once: its actor fails inside a transition.
    const logs: LogSink = {
      open: (agent) => {
        const log = inner.open(agent);
        return {
          ...log,
          append: (record) => {
            if (crashing.delete(agent.id)) throw new Error('kid crashed');
            log.append(record);
          },
        };
      },
    };
    let journal: RunJournal | undefined;
    if (durable) {
      journal = new RunJournal(durable.store, durable.runId, durable.nextSeq);
      // An append written inside one of the session's macrosteps (by a store written from one of its
      // actions) holds the state that macrostep enters; any other (the journal writes each burst in a
      // microtask), the state the session is in.
      durable.store.onAppend = (frozen) => this.appends.push({ frozen, key: this.busy || this.keys.length === 0 ? undefined : this.keys.length - 1 });
    }
    this.journal = journal;
    const restore = durable?.restore;
    this.actor = createSessionActor(
      { ...input, tools: [gatedWork], logs, ...(journal ? { journal } : {}), ...(restore ? { restore } : {}) },
      { inspect: (event) => this.inspect(event) },
    );
  }

  private inspect(event: InspectionEvent): void {
    // The first actor of the system is the session itself (announced before its initial state is
    // computed, so the `starting` transitions it takes as it is made are seen too).
    if (event.type === '@xstate.actor' && !this.sut) this.sut = event.actorRef as AnyActorRef;
    if (event.actorRef !== this.sut) return;
    if (event.type === '@xstate.action') {
      this.busy = true;
      return;
    }
    if (event.type === '@xstate.microstep') {
      this.transitions.push(...event._transitions);
      return;
    }
    if (event.type !== '@xstate.snapshot') return;
    this.busy = false;
    const snapshot = event.snapshot as SessionSnapshot;
    this.states.add(String(snapshot.value));
    // A resumed session starts with the latch counts of its journal: nothing fired as it was taken
    // up (its first state must be the crashed one's, latch counts included: see the durable tests).
    if (this.previous !== undefined || !this.durable?.restore) {
      for (const v of stepViolations(this.previous, snapshot)) this.violations.push(`after ${this.keys.length} states: ${v}`);
    }
    this.previous = snapshot;
    const key = stateKey(snapshot);
    if (this.keys[this.keys.length - 1] !== key) {
      this.keys.push(key);
      this.transitionCounts.push(this.transitions.length);
      const at = this.keys.length;
      const checkState = (): void => {
        for (const v of stateViolations(snapshot, this.kind, MODEL_LIMITS)) this.violations.push(`after ${at} states: ${v}`);
      };
      // A session stopped from outside answers its open calls as the stop completes, just after
      // this snapshot is announced to inspectors: check it once stop() has returned.
      if (snapshot.status === 'stopped') queueMicrotask(checkState);
      else checkState();
      // Everything the model said is in the history, in order, and nothing else (pause_turn included).
      const history = snapshot.context.messages.flatMap((m) => (m.role === 'assistant' ? m.content.map(blockText) : []));
      if (JSON.stringify(history) !== JSON.stringify(this.said)) {
        this.violations.push(`after ${this.keys.length} states: the history holds ${JSON.stringify(history)}, the model said ${JSON.stringify(this.said)}`);
      }
      if (snapshot.value === 'replied') this.requestsAtReplied = this.provider.scripted.requestsOf(this.sutId).length;
    }
    for (const append of this.appends) append.key ??= this.keys.length - 1;
    for (const notify of [...this.changed]) notify();
  }

  /**
   * Waits until the journal holds everything the session recorded so far (a durable session's
   * records are written once per turn of the event loop): a crash after this loses nothing of the
   * steps performed, and each step's records are written apart from the next step's.
   */
  async journalWritten(): Promise<void> {
    while (this.journal?.barrier()) await this.journal.barrier();
  }

  /**
   * Makes `event` happen to the real session: an effect's answer once the steps before it are
   * journaled (effects wait for that); a message or a cancel from outside at once, as it may come
   * at any moment (its record then joins the burst being written: in `nudged`, waiting would let
   * the tick that leaves it go first).
   */
  async perform(event: ModelEvent): Promise<void> {
    if (event.type !== 'user.message' && event.type !== 'cancel' && event.type !== 'budget.spent') await this.journalWritten();
    switch (event.type) {
      case 'xstate.init':
        this.actor.start();
        return;
      case 'user.message':
      case 'cancel':
      case 'budget.spent':
        this.actor.send(event);
        return;
      case 'budget.wait':
        // The meter's answer, as the session raises it: the request held at the gate is aborted.
        this.actor.send(event);
        return;
      case 'budget.room':
        this.actor.send(event);
        return;
      case 'tick':
        return; // it follows by itself
      case 'batch.drained':
        // With the last call's result, the drain is that call settling; without, it follows by itself.
        return event.result ? this.tools.release(this.sutId, 'done') : undefined;
      case 'tool.settled':
        return this.tools.release(this.sutId, 'done');
      case 'model.done':
        await this.provider.gate.waitFor(this.sutId);
        this.said.push(...saidBy(event.output));
        return this.provider.gate.release(this.sutId, scriptedStepOf(event.output));
      case 'model.error':
        return this.provider.gate.release(this.sutId, { fault: { retryable: false, message: MODEL_ERROR } });
      case 'model.starting':
        // The request held at the gate had left already: the join supersedes it with a new one.
        this.actor.send(event);
        return;
      case 'approval.answer': {
        // The model's call ids are not the real session's: answer the real session's first waiting call.
        const callId = this.actor.getSnapshot().context.batch?.awaiting.keys().next().value;
        if (callId === undefined) throw new Error('the real session waits on no call');
        this.actor.send({ ...event, callId });
        return;
      }
      default: {
        const child = this.actor.getSnapshot().context.children.byActorId(event.actorId);
        if (!child) throw new Error(`no live child with actor id ${event.actorId}`);
        // The child is held at its first request; a crashing one fails as its response is committed.
        await this.provider.gate.waitFor(child.agent.id);
        if (event.type.startsWith('xstate.error.')) this.crashing.add(child.agent.id);
        return this.provider.gate.release(child.agent.id, { calls: [{ name: 'reply', input: { result: KID_REPLY } }] });
      }
    }
  }

  /** Waits until the session reaches the abstract state `key` (at or after the last one reached). */
  reach(key: string, timeoutMs = 1_000): Promise<void> {
    return new Promise((resolve, reject) => {
      const check = (): boolean => {
        const at = this.keys.indexOf(key, this.cursor);
        if (at < 0) return false;
        this.cursor = at;
        return true;
      };
      if (check()) return resolve();
      const timer = setTimeout(() => {
        this.changed.delete(notify);
        reject(new Error(`the real session did not reach ${key}\nits states:\n  ${this.keys.slice(this.cursor).join('\n  ')}`));
      }, timeoutMs);
      const notify = (): void => {
        if (!check()) return;
        clearTimeout(timer);
        this.changed.delete(notify);
        resolve();
      };
      this.changed.add(notify);
    });
  }

  transitionsAt(keyIndex: number): number {
    return this.transitionCounts[keyIndex] ?? this.transitions.length;
  }

  /** The states the session passed through up to the last one the path reached. */
  trail(): string[] {
    return this.keys.slice(0, this.cursor + 1);
  }

  /** Stops the session; checks nothing is left waiting and no request followed `replied`. */
  async stop(): Promise<void> {
    this.actor.stop();
    for (let i = 0; i < 3; i++) await new Promise((r) => setImmediate(r));
    if (this.provider.gate.size > 0) this.violations.push(`${this.provider.gate.size} model requests still waiting after stop`);
    if (this.tools.size > 0) this.violations.push(`${this.tools.size} tool calls still running after stop`);
    if (this.provider.scripted.pairingViolations.length > 0)
      this.violations.push(`requests broke the pairing rule: ${JSON.stringify(this.provider.scripted.pairingViolations)}`);
    if (this.requestsAtReplied !== undefined && this.provider.scripted.requestsOf(this.sutId).length !== this.requestsAtReplied) {
      this.violations.push('a model request was made after replied');
    }
    const nudges = this.logs.records(this.sutId).filter((r) => r.type === 'nudge' && r.latch === 'reply-reminder').length;
    if (nudges > (this.kind === 'sub' ? 1 : 0)) this.violations.push(`the reply reminder was sent ${nudges} times`);
  }
}
