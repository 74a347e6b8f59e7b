// The workload of the workers' scale run (bench/scale.mjs): a root starts SUB_AGENTS sub-agents
// and waits for them all (wait_for_agents); each sub-agent calls a tool STEPS times, then replies;
// every model request takes MIN_MS–MAX_MS (1–3 s by default), as a real model's latency.
// A run is 2 + SUB_AGENTS × (STEPS + 1) model requests. The provider counts the requests in flight
// (a session waiting on its model) and made, for the worker process to report.
import { z } from '../../node_modules/zod/index.js';
import { defineTool } from '../../dist/src/index.js';
import { scriptedProvider } from '../../dist/src/testing/index.js';

export const TOOLS = ['echo'];

const echo = defineTool({ name: 'echo', description: 'Echo the text back.', input: z.object({ text: z.string() }), run: ({ text }) => text });

/** The agent's step: its responses so far (with --spread, one agent's requests may come from several workers). */
const stepOf = (request) => request.messages.filter((message) => message.role === 'assistant').length;

/** What a worker's provider did: requests in flight now, and made so far. */
export const counts = { inFlight: 0, requests: 0 };

/**
 * A run's sessions: the scripted provider (wrapped to count, and not to keep a record of every
 * request: the scripted provider's `requests` grows with the run, which a real provider's does not)
 * and the tool.
 */
export function scaleSession({ subAgents, steps, minMs, maxMs }) {
  const latency = () => minMs + Math.floor(Math.random() * (maxMs - minMs + 1));
  const spawns = Array.from({ length: subAgents }, (_, i) => ({ name: 'agent', input: { name: `s${i}`, task: 'Echo, then reply.' } }));
  const scripted = scriptedProvider({
    checkPairing: false,
    agents: {
      root: (request) =>
        stepOf(request) === 0
          ? { calls: [...spawns, { name: 'wait_for_agents', input: {} }], delayMs: latency() }
          : { text: 'all reported', delayMs: latency() },
      '*': (request) =>
        stepOf(request) < steps
          ? { calls: [{ name: 'echo', input: { text: `step ${stepOf(request)}` } }], delayMs: latency() }
          : { calls: [{ name: 'reply', input: { result: 'done' } }], delayMs: latency() },
    },
  });
  const provider = {
    name: scripted.name,
    async stream(request, sink) {
      counts.inFlight++;
      counts.requests++;
      try {
        return await scripted.stream(request, sink);
      } finally {
        counts.inFlight--;
        scripted.requests.length = 0;
      }
    },
  };
  return { provider, tools: [echo] };
}
