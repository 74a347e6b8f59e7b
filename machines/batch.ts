import { appendUserBlocks, text, toolUses } from '../src/engine/history.js';
import { renderInbox } from '../src/engine/inbox.js';
import { errorResult, okResult } from '../src/tools/toolbox.js';
import type { RunnableCall } from '../src/tools/runTools.js';
import type { ToolResultBlock, UserBlock } from '../src/engine/types.js';
import type { ActorArgs, SessionEvent, SessionContext, SessionArgs } from './sessionTypes.js';
import { waitSatisfied } from './guards.js';
import { effectsFor } from './request.js';

// A tool batch of the session chart after it opened: its calls run, settle, wait for sub-agents and
// are committed in model order.

/** Records a settled tool call's result (from `tool.settled`, or the last one, with `batch.drained`) in the open batch. */
export function settleCallIn(context: SessionContext, event: SessionEvent): void {
  if ((event.type !== 'tool.settled' && event.type !== 'batch.drained') || !event.result || !context.batch || context.batch.committed) return;
  context.batch.results.set(event.result.tool_use_id, event.result);
  context.fixed.recorder.note({ type: 'tool', result: event.result });
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

/**
 * Answers any `tool_use` of the last assistant message that has no result yet: a failure or a
 * cancellation must still leave a history the API accepts.
 */
export function closeOpenCalls(context: SessionContext, reason: string): void {
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

/** Starts the batch's runnable calls; they answer with `tool.settled` and, last, `batch.drained`. */
export function runBatch({ context, self }: ActorArgs): void {
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
export function noteWaiting({ context }: SessionArgs): void {
  if (!waitSatisfied(context)) context.fixed.recorder.note({ type: 'waiting' });
}

/** Takes the last result (it comes with `batch.drained`) and commits the batch. */
export function commitBatch({ context, event }: SessionArgs): Partial<SessionContext> {
  settleCallIn(context, event);
  // A delivered inbox is emptied in place; a new array makes the change visible in the snapshot.
  return commitBatchTo(context);
}
