// The OpenAI Agents SDK core (@openai/agents-core): an Agent run by `run()`, over a scripted object
// implementing the SDK's `Model` interface. Sub-agents use the SDK's own construct, `agent.asTool()`.
// The SDK's testing ScriptedModel is not used: it records every request, which the harness would
// measure as heap, and it takes a fixed list of steps rather than a script.
import { Agent, run, setTracingDisabled, tool, Usage } from '@openai/agents-core';
import { z } from 'zod';
import { childStep, countReports, echo, ECHO, loopStep, rootStep, textDeltas } from '../workloads.mjs';

// No trace export: there is no network, and the other systems do not trace either.
setTracingDisabled(true);

const assistantMessage = (text) => ({ type: 'message', role: 'assistant', status: 'completed', content: [{ type: 'output_text', text }] });

/** The output items of one scripted step, in the SDK's protocol. */
function toOutput(step) {
  if (step.toolCalls) {
    return step.toolCalls.map((c) => ({ type: 'function_call', callId: c.id, name: c.name, arguments: JSON.stringify(c.input), status: 'completed' }));
  }
  // A sub-agent's `result` is its final output, which asTool() hands back to the caller.
  return [assistantMessage(step.text ?? step.result)];
}

/**
 * A zero-latency `Model` whose `stepAt(index, input)` is the script. `calls` counts requests;
 * `lastInput` is the input of the latest one. Streaming answers the stream workload only.
 */
function scriptedModel(stepAt, streamCount) {
  const model = {
    calls: 0,
    lastInput: undefined,
    async getResponse({ input }) {
      model.lastInput = input;
      return { usage: new Usage({ requests: 1 }), output: toOutput(stepAt(model.calls++, input)), responseId: `resp_${model.calls}` };
    },
    async *getStreamedResponse() {
      model.calls++;
      yield { type: 'response_started' };
      let text = '';
      for await (const delta of textDeltas(streamCount)) {
        text += delta;
        yield { type: 'output_text_delta', delta };
      }
      yield {
        type: 'response_done',
        response: {
          id: 'resp_stream',
          usage: { requests: 1, inputTokens: 0, outputTokens: 0, totalTokens: 0 },
          output: [assistantMessage(text)],
        },
      };
    },
  };
  return model;
}

function echoTool(counter) {
  return tool({
    name: ECHO.name,
    description: ECHO.description,
    parameters: z.object({ text: z.string() }),
    execute: async (input) => (counter.toolExecutions++, echo(input)),
  });
}

export const label = 'OpenAI Agents SDK';
export const packages = ['@openai/agents-core'];

export async function loop(steps) {
  const counter = { toolExecutions: 0 };
  const model = scriptedModel((i) => loopStep(i, steps));
  const agent = new Agent({ name: 'loop', model, tools: [echoTool(counter)] });
  // maxTurns defaults to 10; the loop must end on the model's answer instead.
  const result = await run(agent, 'loop', { maxTurns: steps + 10 });
  return { modelCalls: model.calls, toolExecutions: counter.toolExecutions, keep: result };
}

export async function fanout(children) {
  const counter = { toolExecutions: 0 };
  // asTool() wraps one worker agent; its model tells the concurrent runs apart by the name in the
  // structured tool input it receives, and keeps one script position per worker.
  const positions = new Map();
  const workerModel = scriptedModel((_i, input) => {
    const name = JSON.stringify(Array.isArray(input) ? input[0] : input).match(/\bw\d+\b/)[0];
    const index = positions.get(name) ?? 0;
    positions.set(name, index + 1);
    return childStep(index, name);
  });
  const worker = new Agent({ name: 'worker', model: workerModel, tools: [echoTool(counter)] });
  const agentTool = worker.asTool({
    toolName: 'agent',
    toolDescription: 'Run a sub-agent on a task and return its answer.',
    parameters: z.object({ name: z.string(), task: z.string() }),
  });
  const rootModel = scriptedModel((i) => rootStep(i, children));
  const root = new Agent({ name: 'root', model: rootModel, tools: [agentTool] });
  const result = await run(root, 'fan out');
  return {
    modelCalls: rootModel.calls,
    childModelCalls: workerModel.calls,
    toolExecutions: counter.toolExecutions,
    reportsSeenByRoot: countReports(rootModel.lastInput),
    keep: result,
  };
}

export async function stream(count) {
  const model = scriptedModel(() => ({ text: '' }), count);
  const agent = new Agent({ name: 'stream', model, tools: [echoTool({ toolExecutions: 0 })] });
  const result = await run(agent, 'stream', { stream: true });
  let deltasReceived = 0;
  let charsReceived = 0;
  for await (const event of result) {
    if (event.type === 'raw_model_stream_event' && event.data.type === 'output_text_delta') {
      deltasReceived++;
      charsReceived += event.data.delta.length;
    }
  }
  await result.completed;
  return { deltasReceived, charsReceived, keep: result };
}
