// The Vercel AI SDK (ai 6 and ai 7 share this code): a ToolLoopAgent, the SDK's agent class, over a
// scripted model that implements the provider spec (LanguageModelV3 for ai 6, V4 for ai 7). The model
// is a plain spec object rather than `ai/test`'s MockLanguageModelV*, because the mock records every
// call's options (the whole prompt of each step) and the harness would measure that log as heap.
import { z } from 'zod';
import { childStep, countReports, echo, ECHO, loopStep, rootStep, textDeltas } from '../workloads.mjs';

const USAGE = {
  inputTokens: { total: 0, noCache: 0, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 0, text: 0, reasoning: 0 },
};

/** Content and finish reason of one scripted step, in the provider spec's shape. */
function toGenerateResult(step) {
  if (step.toolCalls) {
    return {
      content: step.toolCalls.map((c) => ({ type: 'tool-call', toolCallId: c.id, toolName: c.name, input: JSON.stringify(c.input) })),
      finishReason: { unified: 'tool-calls', raw: undefined },
      usage: USAGE,
      warnings: [],
    };
  }
  // A sub-agent's `result` is simply its final text: the SDK's sub-agent pattern returns that to the caller.
  return { content: [{ type: 'text', text: step.text ?? step.result }], finishReason: { unified: 'stop', raw: undefined }, usage: USAGE, warnings: [] };
}

/**
 * A zero-latency model whose `stepAt(index, prompt)` is the script. `calls` counts doGenerate calls;
 * `lastPrompt` is the prompt of the latest one. Streaming answers the stream workload only.
 */
function scriptedModel(specificationVersion, stepAt, streamCount) {
  const model = {
    specificationVersion,
    provider: 'bench',
    modelId: 'scripted',
    supportedUrls: {},
    calls: 0,
    lastPrompt: undefined,
    async doGenerate({ prompt }) {
      model.lastPrompt = prompt;
      return toGenerateResult(stepAt(model.calls++, prompt));
    },
    async doStream() {
      model.calls++;
      return { stream: ReadableStream.from(streamParts(streamCount)) };
    },
  };
  return model;
}

async function* streamParts(count) {
  yield { type: 'stream-start', warnings: [] };
  yield { type: 'text-start', id: 'text-0' };
  for await (const delta of textDeltas(count)) yield { type: 'text-delta', id: 'text-0', delta };
  yield { type: 'text-end', id: 'text-0' };
  yield { type: 'finish', finishReason: { unified: 'stop', raw: undefined }, usage: USAGE };
}

/** Builds the three workloads for one major version: `ai` is the package namespace, `spec` 'v3' or 'v4'. */
export function aiSdkSystem(ai, spec) {
  const { ToolLoopAgent, stepCountIs, tool } = ai;

  function echoTool(counter) {
    return tool({
      description: ECHO.description,
      inputSchema: z.object({ text: z.string() }),
      execute: async (input) => (counter.toolExecutions++, echo(input)),
    });
  }

  async function loop(steps) {
    const counter = { toolExecutions: 0 };
    const model = scriptedModel(spec, (i) => loopStep(i, steps));
    // ToolLoopAgent stops after 20 steps by default; the loop must end on the model's answer instead.
    const agent = new ToolLoopAgent({ model, tools: { [ECHO.name]: echoTool(counter) }, stopWhen: stepCountIs(steps + 10) });
    const result = await agent.generate({ prompt: 'loop' });
    return { modelCalls: model.calls, toolExecutions: counter.toolExecutions, keep: result };
  }

  async function fanout(children) {
    const counter = { toolExecutions: 0 };
    // One worker agent serves every `agent` call, as in the SDK's sub-agent pattern; its model tells the
    // workers apart by the name in the task prompt and keeps one script position per worker.
    const positions = new Map();
    const workerModel = scriptedModel(spec, (_i, prompt) => {
      const name = JSON.stringify(prompt[0]).match(/\bw\d+\b/)[0];
      const index = positions.get(name) ?? 0;
      positions.set(name, index + 1);
      return childStep(index, name);
    });
    const worker = new ToolLoopAgent({ model: workerModel, tools: { [ECHO.name]: echoTool(counter) }, stopWhen: stepCountIs(10) });
    const agentTool = tool({
      description: 'Run a sub-agent on a task and return its answer.',
      inputSchema: z.object({ name: z.string(), task: z.string() }),
      execute: async ({ name, task }) => (await worker.generate({ prompt: `${name}: ${task}` })).text,
    });
    const rootModel = scriptedModel(spec, (i) => rootStep(i, children));
    const root = new ToolLoopAgent({ model: rootModel, tools: { agent: agentTool }, stopWhen: stepCountIs(10) });
    const result = await root.generate({ prompt: 'fan out' });
    return {
      modelCalls: rootModel.calls,
      childModelCalls: workerModel.calls,
      toolExecutions: counter.toolExecutions,
      reportsSeenByRoot: countReports(rootModel.lastPrompt),
      keep: result,
    };
  }

  async function stream(count) {
    const model = scriptedModel(spec, () => ({ text: '' }), count);
    const agent = new ToolLoopAgent({ model, tools: { [ECHO.name]: echoTool({ toolExecutions: 0 }) } });
    const result = await agent.stream({ prompt: 'stream' });
    let deltasReceived = 0;
    let charsReceived = 0;
    for await (const delta of result.textStream) {
      deltasReceived++;
      charsReceived += delta.length;
    }
    return { deltasReceived, charsReceived, keep: result };
  }

  return { loop, fanout, stream };
}
