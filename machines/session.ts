import { and, assign, enqueueActions, setup, type AnyActorLogic, type AnyActorRef } from 'xstate';
import { denialMessage, type ApprovalDesk } from '../src/engine/approvals.js';
import {
  checkAgentBudget,
  type AgentBudget,
  type BudgetRoomEvent,
  type BudgetScope,
  type BudgetSpentEvent,
  type BudgetWaitEvent,
} from '../src/engine/budget.js';
import { RequestAdmitter } from '../src/engine/requestAdmitter.js';
import type { RemoteChildSpec, RemoteMemberInput } from '../src/engine/remoteChildren.js';
import { childIdentity, ROOT_AGENT } from '../src/engine/identity.js';
import { assertToolPairing } from '../src/engine/pairing.js';
import { ChildRegistry, type LiveChild } from './childRegistry.js';
import { createCrewMachine, type CrewMember } from './crew.js';
import { appendAssistantBlocks, appendUserBlocks, nonEmptyBlocks, text, textOf, toolUses } from '../src/engine/history.js';
import { renderInbox } from '../src/engine/inbox.js';
import { SessionRecorder } from '../src/session/recorder.js';
import { describeError } from '../src/engine/model/errors.js';
import { nudgeMessage, pickNudge, replyReminder, truncationReminder, type LatchCount, type NudgeLatch, type NudgeView } from '../src/engine/nudges.js';
import { childOptions, inheritOptions, resolveOptions, sessionAxes, type ResolvedOptions } from '../src/session/options.js';
import { defaultSystemPrompt } from '../src/engine/prompts.js';
import { clip, renderValue } from '../src/engine/render.js';
import { buildToolbox, errorResult, okResult, planBatch, type Toolbox } from '../src/tools/toolbox.js';
import type { RunnableCall } from '../src/tools/runTools.js';
import { effectsOf, type SessionEffects } from '../src/session/sessionEffects.js';
import type { RequestSpend, StreamModelInput } from '../src/engine/model/streamModel.js';
import { addUsage, ZERO_USAGE } from '../src/engine/usage.js';
import type { RestoredSession, ResumeState } from '../src/store/restoredSession.js';
import type { AgentOutcome, AgentResult, AssistantBlock, ModelResponse, StopReason, ToolResultBlock, ToolUseBlock, UserBlock } from '../src/engine/types.js';
import type { ActorArgs, SessionInput, SessionEvent, Batch, SessionFixed, SessionContext, SessionArgs, StepEnd, MadeContext, Spawner } from './sessionTypes.js';

/**
 * The session machine: one per agent, root and sub-agents alike (CONTRACT §1).
 *
 * It decides; `src/` does the I/O. Entry actions start the model request of `streaming`, the tool
 * batch of `dispatchingBatch` and the rests of `readyForUser` and `nudged` on the session's
 * effects (src/session/sessionEffects.ts), which answer with events and end with the session. Each
 * sub-agent is a spawned copy of this machine. Per-delta traffic never passes through it.
 *
 * The history (`messages`) is one append-only array shared by every snapshot: actions append to
 * it instead of copying it, so a session of n steps costs O(n), not O(n²).
 */

/**
 * The crew a session spawns its sub-agents in: each member is a copy of this machine, which the
 * crew looks up when it spawns, once `sessionMachine` below exists (see `createCrewMachine`).
 */
const crewMachine = createCrewMachine<SessionInput>((): AnyActorLogic => sessionMachine);

const REFUSAL_REASONS: Partial<Record<StopReason, string>> = {
  refusal: 'the model refused to continue (stop reason: refusal)',
  model_context_window_exceeded: 'the conversation exceeded the model context window',
};

/** A session that owes a reply: every sub-agent, and a root given an `output` schema. */
function isSubAgent(context: SessionContext): boolean {
  return context.fixed.toolbox.axes.replies;
}

/** Nothing is coming: no sub-agent runs, no result waits, and (issue 17) no message sent to it waits. */
function isQuiet(context: SessionContext): boolean {
  return context.inbox.length === 0 && context.children.size === 0 && context.pendingUser.length === 0;
}

/** The step cap, or a budget (src/engine/budget.ts): a session that would go on ends `capped`. */
function capReached(context: SessionContext): boolean {
  return context.steps >= context.options.maxSteps || context.options.budget.caps(context.agent, context.fixed.budgetScope);
}

function stepEndOf(response: ModelResponse): StepEnd {
  return { stopReason: response.stopReason, stepText: textOf(response.content) };
}

function nudgeView(context: SessionContext, step: StepEnd): Omit<NudgeView, 'firedThisTurn' | 'firedTotal'> {
  return { agent: context.agent, isSubAgent: isSubAgent(context), quiet: isQuiet(context), steps: context.steps, ...step };
}

function latchFor(context: SessionContext, on: NudgeLatch['on'], step: StepEnd): NudgeLatch | undefined {
  return pickNudge(context.fixed.latches, on, context.latchCounts, nudgeView(context, step));
}

/** The model's response, from the `model.done` event. */
function responseOf(event: SessionEvent): ModelResponse {
  if (event.type !== 'model.done') throw new Error(`exarch: expected the model's response, got ${event.type}`);
  return event.output;
}

/** Why the last step stopped: from the model's done event, or from the batch it produced. */
function stepEndFor(context: SessionContext, event: SessionEvent): StepEnd {
  if (event.type === 'model.done') return stepEndOf(responseOf(event));
  if (context.batch) return context.batch.stepEnd;
  throw new Error(`exarch: no step has ended (event ${event.type})`);
}

/** Records a settled tool call's result (from `tool.settled`, or the last one, with `batch.drained`) in the open batch. */
function settleCallIn(context: SessionContext, event: SessionEvent): void {
  if ((event.type !== 'tool.settled' && event.type !== 'batch.drained') || !event.result || !context.batch || context.batch.committed) return;
  context.batch.results.set(event.result.tool_use_id, event.result);
  context.fixed.recorder.note({ type: 'tool', result: event.result });
}

/**
 * Appends a complete assistant message to the history; returns the session's requests and usage
 * with the step's (a retried step made more than one request, and its retries spent tokens too).
 */
function commitResponseTo(context: SessionContext, event: SessionEvent): Pick<SessionContext, 'requests' | 'usage'> {
  const response = responseOf(event);
  const blocks = nonEmptyBlocks(response.content);
  appendAssistantBlocks(context.messages, blocks);
  if (blocks.length > 0) context.fixed.recorder.record({ type: 'message', role: 'assistant', content: blocks });
  // (Budgets counted these tokens as they streamed: see `requestModel`.)
  const retried = event.type === 'model.done' && event.requests !== undefined ? { requests: event.requests, lost: event.lost ?? ZERO_USAGE } : undefined;
  const usage = addUsage(context.usage, retried ? addUsage(response.usage, retried.lost) : response.usage);
  context.fixed.recorder.record({
    type: 'usage',
    request: response.usage,
    session: usage,
    stopReason: response.stopReason,
    ...(response.incompleteToolUseIds.length > 0 ? { incomplete: response.incompleteToolUseIds } : {}),
    ...(retried ? { requests: retried.requests, lost: retried.lost } : {}),
  });
  return { requests: context.requests + (retried?.requests ?? 1), usage };
}

/** The bytes of `session`'s next request: its history, and the results and messages waiting for it. */
function nextRequestBytes(session: AnyActorRef, admitter: RequestAdmitter): number {
  const context = (session.getSnapshot() as { context?: SessionContext } | undefined)?.context;
  return context ? admitter.nextRequestBytes(context.messages, context.inbox, context.pendingUser) : 0;
}

/** The model step of `streaming`: the request as the history stands, and how its usage is counted. */
function modelStepInput(context: SessionContext): StreamModelInput {
  const meter = context.options.budget;
  const { agent } = context;
  const { budgetScope } = context.fixed;
  const model = context.options.model;
  return {
    provider: context.options.provider,
    request: {
      agent,
      system: context.fixed.system,
      messages: context.messages,
      tools: context.fixed.toolbox.specs,
      ...(model === undefined ? {} : { model }),
    },
    listener: context.options.listener,
    retry: context.options.retry,
    stallTimeoutMs: context.options.stallTimeoutMs,
    onRetry: (info) => context.fixed.recorder.record({ type: 'retry', ...info }),
    // Counted as the stream reports it, so a budget is reached before the response completes.
    onUsage: (added) => meter.charge(agent, model, budgetScope, added),
  };
}

/** Whether results arrived for the turn's first request while it waited for the journal (see `joinTurn`). */
function lateResultsOf(context: SessionContext): (() => boolean) | undefined {
  // Results are appended to this very array until the turn's first request leaves.
  const inbox = context.inbox;
  return context.joinable && context.steps === 1 ? () => inbox.length > 0 : undefined;
}

/** Counts requests that ended with nothing to keep (failed, or aborted: see the `lost` record). */
function countLost(context: SessionContext, spent: RequestSpend | undefined): Partial<Pick<SessionContext, 'requests' | 'usage'>> {
  if (!spent) return {};
  context.fixed.recorder.lost(spent);
  return { requests: context.requests + spent.requests, usage: addUsage(context.usage, spent.usage) };
}

/**
 * Commits the batch's results in model order as one user message. A `wait_for_agents` call still
 * open (its condition now holds) is answered here, and the inbox follows the results in the same
 * message, each result once (the inbox is emptied in place). Messages sent to a sub-agent while it
 * worked (steering: `messageAgent`) follow, each once: the end of a step's batch is its next
 * boundary. Returns what it delivered, emptied. With `fill` (a failure, a cancellation) the wait is
 * answered with it and the inbox and messages stay.
 */
function commitBatchTo(context: SessionContext, fill?: string): Partial<Pick<SessionContext, 'inbox' | 'pendingUser'>> {
  const batch = context.batch;
  if (!batch || batch.committed) return {};
  const waited = fill === undefined && batch.wait !== null && !batch.results.has(batch.wait.id);
  if (waited && batch.wait) batch.results.set(batch.wait.id, okResult(batch.wait.id, waitAnswer(context, batch.wait.until)));
  const results: ToolResultBlock[] = batch.plan.map((call) => batch.results.get(call.id) ?? errorResult(call.id, fill ?? 'no result'));
  batch.committed = true;
  const inbox = waited && context.inbox.length > 0;
  // The root's messages wait for the end of its turn (readyForUser), as they always have.
  const steering = fill === undefined && context.agent.depth > 0 && context.pendingUser.length > 0;
  const blocks: UserBlock[] = [...results];
  if (inbox) blocks.push(text(renderInbox(context.inbox)));
  if (steering) for (const message of context.pendingUser) if (message.length > 0) blocks.push(text(message));
  appendUserBlocks(context.messages, blocks);
  // One record: a resume replays the delivery with the results (see restoreRun), so nothing is delivered twice.
  context.fixed.recorder.record({ type: 'message', role: 'user', content: blocks });
  if (inbox) context.inbox.length = 0;
  return { ...(inbox ? { inbox: [] } : {}), ...(steering ? { pendingUser: [] } : {}) };
}

/** The `wait_for_agents` result: how many finished (their results follow it), how many still run. */
function waitAnswer(context: SessionContext, until: 'all' | 'any'): string {
  const finished = context.inbox.length;
  const running = context.children.size;
  const done = `${finished} sub-agent${finished === 1 ? '' : 's'} finished${finished > 0 ? '; their results follow' : ''}`;
  return running > 0 ? `${done}. ${running} still running (waited until ${until}).` : `${done}.`;
}

/** The open batch's wait can end: every child has delivered ('all'), or one has ('any'). */
function waitSatisfied(context: SessionContext): boolean {
  const wait = context.batch?.wait;
  if (!wait) return true;
  return context.children.size === 0 || (wait.until === 'any' && context.inbox.length > 0);
}

/**
 * Answers any `tool_use` of the last assistant message that has no result yet: a failure or a
 * cancellation must still leave a history the API accepts.
 */
function closeOpenCalls(context: SessionContext, reason: string): void {
  if (context.batch && !context.batch.committed) {
    commitBatchTo(context, reason);
    return;
  }
  const last = context.messages[context.messages.length - 1];
  if (last?.role !== 'assistant') return;
  const open = toolUses(last.content);
  if (open.length === 0) return;
  const results = open.map((call) => errorResult(call.id, reason));
  appendUserBlocks(context.messages, results);
  context.fixed.recorder.record({ type: 'message', role: 'user', content: results });
}

function finish(context: SessionContext, outcome: AgentOutcome, extra: { text?: string; reason?: string; value?: unknown } = {}): AgentResult {
  const totalUsage = addUsage(context.usage, context.childUsage);
  const result: AgentResult = {
    name: context.agent.name,
    outcome,
    text: extra.text ?? '',
    ...(extra.reason === undefined ? {} : { reason: extra.reason }),
    ...('value' in extra ? { value: extra.value } : {}),
    usage: totalUsage,
  };
  context.fixed.recorder.record({
    type: 'outcome',
    outcome,
    text: result.text,
    ...(extra.reason === undefined ? {} : { reason: extra.reason }),
    ...('value' in extra ? { value: extra.value } : {}),
    usage: context.usage,
    totalUsage,
  });
  context.fixed.recorder.flush();
  return result;
}

/** The inbox and queued user messages become (or join) the turn's user message; the caller empties both. */
function deliverTurnInput(context: SessionContext): void {
  const blocks: UserBlock[] = [];
  if (context.inbox.length > 0) blocks.push(text(renderInbox(context.inbox)));
  for (const message of context.pendingUser) if (message.length > 0) blocks.push(text(message));
  appendUserBlocks(context.messages, blocks);
  context.fixed.recorder.record({ type: 'message', role: 'user', content: blocks });
}

/** A child's result enters the inbox; returns the crew to stop, if the child was its last. */
function acceptChildResult(context: SessionContext, actorId: string, result: AgentResult): { update: Partial<SessionContext>; emptyCrew: string | undefined } {
  const removed = context.children.remove(actorId);
  context.inbox.push(result);
  context.fixed.recorder.record({ type: 'inbox', actorId, result });
  return { update: { childUsage: addUsage(context.childUsage, result.usage) }, emptyCrew: removed?.emptyCrew };
}

const latchLists = new WeakMap<ResolvedOptions, { root?: readonly NudgeLatch[]; sub?: readonly NudgeLatch[] }>();

/** The built-in latches and the host's, in order; one list per options object and kind of session. */
function latchesFor(options: ResolvedOptions, subAgent: boolean): readonly NudgeLatch[] {
  let lists = latchLists.get(options);
  if (!lists) latchLists.set(options, (lists = {}));
  const kind = subAgent ? 'sub' : 'root';
  return (lists[kind] ??= [...(subAgent ? [replyReminder] : []), truncationReminder(options.truncationBudget), ...options.nudges]);
}

/** At rest: a log closed in this snapshot records that the session stopped there, not that it was cancelled. */
function atRest(snapshot: unknown): boolean {
  const s = snapshot as { value?: unknown; context?: SessionContext };
  return s.value === 'readyForUser' && s.context !== undefined && isQuiet(s.context) && s.context.pendingUser.length === 0;
}

/** The session's effects, made as it first needs them (none for a stand-in computing pure transitions). */
function effectsFor(self: AnyActorRef, context: SessionContext): SessionEffects | undefined {
  return effectsOf(self, () => {
    const journal = context.options.journal;
    const { recorder, admitter } = context.fixed;
    return { recorder, atRest, onClose: () => admitter.leave(), ...(journal ? { barrier: () => journal.barrier() } : {}) };
  });
}

/** What a tool call in flight at a crash is answered with, unless its tool is idempotent. */
function unknownEffectMessage(toolName: string): string {
  return (
    `tool '${toolName}' was running when the process stopped, so its effect is unknown: it may or may not have ` +
    'taken effect, and it was not run again. Check before you repeat it.'
  );
}

/**
 * The context of a resumed session (see `RestoredSession`). Why not XState's own persistence
 * (`getPersistedSnapshot`, `createActor(logic, { snapshot })`): restoring a snapshot restarts
 * nothing that was in flight and cannot say which tool calls had settled; `spawn` takes no
 * snapshot, so sub-agents could not be restored that way at all; and the context holds live
 * objects (provider, tools, log). The journal is the durable state instead, and a resumed session
 * is made from it like a new one, through its input, at every depth.
 */
function resumedContext(made: MadeContext, restore: RestoredSession, spawn: Spawner): SessionContext {
  const {
    options,
    fixed: { recorder, toolbox },
  } = made;
  recorder.record({ type: 'resumed', state: restore.state, ...(restore.alone ? { alone: true as const } : {}) });
  const children = new ChildRegistry();
  children.restoreUses(restore.uses);
  const crews = new Map<string, CrewMember<SessionInput>[]>();
  for (const child of restore.children) {
    const live = children.add(child.actorId, child.agent);
    let members = crews.get(live.crewId);
    if (!members) crews.set(live.crewId, (members = []));
    const input = child.restore ? { agent: child.agent, restore: child.restore } : { agent: child.agent, task: child.task };
    const remote = remoteMember(options, made.fixed.budgetScope, {
      actorId: child.actorId,
      parent: made.agent,
      agent: child.agent,
      task: child.task,
      ...(child.profile === undefined ? {} : { profile: child.profile }),
      ...(child.budget === undefined ? {} : { budget: child.budget }),
    });
    members.push({
      actorId: child.actorId,
      input: inheritOptions(childOptions(options, child.profile), { ...input, ...budgetsFor(made.fixed.budgetScope, child.budget) }),
      ...(remote ? { remote } : {}),
    });
  }
  children.closeCrew();
  for (const [crewId, members] of crews) spawn('crew', { id: crewId, input: { members } });
  // Results of children that finished while their delivery was lost with the process: delivered now, once.
  const inbox = [...restore.inbox];
  let childUsage = restore.childUsage;
  for (const { actorId, result } of restore.undelivered) {
    inbox.push(result);
    childUsage = addUsage(childUsage, result.usage);
    recorder.record({ type: 'inbox', actorId, result });
  }
  return {
    ...made,
    messages: [...restore.messages],
    pendingUser: [...restore.pendingUser],
    inbox,
    steps: restore.steps,
    batch: restore.batch && resumedBatch(restore.batch, toolbox, children, recorder, options.approvals),
    children,
    spawned: restore.spawned,
    latchCounts: { ...restore.latchCounts },
    requests: restore.requests,
    usage: restore.usage,
    childUsage,
    joinable: false,
    resumeAt: restore.state,
  };
}

/**
 * The open batch of a resumed session: the calls answered before the crash keep their answers;
 * a call that was running is run again if its tool is idempotent, and answered as of unknown
 * effect otherwise. That answer is journaled, so a second crash does not change it. A call still
 * waiting for a person whose tool was approved `always` while the run was stopped (`exarch
 * approve`) is approved here, not on entering `awaitingApproval`: a resumed session's entry
 * actions run after its first macrostep, so the state's `always` transition would not see it
 * answered, and a session whose every call was so approved would wait forever.
 */
function resumedBatch(
  restored: NonNullable<RestoredSession['batch']>,
  toolbox: Toolbox,
  children: ChildRegistry,
  recorder: SessionRecorder,
  approvals: ApprovalDesk,
): Batch {
  const plan = planBatch(restored.content, toolbox, new Set(restored.incomplete));
  const results = new Map(restored.results.map((result) => [result.tool_use_id, result]));
  let reply: Batch['reply'] = null;
  let wait: Batch['wait'] = null;
  const cancels: LiveChild[] = [];
  const answer = (result: ToolResultBlock): void => {
    results.set(result.tool_use_id, result);
    recorder.note({ type: 'tool', result });
  };
  const waitingFor = new Set(restored.awaiting ?? []);
  const approved = new Set(restored.approved ?? []);
  const awaiting: Batch['awaiting'] = new Map();
  for (const call of plan) {
    const settled = results.get(call.id);
    if (call.kind === 'reply' && reply === null) reply = { result: call.result };
    // Still waiting for a person, or approved and not yet started: nothing of it ran.
    if (!settled && waitingFor.has(call.id)) {
      const tool = call.kind === 'run' ? call.name : '';
      if (approvals.alwaysApproved(tool)) recorder.note({ type: 'approval', callId: call.id, tool, decision: 'approve' });
      else awaiting.set(call.id, { tool, input: inputOf(restored.content, call.id) });
    }
    if (!settled && (waitingFor.has(call.id) || approved.has(call.id))) continue;
    if (call.kind === 'cancel_agent' && settled && settled.is_error !== true) {
      const child = children.byNameOf(call.name);
      if (child) cancels.push(child);
    }
    if (settled) continue;
    if (call.kind === 'wait') {
      // Still waiting when the process stopped: it waits on (for the children taken up with it).
      wait ??= { id: call.id, until: call.until };
      continue;
    }
    if (call.kind === 'run') {
      if (!call.idempotent) answer(errorResult(call.id, unknownEffectMessage(call.name)));
    } else {
      answer(call.kind === 'answered' ? call.result : errorResult(call.id, 'not answered: the process stopped before this call was handled'));
    }
  }
  const stepEnd = { stopReason: restored.stopReason, stepText: textOf(restored.content) };
  return { plan, results, reply, cancels, wait, awaiting, stepEnd, committed: false, cancelsSent: false };
}

/** What a parent passes a sub-agent of its budgets: the one it gives it, and the one it spends within. */
function budgetsFor(enclosing: BudgetScope | undefined, own: AgentBudget | undefined): Pick<SessionInput, 'subtreeBudget' | 'enclosingBudget'> {
  return { ...(own === undefined ? {} : { subtreeBudget: own }), ...(enclosing === undefined ? {} : { enclosingBudget: enclosing }) };
}

/**
 * A sub-agent that runs elsewhere (see `RemoteChildren`), or undefined for one that runs here: a
 * session that spends within a budget keeps its subtree in its own process, where the budget is
 * kept.
 */
function remoteMember(options: ResolvedOptions, scope: BudgetScope | undefined, spec: RemoteChildSpec): RemoteMemberInput | undefined {
  return options.remoteChildren && scope === undefined ? { remote: options.remoteChildren, spec } : undefined;
}

/** The input of the `tool_use` block `id` of a response. */
function inputOf(content: readonly AssistantBlock[], id: string): Readonly<Record<string, unknown>> {
  for (const block of content) if (block.type === 'tool_use' && block.id === id) return block.input;
  return {};
}

/**
 * The policy's answer per `model.done` event. The `needsApproval` guard and `openBatch` both need
 * it within one transition, and a host's predicate is asked once per call: it may prompt, log or
 * count. Keyed by the event, made once per delivery, not by the response: a provider may hand the
 * same response object to two sessions, whose agents the predicate may tell apart.
 */
const gatedCallsOf = new WeakMap<SessionEvent, ToolUseBlock[]>();

/** Host tool calls of the response in `event` that must wait for a person (the approval policy; see src/engine/approvals.ts). */
function callsNeedingApproval(context: SessionContext, event: SessionEvent): ToolUseBlock[] {
  const known = gatedCallsOf.get(event);
  if (known) return known;
  const response = responseOf(event);
  const gated: ToolUseBlock[] = [];
  for (const block of response.content) {
    if (block.type !== 'tool_use' || !context.fixed.toolbox.tools.has(block.name) || response.incompleteToolUseIds.includes(block.id)) continue;
    if (response.invalidToolInputs?.[block.id] !== undefined) continue;
    if (context.options.approvals.needs({ tool: block.name, input: block.input, agent: context.agent })) gated.push(block);
  }
  gatedCallsOf.set(event, gated);
  return gated;
}

/** Why the session runs: its first user message (a sub-agent's holds its task verbatim; the root's is the run's task). */
function taskOf(context: SessionContext): string {
  const first = context.messages.find((message) => message.role === 'user');
  if (!first) return '';
  return first.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/** Throws a one-line error for input a session cannot start with. */
export function validateSessionInput(input: SessionInput): void {
  const options = resolveOptions(input);
  const agent = input.agent ?? ROOT_AGENT;
  buildToolbox(options.tools, sessionAxes(agent.depth, options), options.protocol);
  if (input.history) assertToolPairing(input.history);
  if (input.task !== undefined && typeof input.task !== 'string') throw new TypeError('exarch: `task` must be a string');
  checkAgentBudget(input.subtreeBudget);
}

/** Delivers the inbox and queued user messages as one user turn, and restarts the turn's counts. */
function startTurn({ context }: SessionArgs): Partial<SessionContext> {
  deliverTurnInput(context);
  const latchCounts: Record<string, LatchCount> = {};
  for (const [id, count] of Object.entries(context.latchCounts)) latchCounts[id] = { turn: 0, total: count.total };
  return { inbox: [], pendingUser: [], steps: 0, latchCounts, joinable: true };
}

/**
 * Results that arrived after the turn started but before its first request left (a durable
 * run's request waits for the journal) join that turn's user message: one request for them all,
 * never a second request made for them alone. User messages queued meanwhile join too, as at
 * any turn start (a resume reads the joined message as one).
 */
function joinTurn({ context }: SessionArgs): Partial<SessionContext> {
  deliverTurnInput(context);
  return { inbox: [], pendingUser: [] };
}

/** Starts the model request its budgets admitted (see src/session/sessionEffects.ts); it answers with `model.done` or `model.error`. */
function requestModel({ context, self }: ActorArgs): void {
  const admission = context.fixed.admitter.take();
  if (!admission) return;
  context.options.budget.requestStarting(context.agent);
  effectsFor(self, context)?.requestModel(modelStepInput(context), lateResultsOf(context), admission);
}

/** Starts the batch's runnable calls; they answer with `tool.settled` and, last, `batch.drained`. */
function runBatch({ context, self }: ActorArgs): void {
  const calls: RunnableCall[] = [];
  const results = context.batch?.results;
  for (const call of context.batch?.plan ?? []) {
    // A resumed batch runs only the calls that have no result yet.
    if (call.kind === 'run' && !results?.has(call.id))
      calls.push({ id: call.id, name: call.name, run: call.run, timeoutMs: call.timeoutMs ?? context.options.toolTimeoutMs, readOnly: call.readOnly });
  }
  effectsFor(self, context)?.runTools({
    agent: context.agent,
    calls,
    outputCap: context.options.toolOutputCap,
    // Stopped mid-batch from outside: every call still gets its answer.
    onAbandon: () => closeOpenCalls(context, 'cancelled'),
  });
}

/** The journal's mark of a wait: a resume takes the session up in `waitingForAgents` again. */
/**
 * Notes the wait, unless it already holds: the session then leaves in the same macrostep, its
 * commit is the record that counts, and (a resumed session's entry actions run when it starts,
 * after the commit its first macrostep wrote) a `waiting` after it would show a wait that is over.
 */
function noteWaiting({ context }: SessionArgs): void {
  if (!waitSatisfied(context)) context.fixed.recorder.note({ type: 'waiting' });
}

/**
 * Commits the response and plans its batch, in one assign (each assign makes a snapshot).
 * Protocol calls are answered here, in model order: `agent` spawns a child, `cancel_agent`
 * queues a cancel (see `sendCancels`), the first `reply` is staged. Other tools run on the
 * session's effects.
 */
function openBatch({ context, event, spawn }: SessionArgs & { readonly spawn: Spawner }): Partial<SessionContext> {
  const response = responseOf(event);
  const { requests, usage } = commitResponseTo(context, event);
  const plan = planBatch(response.content, context.fixed.toolbox, new Set(response.incompleteToolUseIds), response.invalidToolInputs);
  const results = new Map<string, ToolResultBlock>();
  let reply: Batch['reply'] = null;
  let wait: Batch['wait'] = null;
  const children = context.children;
  let spawned = context.spawned;
  const crews = new Map<string, CrewMember<SessionInput>[]>();
  const cancels: LiveChild[] = [];
  const gated = new Map(callsNeedingApproval(context, event).map((block) => [block.id, block]));
  const awaiting: Batch['awaiting'] = new Map();
  for (const call of plan) {
    switch (call.kind) {
      case 'answered':
        results.set(call.id, call.result);
        break;
      case 'run': {
        const block = gated.get(call.id);
        if (block) awaiting.set(call.id, { tool: block.name, input: block.input });
        break;
      }
      case 'agent': {
        if (children.byNameOf(call.name)) {
          results.set(call.id, errorResult(call.id, `a sub-agent named '${call.name}' is still running; pick another name or cancel it first`));
          break;
        }
        if (call.budget?.cost !== undefined && !context.options.budget.priced) {
          results.set(
            call.id,
            errorResult(call.id, "invalid input for tool 'agent': budget.cost: this run has no prices to count US$ with; give budget.tokens instead"),
          );
          break;
        }
        spawned += 1;
        const use = children.nextUse(call.name);
        const agent = childIdentity(context.agent, call.name, use);
        // The child's id in this session (its deliveries carry it): its crew runs it under a
        // small local id and renames its events to this one (see machines/crew.ts).
        const actorId = String(spawned);
        const child = children.add(actorId, agent);
        let members = crews.get(child.crewId);
        if (!members) crews.set(child.crewId, (members = []));
        const remote = remoteMember(context.options, context.fixed.budgetScope, {
          actorId,
          parent: context.agent,
          agent,
          task: call.task,
          ...(call.type === undefined ? {} : { profile: call.type }),
          ...(call.budget === undefined ? {} : { budget: call.budget }),
        });
        members.push({
          actorId,
          input: inheritOptions(childOptions(context.options, call.type), {
            task: call.task,
            agent,
            ...budgetsFor(context.fixed.budgetScope, call.budget),
          }),
          ...(remote ? { remote } : {}),
        });
        context.fixed.recorder.record({
          type: 'spawn',
          name: call.name,
          id: agent.id,
          actorId,
          task: call.task,
          ...(call.type === undefined ? {} : { profile: call.type }),
          ...(call.budget === undefined ? {} : { budget: call.budget }),
        });
        results.set(
          call.id,
          okResult(call.id, `Sub-agent '${call.name}' started. Its result will arrive later as a message beginning with [agent '${call.name}' …].`),
        );
        break;
      }
      case 'cancel_agent': {
        const child = children.byNameOf(call.name);
        if (!child) {
          results.set(call.id, errorResult(call.id, `no running sub-agent named '${call.name}'`));
          break;
        }
        cancels.push(child);
        results.set(call.id, okResult(call.id, `Sub-agent '${call.name}' is being cancelled; [agent '${call.name}' was cancelled] will arrive.`));
        break;
      }
      case 'wait':
        if (wait) {
          results.set(call.id, errorResult(call.id, 'wait_for_agents was already called in this response; the first one stands'));
          break;
        }
        wait = { id: call.id, until: call.until };
        break;
      case 'reply':
        if (reply) {
          results.set(call.id, errorResult(call.id, 'reply was already called in this response; the first reply stands'));
          break;
        }
        reply = { result: call.result };
        results.set(call.id, okResult(call.id, 'Reply recorded. Your session ends once the other calls of this response have run.'));
        break;
    }
  }
  // Nothing to wait for (no sub-agent runs, counting those this batch started): answered at once.
  if (wait && children.size === 0) {
    results.set(wait.id, okResult(wait.id, 'No sub-agents are running: there was nothing to wait for.'));
    wait = null;
  }
  // A durable run keeps every answer given as the batch opened: a resume cannot recompute
  // those of `agent` and `cancel_agent`, which depended on the children live at the time.
  if (context.fixed.recorder.durable) for (const result of results.values()) context.fixed.recorder.note({ type: 'tool', result });
  // Sub-agents live in crews (machines/crew.ts), each spawned with its share of this batch.
  children.closeCrew();
  for (const [crewId, members] of crews) spawn('crew', { id: crewId, input: { members } });
  return {
    requests,
    usage,
    batch: { plan, results, reply, cancels, wait, awaiting, stepEnd: stepEndOf(response), committed: false, cancelsSent: false },
    spawned,
  };
}

/**
 * Entering `awaitingApproval`: the waiting calls are journaled (a resume waits on) and go to the
 * tree's desk, which tells the host. (A resumed call of a tool approved `always` meanwhile was
 * approved by `resumedBatch`.)
 */
function requestApprovals({ context, self }: ActorArgs): void {
  const batch = context.batch;
  if (!batch || batch.awaiting.size === 0) return;
  const desk = context.options.approvals;
  context.fixed.recorder.note({ type: 'awaiting', calls: [...batch.awaiting.keys()] });
  const task = taskOf(context);
  for (const [callId, call] of batch.awaiting)
    desk.request({ type: 'approval.requested', callId, tool: call.tool, input: call.input, agent: context.agent, task }, self);
}

/** A person answered one waiting call: a denial is its `is_error` result; an approval lets it run. */
function answerApproval({ context, event }: SessionArgs): void {
  if (event.type !== 'approval.answer') return;
  const call = context.batch?.awaiting.get(event.callId);
  if (!context.batch || !call) return;
  context.batch.awaiting.delete(event.callId);
  context.options.approvals.settle(event.callId);
  const reason = event.reason === undefined ? {} : { reason: event.reason };
  context.fixed.recorder.note({ type: 'approval', callId: event.callId, tool: call.tool, decision: event.decision, ...reason });
  if (event.decision === 'deny') context.batch.results.set(event.callId, errorResult(event.callId, denialMessage(call.tool, event.reason)));
}

/** Leaving `awaitingApproval` other than by its answers (a cancel): the desk stops offering its calls. */
function withdrawApprovals({ context }: SessionArgs): void {
  for (const callId of context.batch?.awaiting.keys() ?? []) context.options.approvals.settle(callId);
}

/** Takes the last result (it comes with `batch.drained`) and commits the batch. */
function commitBatch({ context, event }: SessionArgs): Partial<SessionContext> {
  settleCallIn(context, event);
  // A delivered inbox is emptied in place; a new array makes the change visible in the snapshot.
  return commitBatchTo(context);
}

/** Appends the chosen latch's reminder to the history (merged into a trailing user message). */
function applyNudge({ context, event }: SessionArgs, params: { on: NudgeLatch['on'] }): Partial<SessionContext> {
  const view = nudgeView(context, stepEndFor(context, event));
  const latch = pickNudge(context.fixed.latches, params.on, context.latchCounts, view);
  if (!latch) throw new Error(`exarch: a ${params.on} nudge was chosen but no latch fires`);
  const count = context.latchCounts[latch.id] ?? { turn: 0, total: 0 };
  const message = nudgeMessage(latch, { ...view, firedThisTurn: count.turn, firedTotal: count.total });
  appendUserBlocks(context.messages, [text(message)]);
  context.fixed.recorder.record({ type: 'nudge', latch: latch.id, text: message });
  return { latchCounts: { ...context.latchCounts, [latch.id]: { turn: count.turn + 1, total: count.total + 1 } } };
}

/** Why the session fails: the reason given, the refusal, the error, or the event it failed on. */
function fail({ event }: SessionArgs, params: { reason?: string }): Partial<SessionContext> {
  if (params.reason) return { failure: params.reason };
  if (event.type === 'model.done') return { failure: REFUSAL_REASONS[responseOf(event).stopReason] ?? 'model stopped' };
  if ('error' in event) return { failure: describeError(event.error) };
  return { failure: `failed on ${event.type}` };
}

/** The staged reply, rendered and clipped, is the session's result (`empty` if it renders to nothing). */
function finishReplied({ context }: SessionArgs): Partial<SessionContext> {
  const reply = context.batch?.reply;
  const rendered = clip(renderValue(reply?.result), context.options.replyCap);
  // A typed reply also hands up its parsed value (the host's `AgentResult.value`).
  const value = context.options.reply !== undefined && reply ? { value: reply.result } : {};
  return { result: finish(context, rendered.length > 0 ? 'replied' : 'empty', { text: rendered, ...value }) };
}

/** Ends `capped`: by its budget (spent, or capping it now) or by its step cap. */
function finishCapped({ context, event }: SessionArgs): Partial<SessionContext> {
  const budget = event.type === 'budget.spent' || context.options.budget.caps(context.agent, context.fixed.budgetScope);
  const reason = budget ? 'budget' : `step cap of ${context.options.maxSteps} reached`;
  return { result: finish(context, 'capped', { reason }) };
}

/** Ends `cancelled`, with the reason the cancel gave. */
function finishCancelled({ context, event }: SessionArgs): Partial<SessionContext> {
  return { result: finish(context, 'cancelled', event.type === 'cancel' && event.reason ? { reason: event.reason } : {}) };
}

/** What the chart asks of a session as it takes an event: its guards, by name. */
const sessionGuards = {
  fromSubAgent: ({ event }: SessionArgs) => 'actorId' in event && /^\d+$/.test(event.actorId),
  // wake 'all': results wait in the inbox until the last running sub-agent has delivered.
  hasTurnInput: ({ context }: SessionArgs) =>
    context.pendingUser.length > 0 || (context.inbox.length > 0 && (context.options.wake === 'each' || context.children.size === 0)),
  capReached: ({ context }: SessionArgs) => capReached(context),
  // The turn's first request has not left yet (`model.starting`), and results arrived since the
  // turn started. (A user message alone waits for the next turn, as it does during any request.)
  lateResults: ({ context }: SessionArgs) => context.joinable && context.steps === 1 && context.inbox.length > 0,
  refused: ({ event }: SessionArgs) => responseOf(event).stopReason in REFUSAL_REASONS,
  hasToolCalls: ({ event }: SessionArgs) => responseOf(event).content.some((b) => b.type === 'tool_use'),
  truncated: ({ context, event }: SessionArgs) => stepEndFor(context, event).stopReason === 'max_tokens',
  paused: ({ event }: SessionArgs) => responseOf(event).stopReason === 'pause_turn',
  truncationReminderLeft: ({ context, event }: SessionArgs) => latchFor(context, 'max_tokens', stepEndFor(context, event)) !== undefined,
  endTurnLatchFires: ({ context, event }: SessionArgs) => latchFor(context, 'end_turn', stepEndFor(context, event)) !== undefined,
  quietSubAgent: ({ context }: SessionArgs) => isSubAgent(context) && isQuiet(context),
  replyStaged: ({ context }: SessionArgs) => context.batch?.reply != null,
  waitPending: ({ context }: SessionArgs) => !waitSatisfied(context),
  waitSatisfied: ({ context }: SessionArgs) => waitSatisfied(context),
  needsApproval: ({ context, event }: SessionArgs) => callsNeedingApproval(context, event).length > 0,
  approvalsAnswered: ({ context }: SessionArgs) => (context.batch?.awaiting.size ?? 0) === 0,
  resumesAt: ({ context }: SessionArgs, params: { state: ResumeState }) => context.resumeAt === params.state,
};

/** A session's context as it starts: new, or taken up from its journal (`input.restore`). */
function sessionContext({ input, spawn, self }: { input: SessionInput; spawn: Spawner; self: AnyActorRef }): SessionContext {
  const options = resolveOptions(input);
  const restore = input.restore;
  const agent = restore?.agent ?? input.agent ?? ROOT_AGENT;
  const axes = sessionAxes(agent.depth, options);
  const toolbox = buildToolbox(options.tools, axes, options.protocol);
  if (input.history) assertToolPairing(input.history);
  const journal = options.journal?.open(agent.id);
  const recorder = new SessionRecorder(options.logs.open(agent), journal, restore && { own: restore.usage, subtree: restore.childUsage });
  const system = typeof options.system === 'string' ? options.system : (options.system ?? defaultSystemPrompt)(agent, axes.spawns);
  const latches = latchesFor(options, axes.replies);
  if (restore?.approvedTools) options.approvals.approveAlways(restore.approvedTools);
  const meter = options.budget;
  const budgetScope = input.subtreeBudget ? meter.scope(agent, input.subtreeBudget, input.enclosingBudget, self) : input.enclosingBudget;
  const admitter = new RequestAdmitter(meter, agent, budgetScope, options.model, system, toolbox.specs);
  // The tree's budget keeps room for the root's next request, as it would leave now.
  if (agent.depth === 0) meter.attachRoot(self, () => nextRequestBytes(self, admitter), options.model);
  const fixed: SessionFixed = { toolbox, system, latches, recorder, budgetScope, admitter };
  if (restore) {
    // What its journal committed counts toward its budgets again (its live sub-agents add theirs).
    meter.seed(agent, options.model, budgetScope, restore.usage, restore.childUsage);
    return resumedContext({ options, agent, fixed, failure: null, result: null }, restore, spawn);
  }
  recorder.record({ type: 'session', agent, ...(input.task === undefined ? {} : { task: input.task }) });
  // A literal rather than a spread of the shared fields: this runs once per sub-agent.
  return {
    options,
    agent,
    fixed,
    messages: input.history ? [...input.history] : [],
    pendingUser: input.task === undefined ? [] : [input.task],
    inbox: [],
    steps: 0,
    batch: null,
    children: new ChildRegistry(),
    spawned: 0,
    latchCounts: {},
    requests: 0,
    usage: ZERO_USAGE,
    childUsage: ZERO_USAGE,
    failure: null,
    result: null,
    joinable: false,
    resumeAt: null,
  };
}

const machineSetup = setup({
  types: {
    context: {} as SessionContext,
    input: {} as SessionInput,
    events: {} as SessionEvent,
    output: {} as AgentResult,
  },
  actors: {
    crew: crewMachine,
  },
  guards: sessionGuards,
  actions: {
    startTurn: assign(startTurn),
    joinTurn: assign(joinTurn),
    countStep: assign({ steps: ({ context }) => context.steps + 1 }),
    requestModel,
    /** The request again, with input that joined its turn just before it left: the room it was admitted with goes with it. */
    requestModelAgain: ({ context, self }) => effectsFor(self, context)?.requestModel(modelStepInput(context), lateResultsOf(context), 'keep'),
    /** The request that was about to leave waits in the budget's queue instead: it was not a step. */
    uncountStep: assign({ steps: ({ context }) => context.steps - 1 }),
    /** Out of the budget's queue; room it was handed goes back unless it now makes its request. */
    leaveBudgetQueue: ({ context, event }) => context.fixed.admitter.leave(event.type === 'budget.room'),
    runBatch,
    noteWaiting,
    /** While waiting for sub-agents: a stop from outside still answers the open batch's calls. */
    holdBatch: ({ context, self }) => effectsFor(self, context)?.holdBatch(() => closeOpenCalls(context, 'cancelled')),
    releaseBatch: ({ context, self }) => effectsFor(self, context)?.releaseBatch(),
    /** Aborts the model request and abandons the tool batch, whichever runs; an aborted request that had left is counted. */
    abortEffects: assign(({ context, self }) => countLost(context, effectsFor(self, context)?.abort('cancelled'))),
    /** A failed step's requests were served all the same. */
    countFailedRequests: assign(({ context, event }) => countLost(context, event.type === 'model.error' ? event.spent : undefined)),
    /**
     * Rest until the next turn of the event loop. In `readyForUser` it is armed again by each result
     * that arrives, so the turn starts with everything that arrived by then.
     */
    armTick: ({ context, self }) => effectsFor(self, context)?.armTick(),
    /** Commits a complete assistant message; nothing of a failed or aborted stream is ever committed. */
    commitResponse: assign(({ context, event }) => ({ ...commitResponseTo(context, event), batch: null })),
    openBatch: assign(openBatch),
    requestApprovals,
    answerApproval,
    withdrawApprovals,
    /** Journaled before the approved calls start: a resume then treats them as calls that were running. */
    noteDispatching: ({ context }) => context.fixed.recorder.note({ type: 'dispatching' }),
    settleCall: ({ context, event }) => settleCallIn(context, event),
    commitBatch: assign(commitBatch),
    applyNudge: assign(applyNudge),
    queueUserMessage: assign({
      pendingUser: ({ context, event }) => {
        if (event.type !== 'user.message') return context.pendingUser;
        if (event.journaled !== true) context.fixed.recorder.note({ type: 'queued', text: event.text });
        return [...context.pendingUser, event.text];
      },
    }),
    closeOpenCalls: ({ context }, params: { reason: string }) => closeOpenCalls(context, params.reason),
    flushLog: ({ context }) => context.fixed.recorder.flush(),
    fail: assign(fail),
    finishReplied: assign(finishReplied),
    finishEmpty: assign(({ context }) => ({ result: finish(context, 'empty') })),
    finishCapped: assign(finishCapped),
    finishFailed: assign(({ context }) => ({ result: finish(context, 'failed', { reason: context.failure ?? 'unknown failure' }) })),
    finishCancelled: assign(finishCancelled),
  },
})
  // Actions that enqueue others (raise an event, send to a crew, stop one): typed against the
  // actions above, so declared after them (one `setup` typing both fails to infer their params).
  .extend({
    actions: {
      /**
       * No request leaves before its budgets admit it (see `RequestAdmitter`). One that must wait for
       * a running request to end makes the session `queued` (raised, so no snapshot shows it
       * streaming); one that never can be admitted ends it `capped` (a crossing already sent it
       * that, or cancels it; this covers one that began just after). Resolved in order with the
       * entry's other actions even while the actor starts (a plain action would then be deferred).
       */
      admitRequest: enqueueActions(({ context, self, enqueue }) => {
        const { admitter } = context.fixed;
        const answer = admitter.ask(context.messages);
        if (answer === 'spent') {
          queueMicrotask(() => self.send({ type: 'budget.spent' } satisfies BudgetSpentEvent));
          return;
        }
        if (answer === 'wait') {
          admitter.wait(
            context.messages,
            () => self.send({ type: 'budget.room' } satisfies BudgetRoomEvent),
            () => self.send({ type: 'budget.spent' } satisfies BudgetSpentEvent),
          );
          enqueue.raise({ type: 'budget.wait' } satisfies BudgetWaitEvent);
        }
      }),
      /** Sends the batch's `cancel_agent` calls to the children's crews; after `openBatch`, so they reach children it spawned. */
      sendCancels: enqueueActions(({ context, enqueue }) => {
        const batch = context.batch;
        if (!batch || batch.cancelsSent) return;
        batch.cancelsSent = true;
        const reason = `cancelled by ${context.agent.name}`;
        for (const { crewId, actorId } of batch.cancels) enqueue.sendTo(crewId, { type: 'crew.cancel', actorId, reason });
      }),
      /** A child finished: its result goes to the inbox and its actor is dropped. */
      receiveChildResult: enqueueActions(({ context, event, enqueue }) => {
        if (!('output' in event) || !('actorId' in event)) return;
        const { update, emptyCrew } = acceptChildResult(context, event.actorId, event.output as AgentResult);
        enqueue.assign(update);
        // The crew already stopped the child; a crew that held its last child goes too.
        if (emptyCrew) enqueue.stopChild(emptyCrew);
      }),
      /** A child actor crashed: it is delivered as failed, and the parent carries on. */
      receiveChildError: enqueueActions(({ context, event, enqueue }) => {
        if (!('error' in event) || !('actorId' in event)) return;
        const name = context.children.byActorId(event.actorId)?.agent.name ?? event.actorId;
        const result: AgentResult = { name, outcome: 'failed', text: '', reason: `sub-agent crashed: ${describeError(event.error)}`, usage: ZERO_USAGE };
        const { update, emptyCrew } = acceptChildResult(context, event.actorId, result);
        enqueue.assign(update);
        if (emptyCrew) enqueue.stopChild(emptyCrew);
      }),
      cancelChildren: enqueueActions(({ context, enqueue }, params: { reason: string }) => {
        for (const child of context.children.values()) enqueue.sendTo(child.crewId, { type: 'crew.cancel', actorId: child.actorId, reason: params.reason });
      }),
    },
  });

/**
 * What a session does once its batch is over (drained, and any wait ended): a truncation
 * reminder, the step cap, failure, or the next request. `waitingForAgents` takes the same
 * decisions, each behind `waitSatisfied` (written out there: XState types a guard per machine).
 */
const AFTER_BATCH = [
  { guard: and(['truncated', 'truncationReminderLeft', 'capReached']), target: 'capped', actions: 'commitBatch' },
  {
    guard: and(['truncated', 'truncationReminderLeft']),
    target: 'nudged',
    actions: ['commitBatch', { type: 'applyNudge', params: { on: 'max_tokens' } }],
  },
  { guard: 'truncated', target: 'failed', actions: ['commitBatch', { type: 'fail', params: { reason: 'output truncated repeatedly' } }] },
  { guard: 'capReached', target: 'capped', actions: 'commitBatch' },
  { target: 'streaming', actions: 'commitBatch' },
] as const;

export const sessionMachine = machineSetup.createMachine({
  id: 'session',
  context: sessionContext,
  on: {
    'user.message': { actions: 'queueUserMessage' },
    cancel: {
      target: '.cancelled',
      actions: [
        { type: 'cancelChildren', params: { reason: 'parent cancelled' } },
        { type: 'closeOpenCalls', params: { reason: 'cancelled' } },
        'abortEffects',
      ],
    },
    // Its budget is spent: it ends at once, as a cancel would end it, but `capped` ("budget").
    'budget.spent': {
      target: '.capped',
      actions: [{ type: 'closeOpenCalls', params: { reason: 'not run: the budget is spent' } }, 'abortEffects'],
    },
    'xstate.done.actor.*': { guard: 'fromSubAgent', actions: 'receiveChildResult' },
    'xstate.error.actor.*': { guard: 'fromSubAgent', actions: 'receiveChildError' },
  },
  // Every session starts in `resuming`, which it leaves at once, in the same macrostep (observers
  // never see it): a new session for `readyForUser`, a resumed one for the state its journal left it in.
  initial: 'resuming',
  states: {
    resuming: {
      always: [
        // Re-asks the model from the committed history: a stream in flight at the crash was never committed.
        { guard: { type: 'resumesAt', params: { state: 'streaming' } }, target: 'streaming' },
        // It was waiting for its sub-agents: it waits on, for the children taken up with it.
        { guard: { type: 'resumesAt', params: { state: 'waitingForAgents' } }, target: 'waitingForAgents' },
        // Runs the calls of the open batch that have no result (see `resumedContext`).
        { guard: { type: 'resumesAt', params: { state: 'dispatchingBatch' } }, target: 'dispatchingBatch' },
        // It waited for a person: it waits on, with the answers recorded meanwhile (`exarch approve`).
        { guard: { type: 'resumesAt', params: { state: 'awaitingApproval' } }, target: 'awaitingApproval' },
        { guard: { type: 'resumesAt', params: { state: 'nudged' } }, target: 'nudged' },
        { target: 'readyForUser' },
      ],
    },
    readyForUser: {
      // Input that is already waiting (a task, results that arrived during the turn) starts the next
      // turn one tick later: the boundary stays observable, and results arriving meanwhile join it.
      entry: ['flushLog', 'armTick'],
      on: {
        tick: { guard: 'hasTurnInput', target: 'streaming', actions: 'startTurn' },
        'user.message': { target: 'streaming', actions: ['queueUserMessage', 'startTurn'] },
        // A result wakes the session at the next tick, with every result that arrived by then: a
        // wave of sub-agents finishing together is one turn, not one turn (and request) each.
        'xstate.done.actor.*': { guard: 'fromSubAgent', actions: ['receiveChildResult', 'armTick'] },
        'xstate.error.actor.*': { guard: 'fromSubAgent', actions: ['receiveChildError', 'armTick'] },
      },
    },
    streaming: {
      // Only `cancel` leaves this state before the request's answer (and aborts it); a stop or a
      // final state ends the session's effects, which aborts it too.
      entry: ['countStep', 'admitRequest', 'requestModel'],
      on: {
        // Its budgets have no room for the request while others run: it waits, and the request never
        // left (should one have, it is aborted and counted: the event may come from outside).
        'budget.wait': { target: 'queued', actions: ['uncountStep', 'abortEffects'] },
        'model.done': [
          { guard: 'refused', target: 'failed', actions: ['commitResponse', { type: 'fail', params: {} }] },
          { guard: and(['hasToolCalls', 'needsApproval']), target: 'awaitingApproval', actions: 'openBatch' },
          { guard: 'hasToolCalls', target: 'dispatchingBatch', actions: 'openBatch' },
          {
            guard: and(['truncated', 'truncationReminderLeft', 'capReached']),
            target: 'capped',
            actions: 'commitResponse',
          },
          {
            guard: and(['truncated', 'truncationReminderLeft']),
            target: 'nudged',
            actions: ['commitResponse', { type: 'applyNudge', params: { on: 'max_tokens' } }],
          },
          {
            guard: 'truncated',
            target: 'failed',
            actions: ['commitResponse', { type: 'fail', params: { reason: 'output truncated repeatedly' } }],
          },
          { guard: and(['paused', 'capReached']), target: 'capped', actions: 'commitResponse' },
          // pause_turn: the paused message goes back unchanged and the model continues it.
          { guard: 'paused', target: 'streaming', reenter: true, actions: 'commitResponse' },
          { guard: and(['endTurnLatchFires', 'capReached']), target: 'capped', actions: 'commitResponse' },
          { guard: 'endTurnLatchFires', target: 'nudged', actions: ['commitResponse', { type: 'applyNudge', params: { on: 'end_turn' } }] },
          { guard: 'quietSubAgent', target: 'finishedWithoutReply', actions: 'commitResponse' },
          { target: 'readyForUser', actions: 'commitResponse' },
        ],
        // Only a complete message is ever committed: a failed stream leaves the history as it was.
        'model.error': { target: 'failed', actions: ['countFailedRequests', { type: 'fail', params: {} }] },
        // The request is about to leave: late input joins the turn, and the request is made again
        // (after the journal holds what the join recorded) with it.
        'model.starting': { guard: 'lateResults', actions: ['joinTurn', 'requestModelAgain'] },
      },
    },
    queued: {
      // In the budget's queue: the room a running request holds is what this one needs. It makes
      // its request once the meter takes room for it, in the order the sessions asked; a crossing
      // ends it (`budget.spent`, or a cancel) without one.
      entry: 'flushLog',
      exit: 'leaveBudgetQueue',
      on: { 'budget.room': 'streaming' },
    },
    dispatchingBatch: {
      // As in `streaming`: `cancel` abandons the batch (every call is answered), a stop does too.
      entry: ['sendCancels', 'runBatch'],
      on: {
        'tool.settled': { actions: 'settleCall' },
        'batch.drained': [
          { guard: 'replyStaged', target: 'replied', actions: 'commitBatch' },
          // wait_for_agents: the batch stays open (its results kept) until the condition holds.
          { guard: 'waitPending', target: 'waitingForAgents', actions: 'settleCall' },
          ...AFTER_BATCH,
        ],
      },
    },
    awaitingApproval: {
      // Some host tool calls of the batch wait for a person; nothing of the batch runs until every
      // one is answered (protocol calls were answered as it opened: its sub-agents run meanwhile).
      // No request, no step. Then the batch runs as any other, its denied calls answered already.
      entry: ['sendCancels', 'requestApprovals', 'flushLog', 'holdBatch'],
      exit: ['withdrawApprovals', 'releaseBatch'],
      on: { 'approval.answer': { actions: 'answerApproval' } },
      always: { guard: 'approvalsAnswered', target: 'dispatchingBatch', actions: 'noteDispatching' },
    },
    waitingForAgents: {
      // No request and no step: children's results arrive (the machine-wide handlers deliver them into
      // the inbox) until the wait's condition holds; then the batch is committed with the wait's
      // answer and the inbox in one message, and the session goes on as after any batch.
      entry: ['noteWaiting', 'flushLog', 'holdBatch'],
      exit: 'releaseBatch',
      always: [
        // The same decisions as after a drain (AFTER_BATCH), once the wait's condition holds.
        { guard: and(['waitSatisfied', 'truncated', 'truncationReminderLeft', 'capReached']), target: 'capped', actions: 'commitBatch' },
        {
          guard: and(['waitSatisfied', 'truncated', 'truncationReminderLeft']),
          target: 'nudged',
          actions: ['commitBatch', { type: 'applyNudge', params: { on: 'max_tokens' } }],
        },
        {
          guard: and(['waitSatisfied', 'truncated']),
          target: 'failed',
          actions: ['commitBatch', { type: 'fail', params: { reason: 'output truncated repeatedly' } }],
        },
        { guard: and(['waitSatisfied', 'capReached']), target: 'capped', actions: 'commitBatch' },
        { guard: 'waitSatisfied', target: 'streaming', actions: 'commitBatch' },
      ],
    },
    nudged: {
      // A resting point rather than an eventless hop, so inspectors and subscribers observe it.
      entry: 'armTick',
      on: { tick: 'streaming' },
    },
    replied: {
      type: 'final',
      entry: [{ type: 'cancelChildren', params: { reason: 'parent replied' } }, 'finishReplied'],
    },
    finishedWithoutReply: {
      type: 'final',
      entry: 'finishEmpty',
    },
    capped: {
      type: 'final',
      entry: [{ type: 'cancelChildren', params: { reason: 'parent hit the step cap' } }, 'finishCapped'],
    },
    failed: {
      type: 'final',
      entry: [
        { type: 'closeOpenCalls', params: { reason: 'not executed: the session failed' } },
        { type: 'cancelChildren', params: { reason: 'parent failed' } },
        'finishFailed',
      ],
    },
    cancelled: {
      type: 'final',
      entry: 'finishCancelled',
    },
  },
  output: ({ context }) => {
    if (!context.result) throw new Error(`exarch: session ${context.agent.id} ended without a result`);
    return context.result;
  },
});

export type SessionMachine = typeof sessionMachine;
