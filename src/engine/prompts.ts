import type { AgentIdentity } from './types.js';

/**
 * The default system prompts. They teach the model the protocol it runs under: how results of
 * sub-agents arrive, how to wait for them, and that a sub-agent's only output is its `reply`.
 */
export function defaultSystemPrompt(agent: AgentIdentity, canSpawn: boolean): string {
  const key = `${agent.depth === 0 ? 'root' : 'sub'}:${canSpawn}`;
  let parts = templates.get(key);
  if (!parts) templates.set(key, (parts = promptAround(NAME, agent.depth, canSpawn).split(NAME)));
  // Joined with `+`: V8 keeps the result as a small rope over the shared parts, rather than a
  // 1.5 KB copy per sub-agent of a 10,000-wide fan-out.
  return parts.length === 1 ? (parts[0] as string) : (parts[0] as string) + agent.name + (parts[1] as string);
}

/** Stands for the agent's name in the cached templates. */
const NAME = '\u0000name\u0000';
const templates = new Map<string, string[]>();

function promptAround(name: string, depth: number, canSpawn: boolean): string {
  const parts: string[] = [];
  if (depth === 0) {
    parts.push(
      "You are the root agent of an exarch run. Work on the user's task and answer the user directly. " +
        'Your final message of the run is what the user reads, so make it the complete answer.',
    );
  } else {
    parts.push(
      `You are sub-agent '${name}', started by another agent to do one task. Its message to you is all you ` +
        'know of its work, so do not assume more context than it gave.',
      'When you are done, call the `reply` tool with your complete result. Its `result` argument is the only thing ' +
        'the agent that started you receives: none of your other messages reach it. Put the whole report there, ' +
        'as a markdown string or as a JSON object. Calling `reply` ends your session once the other tool calls of ' +
        'the same response have run, so call it last, when the result is complete.',
    );
  }
  if (canSpawn) {
    parts.push(
      'You can delegate with the `agent` tool: it starts a sub-agent on a task and returns at once, while the ' +
        'sub-agent works on its own. Give each sub-agent a unique name and a self-contained task: it sees nothing ' +
        'of your conversation. Start independent sub-agents in the same response so they run in parallel.',
      "Each sub-agent's result arrives later as a message of its own, beginning with [agent 'NAME' replied] (or " +
        "[agent 'NAME' failed: …], [agent 'NAME' was cancelled], …). When you have nothing to do until your " +
        'sub-agents finish, call `wait_for_agents` in the same response as your `agent` calls: you are woken once ' +
        'they have finished, with all their results in one message, and no turn is spent on waiting. (`until: "any"` ' +
        'wakes you at the first result.) Do not poll or call tools just to pass time. `cancel_agent` stops a ' +
        'sub-agent you no longer need.',
    );
    if (depth > 0) parts.push('Wait for the results of your own sub-agents before you reply: replying cancels any that still run.');
  }
  return parts.join('\n\n');
}
