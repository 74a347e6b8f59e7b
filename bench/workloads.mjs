// The benchmark workloads, written once: what the scripted model says at each step, and the counts
// every system's run must reach. Each system in systems/ wraps these in its own model interface
// (exarch's Provider, the AI SDK's mock language model, an Agents SDK `Model`, a LangChain chat
// model); none of them decides what the model says.
import { setImmediate as tick } from 'node:timers/promises';

/** The trivial synchronous tool every workload calls. */
export const ECHO = { name: 'echo', description: 'Echo the text back.' };
export const echo = ({ text }) => text;

/** A model step: tool calls, or final text. `result` is a sub-agent's answer (exarch: a `reply` call). */
// { toolCalls: [{ id, name, input }] } | { text } | { result }

/** loop: step i < S calls echo once; step S answers. S + 1 model calls, S tool executions. */
export function loopStep(index, steps) {
  return index < steps ? { toolCalls: [{ id: `call_${index}`, name: ECHO.name, input: { text: `step ${index}` } }] } : { text: 'done' };
}

export const childName = (i) => `w${i}`;

/** fan-out, root: the first step starts every sub-agent in one batch; any later step answers. */
export function rootStep(index, children) {
  if (index > 0) return { text: 'all done' };
  return {
    toolCalls: Array.from({ length: children }, (_, i) => ({ id: `call_agent_${i}`, name: 'agent', input: { name: childName(i), task: 'work' } })),
  };
}

/** fan-out, sub-agent: two echo calls, then its result. */
export function childStep(index, name) {
  if (index < 2) return { toolCalls: [{ id: `call_${name}_${index}`, name: ECHO.name, input: { text: `${name} ${index}` } }] };
  return { result: `done ${name}` };
}

/** stream: one step of N one-character deltas, yielding to the event loop every 256 as a socket read would. */
export const DELTA = 'x';
export const YIELD_EVERY = 256;
export async function* textDeltas(count) {
  for (let i = 0; i < count; i++) {
    if (i > 0 && i % YIELD_EVERY === 0) await tick();
    yield DELTA;
  }
}

/** How many distinct sub-agent results (`done w<i>`) appear in what the root's model last received. */
export function countReports(prompt) {
  const text = typeof prompt === 'string' ? prompt : JSON.stringify(prompt);
  const count = new Set(text.match(/done w\d+/g) ?? []).size;
  // V8 keeps the last regexp subject alive (RegExp.lastMatch); match a tiny string so the memory
  // measurement does not count this serialised prompt.
  /x/.exec('x');
  return count;
}

/** The counts a run must reach; a cell that reports anything else fails instead of printing a number. */
export const expected = {
  loop: (steps) => ({ modelCalls: steps + 1, toolExecutions: steps }),
  fanout: (children) => ({ childModelCalls: 3 * children, toolExecutions: 2 * children, reportsSeenByRoot: children }),
  stream: (count) => ({ deltasReceived: count, charsReceived: count * DELTA.length }),
};
