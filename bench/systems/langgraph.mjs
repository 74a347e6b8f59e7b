// LangGraph (@langchain/langgraph): the prebuilt ReAct agent graph, createReactAgent, over a scripted
// LangChain chat model. A sub-agent is a compiled agent graph invoked from a tool, LangGraph's
// "sub-agent as a tool" pattern; the ToolNode runs one step's tool calls concurrently.
// `workloadsWith(durable)` runs the same graphs with a checkpointer (systems/langgraph-sqlite.mjs,
// systems/langgraph-postgres.mjs); this file's own workloads run without one, in memory.
import { BaseChatModel } from '@langchain/core/language_models/chat_models';
import { AIMessage, AIMessageChunk, HumanMessage } from '@langchain/core/messages';
import { ChatGenerationChunk } from '@langchain/core/outputs';
import { tool } from '@langchain/core/tools';
import { convertToOpenAITool } from '@langchain/core/utils/function_calling';
import { createReactAgent } from '@langchain/langgraph/prebuilt';
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { childStep, countReports, echo, ECHO, loopStep, rootStep, textDeltas } from '../workloads.mjs';

/** The AI message of one scripted step. A sub-agent's `result` is its final answer. */
function toMessage(step) {
  if (step.toolCalls)
    return new AIMessage({ content: '', tool_calls: step.toolCalls.map((c) => ({ id: c.id, name: c.name, args: c.input, type: 'tool_call' })) });
  return new AIMessage(step.text ?? step.result);
}

/**
 * A zero-latency chat model whose `stepAt(index, messages)` is the script. `calls` counts model
 * calls; `lastMessages` holds the messages of the latest one. Streaming answers the stream workload.
 */
class ScriptedChatModel extends BaseChatModel {
  constructor(stepAt, streamCount = 0) {
    super({});
    this.stepAt = stepAt;
    this.streamCount = streamCount;
    this.calls = 0;
    this.lastMessages = undefined;
  }

  _llmType() {
    return 'scripted';
  }

  // As a provider integration does: the tools travel with each call as JSON schemas.
  bindTools(tools) {
    return this.withConfig({ tools: tools.map((t) => convertToOpenAITool(t)) });
  }

  async _generate(messages) {
    this.lastMessages = messages;
    const message = toMessage(this.stepAt(this.calls++, messages));
    return { generations: [{ text: message.text, message }] };
  }

  async *_streamResponseChunks(_messages, _options, runManager) {
    this.calls++;
    for await (const delta of textDeltas(this.streamCount)) {
      const chunk = new ChatGenerationChunk({ text: delta, message: new AIMessageChunk({ content: delta }) });
      yield chunk;
      // What LangGraph's "messages" stream mode listens to.
      await runManager?.handleLLMNewToken(delta, undefined, undefined, undefined, undefined, { chunk });
    }
  }
}

function echoTool(counter) {
  return tool((input) => (counter.toolExecutions++, echo(input)), {
    name: ECHO.name,
    description: ECHO.description,
    schema: z.object({ text: z.string() }),
  });
}

export const label = 'LangGraph';
export const packages = ['@langchain/langgraph', '@langchain/core'];

/**
 * The three workloads. Without `durable`, in memory (no checkpointer). With it, every graph is
 * compiled with `durable.checkpointer()` and each run is a new thread in it, with `durability:
 * 'sync'` (each super-step's checkpoint stored before the next super-step starts: exarch's
 * guarantee, a response stored before the next request leaves; LangGraph's default, 'async', lets
 * the write overlap the next step). A sub-agent's graph is compiled without a checkpointer of its
 * own, so it checkpoints into its parent's, under its own namespace, as LangGraph's subgraphs do.
 * `durable.onThread(id)`, when given, hears each run's thread id.
 */
export function workloadsWith(durable) {
  const compile = (params) => createReactAgent(durable ? { ...params, checkpointer: durable.checkpointer() } : params);
  /** A run's options; durable, a new thread (`thread_id`: a sub-agent's thread is its root's, then its name). */
  const runOptions = (options = {}, thread_id = randomUUID()) => {
    if (!durable) return options;
    durable.onThread?.(thread_id);
    return { ...options, durability: 'sync', configurable: { thread_id } };
  };
  return {
    async loop(steps) {
      const counter = { toolExecutions: 0 };
      const model = new ScriptedChatModel((i) => loopStep(i, steps));
      const agent = compile({ llm: model, tools: [echoTool(counter)] });
      // Each step is two supersteps (model, tools); the default limit of 25 would stop the loop.
      const state = await agent.invoke({ messages: [new HumanMessage('loop')] }, runOptions({ recursionLimit: 2 * steps + 10 }));
      return { modelCalls: model.calls, toolExecutions: counter.toolExecutions, keep: state };
    },

    async fanout(children) {
      const counter = { toolExecutions: 0 };
      // One compiled worker graph serves every `agent` call; its model tells the concurrent runs apart by
      // the name in the task message, and keeps one script position per worker.
      const positions = new Map();
      const workerModel = new ScriptedChatModel((_i, messages) => {
        const name = messages[0].text.match(/\bw\d+\b/)[0];
        const index = positions.get(name) ?? 0;
        positions.set(name, index + 1);
        return childStep(index, name);
      });
      const worker = compile({ llm: workerModel, tools: [echoTool(counter)] });
      const rootOptions = runOptions();
      const agentTool = tool(
        async ({ name, task }) => {
          const options = durable ? runOptions({}, `${rootOptions.configurable.thread_id}/${name}`) : {};
          const state = await worker.invoke({ messages: [new HumanMessage(`${name}: ${task}`)] }, options);
          return state.messages.at(-1).text;
        },
        { name: 'agent', description: 'Run a sub-agent on a task and return its answer.', schema: z.object({ name: z.string(), task: z.string() }) },
      );
      const rootModel = new ScriptedChatModel((i) => rootStep(i, children));
      const root = compile({ llm: rootModel, tools: [agentTool] });
      const state = await root.invoke({ messages: [new HumanMessage('fan out')] }, rootOptions);
      return {
        modelCalls: rootModel.calls,
        childModelCalls: workerModel.calls,
        toolExecutions: counter.toolExecutions,
        reportsSeenByRoot: countReports(rootModel.lastMessages),
        keep: state,
      };
    },

    async stream(count) {
      const model = new ScriptedChatModel(() => ({ text: '' }), count);
      const agent = compile({ llm: model, tools: [echoTool({ toolExecutions: 0 })] });
      // "messages" for the token stream, "values" for the final state a host would keep.
      const chunks = await agent.stream({ messages: [new HumanMessage('stream')] }, runOptions({ streamMode: ['messages', 'values'] }));
      let deltasReceived = 0;
      let charsReceived = 0;
      let state;
      for await (const [mode, payload] of chunks) {
        if (mode === 'values') state = payload;
        else if (AIMessageChunk.isInstance(payload[0]) && payload[0].text.length > 0) {
          deltasReceived++;
          charsReceived += payload[0].text.length;
        }
      }
      return { deltasReceived, charsReceived, keep: state };
    },
  };
}

export const { loop, fanout, stream } = workloadsWith(undefined);
