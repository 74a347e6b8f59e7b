import { and, assign, enqueueActions, not, setup, type AnyActorLogic } from 'xstate';
import type { BudgetRoomEvent, BudgetSpentEvent, BudgetWaitEvent } from '../src/engine/budget.js';
import { createCrewMachine } from './crew.js';
import { describeError } from '../src/engine/model/errors.js';
import { ZERO_USAGE } from '../src/engine/usage.js';
import type { AgentResult } from '../src/engine/types.js';
import type { SessionInput, SessionEvent, SessionContext } from './sessionTypes.js';
import { beforeFirstTurn, sessionGuards } from './guards.js';
import { commitResponseTo, modelStepInput, lateResultsOf, countLost, effectsFor, requestModel } from './request.js';
import { settleCallIn, closeOpenCalls, runBatch, noteWaiting, commitBatch } from './batch.js';
import { openBatch } from './openBatch.js';
import { requestApprovals, answerApproval, withdrawApprovals } from './approvals.js';
import { acceptChildResult } from './children.js';
import { startTurn, joinTurn, applyNudge } from './turn.js';
import { finish, fail, finishReplied, finishCapped, finishCancelled } from './outcome.js';
import { sessionContext } from './sessionStart.js';

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
    /** A new session with a task rests in `starting` until the next tick; the others leave it at once and arm none. */
    restBeforeFirstTurn: ({ context, self }) => {
      if (!beforeFirstTurn(context)) return;
      context.fixed.recorder.flush();
      effectsFor(self, context)?.armTick();
    },
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
          // A microtask later the session may have ended (cancelled by its parent): then it is told nothing.
          queueMicrotask(() => {
            if (self.getSnapshot().status === 'active') self.send({ type: 'budget.spent' } satisfies BudgetSpentEvent);
          });
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
  // Every session starts in `starting`. One before its first turn (a new one given a task) rests
  // there until the next tick of the event loop, then starts that turn (messages sent meanwhile
  // join it): observers see it starting, never `readyForUser` (a turn that is over) before it
  // began. The others leave it at once, in the same macrostep (observers never see it): a new
  // session without a task for `readyForUser`, a resumed one for the state its journal left it in.
  initial: 'starting',
  states: {
    starting: {
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
        // At rest, or new without a task: it waits for the user. Before its first turn it stays.
        { guard: not('beforeFirstTurn'), target: 'readyForUser' },
      ],
      entry: 'restBeforeFirstTurn',
      on: { tick: { target: 'streaming', actions: 'startTurn' } },
    },
    readyForUser: {
      // Input that is already waiting (results and messages that arrived during the turn) starts the next
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
      entry: 'runBatch',
      // Its `cancel_agent` calls go out. An eventless transition rather than an entry action: the
      // batch of almost every step has none, and an action that enqueues costs each step it runs in
      // its enqueue object and closures.
      always: { guard: 'cancelsUnsent', actions: 'sendCancels' },
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
