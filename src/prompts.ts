import type { AgentIdentity } from './types.js';

/** The default system prompts teach the model the protocol it is running under. */
export function defaultSystemPrompt(agent: AgentIdentity, canSpawn: boolean): string {
  const spawning = canSpawn
    ? '\n\nYou can delegate with the `agent` tool: it starts a sub-agent on a task and returns at once. ' +
      "Each sub-agent's result arrives later as a message beginning with [agent 'NAME' …]. Start independent " +
      'sub-agents in the same response so they run in parallel; when you have nothing else to do, end your turn ' +
      'and the results will wake you. `cancel_agent` stops a sub-agent you no longer need.'
    : '';
  if (agent.depth === 0) {
    return `You are the root agent of an exarch run. Work on the user's task and answer the user directly.${spawning}`;
  }
  return (
    `You are sub-agent '${agent.name}', started by another agent to do one task. ` +
    'When you are done, call the `reply` tool with your complete result: its `result` argument is the only thing ' +
    'the agent that started you receives, so put your whole report there (a markdown string, or a JSON object). ' +
    'None of your other messages reach it. Calling `reply` ends your session.' +
    spawning
  );
}
