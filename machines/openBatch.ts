import { childIdentity } from '../src/engine/identity.js';
import type { LiveChild } from './childRegistry.js';
import type { CrewMember } from './crew.js';
import { childOptions, inheritOptions } from '../src/session/options.js';
import { errorResult, okResult, planBatch } from '../src/tools/toolbox.js';
import type { ToolResultBlock } from '../src/engine/types.js';
import type { SessionInput, Batch, SessionContext, SessionArgs, Spawner } from './sessionTypes.js';
import { stepEndOf, responseOf, callsNeedingApproval } from './guards.js';
import { commitResponseTo } from './request.js';
import { budgetsFor, remoteMember } from './children.js';

// The session chart's `openBatch` action: a response with tool calls commits and opens its batch.

/**
 * Commits the response and plans its batch, in one assign (each assign makes a snapshot).
 * Protocol calls are answered here, in model order: `agent` spawns a child, `cancel_agent`
 * queues a cancel (see `sendCancels`), the first `reply` is staged. Other tools run on the
 * session's effects.
 */
export function openBatch({ context, event, spawn }: SessionArgs & { readonly spawn: Spawner }): Partial<SessionContext> {
  const response = responseOf(event);
  const { requests, usage } = commitResponseTo(context, event);
  const plan = planBatch(response.content, context.fixed.toolbox, new Set(response.incompleteToolUseIds), response.invalidToolInputs);
  const results = new Map<string, ToolResultBlock>();
  let reply: Batch['reply'] = null;
  let wait: Batch['wait'] = null;
  const children = context.children;
  let spawned = context.spawned;
  // Made when a call needs them: a step's batch usually spawns no one and asks no person.
  let crews: Map<string, CrewMember<SessionInput>[]> | undefined;
  const cancels: LiveChild[] = [];
  const gatedCalls = callsNeedingApproval(context, event);
  const gated = gatedCalls.length > 0 ? new Map(gatedCalls.map((block) => [block.id, block])) : undefined;
  const awaiting: Batch['awaiting'] = new Map();
  for (const call of plan) {
    switch (call.kind) {
      case 'answered':
        results.set(call.id, call.result);
        break;
      case 'run': {
        const block = gated?.get(call.id);
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
        crews ??= new Map();
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
  if (crews) for (const [crewId, members] of crews) spawn('crew', { id: crewId, input: { members } });
  return {
    requests,
    usage,
    batch: { plan, results, reply, cancels, wait, awaiting, stepEnd: stepEndOf(response), committed: false, cancelsSent: false },
    spawned,
  };
}
