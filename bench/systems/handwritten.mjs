// The floor: a hand-written agent loop with no library, the least any orchestrator can cost. It
// keeps an Anthropic-shaped transcript, runs a step's tool calls concurrently and answers them in
// order, exactly the work the libraries do minus everything else.
import { childStep, countReports, echo, loopStep, rootStep, textDeltas } from '../workloads.mjs';

export const label = 'hand-written loop';
export const packages = [];

/** One agent: ask the model, run its calls, until it answers. `model(messages)` is the scripted step. */
async function runLoop(model, tools, messages) {
  for (;;) {
    const step = await model(messages);
    if (!step.toolCalls) {
      const text = step.text ?? step.result;
      messages.push({ role: 'assistant', content: [{ type: 'text', text }] });
      return text;
    }
    messages.push({ role: 'assistant', content: step.toolCalls.map((c) => ({ type: 'tool_use', id: c.id, name: c.name, input: c.input })) });
    const results = await Promise.all(
      step.toolCalls.map(async (c) => ({ type: 'tool_result', tool_use_id: c.id, content: String(await tools[c.name](c.input)) })),
    );
    messages.push({ role: 'user', content: results });
  }
}

/** A zero-latency model: an async call (as a network request is) that reads the script. */
function scripted(stepAt) {
  let calls = 0;
  const model = async (messages) => {
    model.lastPrompt = messages;
    return stepAt(calls++);
  };
  model.calls = () => calls;
  return model;
}

export async function loop(steps) {
  let toolExecutions = 0;
  const model = scripted((i) => loopStep(i, steps));
  const messages = [{ role: 'user', content: 'loop' }];
  await runLoop(model, { echo: (input) => (toolExecutions++, echo(input)) }, messages);
  return { modelCalls: model.calls(), toolExecutions, keep: messages };
}

export async function fanout(children) {
  let toolExecutions = 0;
  let childModelCalls = 0;
  const tools = {
    echo: (input) => (toolExecutions++, echo(input)),
    agent: async ({ name }) => {
      const child = scripted((i) => childStep(i, name));
      const text = await runLoop(child, tools, [{ role: 'user', content: 'work' }]);
      childModelCalls += child.calls();
      return text;
    },
  };
  const root = scripted((i) => rootStep(i, children));
  const messages = [{ role: 'user', content: 'fan out' }];
  await runLoop(root, tools, messages);
  return { modelCalls: root.calls(), childModelCalls, toolExecutions, reportsSeenByRoot: countReports(root.lastPrompt), keep: messages };
}

export async function stream(count) {
  let deltasReceived = 0;
  let charsReceived = 0;
  const onDelta = (delta) => {
    deltasReceived++;
    charsReceived += delta.length;
  };
  let text = '';
  for await (const delta of textDeltas(count)) {
    text += delta;
    onDelta(delta);
  }
  return { deltasReceived, charsReceived, keep: text };
}
