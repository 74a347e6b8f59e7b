import type { AnyActorRef } from 'xstate';
import { cancelAgent, messageAgent, runningAgents } from '../engine/steering.js';

/** What `/help` says; `whole`: what stops the whole run, where the person is. */
const steeringHelp = (whole: string): string[] => [
  'exarch: commands, while the run goes on:',
  '  /cancel PATH      cancel a sub-agent and everything it started (its parent is told it was cancelled)',
  '  /msg PATH TEXT    give a running agent a message: it reads it at its next boundary',
  '  /help             this help, and the agents running now',
  `exarch: PATH is an agent's path in the tree (root/lead/scribe; the root/ may be left out). ${whole}.`,
];

/** Where the person steering is: at the run's own terminal, or following a run on the workers (`run --db`). */
export type SteeringPlace = 'here' | 'followed';

const WHOLE_RUN: Record<SteeringPlace, string> = {
  here: 'Ctrl-C stops the whole run',
  followed: 'The whole run goes on on the workers; Ctrl-C stops following it',
};

/**
 * One steering command line of `exarch run` (typed on the terminal, or read from stdin with
 * `--steer`), acted on at once against the tree of `root`. Returns what to tell the person, one
 * line each; a line that is no command gets one line saying so.
 */
export function steeringCommand(line: string, root: AnyActorRef, place: SteeringPlace = 'here'): string[] {
  const text = line.trim();
  if (text === '') return [];
  const match = /^\/(\S+)\s*(.*)$/s.exec(text);
  const [, command = '', rest = ''] = match ?? [];
  switch (command) {
    case 'help':
    case '?': {
      const running = runningAgents(root);
      return [...steeringHelp(WHOLE_RUN[place]), `exarch: running: ${running.length > 0 ? running.join(', ') : 'nothing'}`];
    }
    case 'cancel': {
      const [path, ...extra] = rest.split(/\s+/).filter(Boolean);
      if (path === undefined || extra.length > 0) return ['exarch: /cancel takes one agent path: /cancel root/lead'];
      const id = agentId(path);
      if (id === 'root')
        return [
          `exarch: /cancel takes a sub-agent; ${place === 'here' ? 'Ctrl-C stops the whole run' : 'the whole run goes on on the workers (Ctrl-C stops following it)'}`,
        ];
      if (!cancelAgent(root, id, 'cancelled from the terminal')) return [`exarch: no sub-agent ${id} is running (running: ${runningAgents(root).join(', ')})`];
      return [`exarch: cancelling ${id} and everything it started`];
    }
    case 'msg': {
      const split = /^(\S+)\s+(\S[\s\S]*)$/.exec(rest);
      if (!split) return ['exarch: /msg takes an agent path and the message: /msg root/lead also check the README'];
      const id = agentId(split[1] ?? '');
      const message = (split[2] ?? '').trim();
      if (!messageAgent(root, id, message)) return [`exarch: no agent ${id} is running (running: ${runningAgents(root).join(', ')})`];
      return [`exarch: ${id} gets the message at its next boundary`];
    }
    default:
      return [`exarch: ${match ? `unknown command /${command}` : 'commands start with /'}; type /help`];
  }
}

/** `lead/scribe` and `root/lead/scribe` name the same agent. */
function agentId(path: string): string {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  return trimmed === 'root' || trimmed.startsWith('root/') ? trimmed : `root/${trimmed}`;
}
