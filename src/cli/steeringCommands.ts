import type { AnyActorRef } from 'xstate';
import { cancelAgent, messageAgent, runningAgents } from '../engine/steering.js';
import { type SteeringPlace, steer, steeringAnswers } from '../engine/steeringLine.js';

/**
 * One steering command line of `exarch run` (typed on the terminal, or read from stdin with
 * `--steer`), acted on at once against the tree of `root`. Returns what to tell the person, one
 * line each; a line that is no command gets one line saying so.
 */
export function steeringCommand(line: string, root: AnyActorRef, place: SteeringPlace = 'here'): string[] {
  return steer(line, place, {
    help: () => steeringAnswers.help(runningAgents(root), place),
    cancel: (agent) =>
      cancelAgent(root, agent, 'cancelled from the terminal') ? steeringAnswers.cancelling(agent) : steeringAnswers.noSubAgent(agent, runningAgents(root)),
    message: (agent, text) => (messageAgent(root, agent, text) ? steeringAnswers.messaged(agent) : steeringAnswers.noAgent(agent, runningAgents(root))),
    said: (lines) => lines,
  });
}
