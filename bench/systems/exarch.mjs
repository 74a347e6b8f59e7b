// exarch, built from this checkout (dist/), with a Provider that reads the shared script. Sub-agents
// are real: the root's `agent` calls spawn child sessions, each child answers through `reply`, and
// the reports reach the root as inbox deliveries at its turn boundaries.
import { createSessionActor, defineTool, waitForSettled } from '../../dist/src/index.js';
import { ZERO_USAGE } from '../../dist/src/engine/usage.js';
// The library's own zod, so the bench measures one copy of it.
import { z } from '../../node_modules/zod/index.js';
import { childStep, countReports, echo, ECHO, loopStep, rootStep, textDeltas } from '../workloads.mjs';

export const label = 'exarch';
export const packages = ['exarch', 'xstate'];

function echoTool(counter) {
  return defineTool({
    name: ECHO.name,
    description: ECHO.description,
    input: z.object({ text: z.string() }),
    // It only returns its input (the counter is the bench's own instrument): a read, as read_file is.
    readOnly: true,
    run: (input) => (counter.toolExecutions++, echo(input)),
  });
}

/** A zero-latency provider: `stepFor(agent, index)` is the script, answered without streaming deltas. */
function scriptedProvider(stepFor) {
  const calls = new Map();
  const provider = {
    name: 'bench',
    calls,
    lastRootPrompt: undefined,
    async stream(request) {
      const { agent } = request;
      const index = calls.get(agent.id) ?? 0;
      calls.set(agent.id, index + 1);
      if (agent.depth === 0) provider.lastRootPrompt = request.messages;
      const step = stepFor(agent, index);
      return toResponse(step);
    },
  };
  return provider;
}

function toResponse(step) {
  if (step.toolCalls) {
    return {
      content: step.toolCalls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.input })),
      stopReason: 'tool_use',
      usage: ZERO_USAGE,
      incompleteToolUseIds: [],
    };
  }
  if (step.result !== undefined) {
    return {
      content: [{ type: 'tool_use', id: `reply_${step.result}`, name: 'reply', input: { result: step.result } }],
      stopReason: 'tool_use',
      usage: ZERO_USAGE,
      incompleteToolUseIds: [],
    };
  }
  return { content: [{ type: 'text', text: step.text }], stopReason: 'end_turn', usage: ZERO_USAGE, incompleteToolUseIds: [] };
}

/** Set by a variant (systems/exarch-inspected.mjs): called with every root session before it starts. */
export const hooks = { created: undefined };

async function settle(input) {
  const actor = createSessionActor(input);
  hooks.created?.(actor);
  actor.start();
  const snapshot = await waitForSettled(actor);
  if (snapshot.value !== 'readyForUser') throw new Error(`exarch: root settled in ${JSON.stringify(snapshot.value)}`);
  return actor;
}

const sum = (map, keep) => [...map].reduce((n, [id, calls]) => n + (keep(id) ? calls : 0), 0);

/**
 * The three workloads, each run to the end by `run(input)` (a session's input, task included),
 * which resolves with what the cell holds on to. exarch's own `run` is `settle` above; a variant
 * (systems/exarch-durable.mjs) runs the same sessions another way.
 */
export function workloadsWith(run) {
  return {
    async loop(steps) {
      const counter = { toolExecutions: 0 };
      const provider = scriptedProvider((_agent, i) => loopStep(i, steps));
      const keep = await run({ provider, tools: [echoTool(counter)], maxSteps: steps + 10, task: 'loop' });
      return { modelCalls: provider.calls.get('root'), toolExecutions: counter.toolExecutions, keep };
    },

    async fanout(children) {
      const counter = { toolExecutions: 0 };
      const provider = scriptedProvider((agent, i) => (agent.depth === 0 ? rootStep(i, children) : childStep(i, agent.name)));
      const keep = await run({ provider, tools: [echoTool(counter)], task: 'fan out' });
      return {
        modelCalls: provider.calls.get('root'),
        childModelCalls: sum(provider.calls, (id) => id !== 'root'),
        toolExecutions: counter.toolExecutions,
        reportsSeenByRoot: countReports(provider.lastRootPrompt),
        keep,
      };
    },

    async stream(count) {
      let deltasReceived = 0;
      let charsReceived = 0;
      const provider = {
        name: 'bench-stream',
        async stream(_request, sink) {
          let text = '';
          for await (const delta of textDeltas(count)) {
            text += delta;
            sink.text(delta);
          }
          return { content: [{ type: 'text', text }], stopReason: 'end_turn', usage: ZERO_USAGE, incompleteToolUseIds: [] };
        },
      };
      const listener = {
        onTextDelta(_agent, delta) {
          deltasReceived++;
          charsReceived += delta.length;
        },
      };
      const keep = await run({ provider, listener, task: 'stream' });
      return { deltasReceived, charsReceived, keep };
    },
  };
}

export const { loop, fanout, stream } = workloadsWith(settle);
