import type { ApprovalDesk } from '../src/engine/approvals.js';
import { ChildRegistry, type LiveChild } from './childRegistry.js';
import type { CrewMember } from './crew.js';
import { textOf } from '../src/engine/history.js';
import type { SessionRecorder } from '../src/session/recorder.js';
import { childOptions, inheritOptions } from '../src/session/options.js';
import { errorResult, planBatch, type Toolbox } from '../src/tools/toolbox.js';
import { addUsage } from '../src/engine/usage.js';
import type { RestoredSession } from '../src/store/restoredSession.js';
import type { AssistantBlock, ToolResultBlock } from '../src/engine/types.js';
import type { SessionInput, Batch, SessionContext, MadeContext, Spawner } from './sessionTypes.js';
import { budgetsFor, remoteMember } from './children.js';

// A session taken up again from its journal: its context and its open batch (see
// `RestoredSession`).

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
export function resumedContext(made: MadeContext, restore: RestoredSession, spawn: Spawner): SessionContext {
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

/** The input of the `tool_use` block `id` of a response. */
function inputOf(content: readonly AssistantBlock[], id: string): Readonly<Record<string, unknown>> {
  for (const block of content) if (block.type === 'tool_use' && block.id === id) return block.input;
  return {};
}
