// The workload of the workers' benchmark: a root starts SUB_AGENTS sub-agents and waits for them
// (wait_for_agents); each calls a tool once and replies; every model request takes 50–200 ms, as a
// scripted model's simulated latency. A run is 2 + 2 × SUB_AGENTS requests and its critical path
// 4 requests long.
import { z } from '../../node_modules/zod/index.js';
import { defineTool } from '../../dist/src/index.js';
import { scriptedProvider } from '../../dist/src/testing/index.js';

export const SUB_AGENTS = 10;
export const TOOLS = ['echo'];

const echo = defineTool({ name: 'echo', description: 'Echo the text back.', input: z.object({ text: z.string() }), run: ({ text }) => text });

/** 50–200 ms, or the range in BENCH_LATENCY_MS (`0` for a model that answers at once: the worker's own cost). */
const [low, high] = (process.env.BENCH_LATENCY_MS ?? '50-200').split('-').map(Number);
const latency = () => (low ?? 0) + Math.floor(Math.random() * ((high ?? low ?? 0) - (low ?? 0) + 1));

/** The agent's step: its responses so far (not the provider's count: with --spread, one agent's requests may come from several workers). */
const stepOf = (request) => request.messages.filter((message) => message.role === 'assistant').length;

/** A run's sessions: the scripted provider and the tool. */
export function fanOutSession() {
  const spawns = Array.from({ length: SUB_AGENTS }, (_, i) => ({ name: 'agent', input: { name: `s${i}`, task: 'Echo once, then reply.' } }));
  const provider = scriptedProvider({
    agents: {
      root: (request) =>
        stepOf(request) === 0
          ? { calls: [...spawns, { name: 'wait_for_agents', input: {} }], delayMs: latency() }
          : { text: 'all reported', delayMs: latency() },
      '*': (request) =>
        stepOf(request) === 0
          ? { calls: [{ name: 'echo', input: { text: 'work' } }], delayMs: latency() }
          : { calls: [{ name: 'reply', input: { result: 'done' } }], delayMs: latency() },
    },
  });
  return { provider, tools: [echo] };
}
