import type { AnyActorRef } from 'xstate';
import { checkAgentBudget } from '../src/engine/budget.js';
import { RequestAdmitter } from '../src/engine/requestAdmitter.js';
import { ROOT_AGENT } from '../src/engine/identity.js';
import { assertToolPairing } from '../src/engine/pairing.js';
import { ChildRegistry } from './childRegistry.js';
import { SessionRecorder } from '../src/session/recorder.js';
import { replyReminder, truncationReminder, type NudgeLatch } from '../src/engine/nudges.js';
import { resolveOptions, sessionAxes, type ResolvedOptions } from '../src/session/options.js';
import { defaultSystemPrompt } from '../src/engine/prompts.js';
import { buildToolbox } from '../src/tools/toolbox.js';
import { ZERO_USAGE } from '../src/engine/usage.js';
import type { SessionInput, SessionFixed, SessionContext, Spawner } from './sessionTypes.js';
import { resumedContext } from './resume.js';

// What a session starts with: its input checked, and its context, new or resumed.

/** Throws a one-line error for input a session cannot start with. */
export function validateSessionInput(input: SessionInput): void {
  const options = resolveOptions(input);
  const agent = input.agent ?? ROOT_AGENT;
  buildToolbox(options.tools, sessionAxes(agent.depth, options), options.protocol);
  if (input.history) assertToolPairing(input.history);
  if (input.task !== undefined && typeof input.task !== 'string') throw new TypeError('exarch: `task` must be a string');
  checkAgentBudget(input.subtreeBudget);
}

const latchLists = new WeakMap<ResolvedOptions, { root?: readonly NudgeLatch[]; sub?: readonly NudgeLatch[] }>();

/** The built-in latches and the host's, in order; one list per options object and kind of session. */
function latchesFor(options: ResolvedOptions, subAgent: boolean): readonly NudgeLatch[] {
  let lists = latchLists.get(options);
  if (!lists) latchLists.set(options, (lists = {}));
  const kind = subAgent ? 'sub' : 'root';
  return (lists[kind] ??= [...(subAgent ? [replyReminder] : []), truncationReminder(options.truncationBudget), ...options.nudges]);
}

/** The bytes of `session`'s next request: its history, and the results and messages waiting for it. */
function nextRequestBytes(session: AnyActorRef, admitter: RequestAdmitter): number {
  const context = (session.getSnapshot() as { context?: SessionContext } | undefined)?.context;
  return context ? admitter.nextRequestBytes(context.messages, context.inbox, context.pendingUser) : 0;
}

/** A session's context as it starts: new, or taken up from its journal (`input.restore`). */
export function sessionContext({ input, spawn, self }: { input: SessionInput; spawn: Spawner; self: AnyActorRef }): SessionContext {
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
