import type { AnyActorRef } from 'xstate';
import { cancelAgent, messageAgent, runningAgents } from '../engine/steering.js';
import { parseSteeringLine, steeringAnswers, type SteeringPlace } from '../engine/steeringLine.js';

/**
 * One steering command line of `exarch run` (typed on the terminal, or read from stdin with
 * `--steer`), acted on at once against the tree of `root`. Returns what to tell the person, one
 * line each; a line that is no command gets one line saying so.
 */
export function steeringCommand(line: string, root: AnyActorRef, place: SteeringPlace = 'here'): string[] {
  const parsed = parseSteeringLine(line, place);
  switch (parsed.kind) {
    case 'none':
      return [];
    case 'wrong':
      return [...parsed.answer];
    case 'help':
      return steeringAnswers.help(runningAgents(root), place);
    case 'cancel':
      return cancelAgent(root, parsed.agent, 'cancelled from the terminal')
        ? steeringAnswers.cancelling(parsed.agent)
        : steeringAnswers.noSubAgent(parsed.agent, runningAgents(root));
    case 'msg':
      return messageAgent(root, parsed.agent, parsed.text)
        ? steeringAnswers.messaged(parsed.agent)
        : steeringAnswers.noAgent(parsed.agent, runningAgents(root));
  }
}
