/**
 * Steering lines as a person types them (`/cancel PATH`, `/msg PATH TEXT`, `/help`): parsed, and
 * answered in the same words wherever the tree runs (here, or spread over workers).
 */

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

/** A steering line, parsed: what to do, or the one line that says why it is no command. */
type SteeringLine =
  | { readonly kind: 'none' }
  | { readonly kind: 'help' }
  | { readonly kind: 'cancel'; readonly agent: string }
  | { readonly kind: 'msg'; readonly agent: string; readonly text: string }
  | { readonly kind: 'wrong'; readonly answer: readonly string[] };

/**
 * Characters a steering line may have: a message a person gives an agent mid-run, not a document
 * (a long text goes in a file the agent is told to read). A longer line is refused whole, and the
 * readers of stdin stop keeping one once it is past this (see src/cli/boundedLines.ts).
 */
export const MAX_STEERING_LINE_CHARS = 64 * 1024;

/** What a line over MAX_STEERING_LINE_CHARS is answered with, wherever it was read. */
export const TOO_LONG_ANSWER = `exarch: a line longer than ${MAX_STEERING_LINE_CHARS} characters was refused; put a long message in a file and /msg the agent to read it`;

/** Parses one steering line (`/cancel PATH`, `/msg PATH TEXT`, `/help`); `place` words the refusals. */
function parseSteeringLine(line: string, place: SteeringPlace = 'here'): SteeringLine {
  if (line.length > MAX_STEERING_LINE_CHARS) return { kind: 'wrong', answer: [TOO_LONG_ANSWER] };
  const text = line.trim();
  if (text === '') return { kind: 'none' };
  const match = /^\/(\S+)\s*(.*)$/s.exec(text);
  const [, command = '', rest = ''] = match ?? [];
  switch (command) {
    case 'help':
    case '?':
      return { kind: 'help' };
    case 'cancel': {
      const [path, ...extra] = rest.split(/\s+/).filter(Boolean);
      if (path === undefined || extra.length > 0) return { kind: 'wrong', answer: ['exarch: /cancel takes one agent path: /cancel root/lead'] };
      const id = agentId(path);
      if (id === 'root')
        return {
          kind: 'wrong',
          answer: [
            `exarch: /cancel takes a sub-agent; ${place === 'here' ? 'Ctrl-C stops the whole run' : 'the whole run goes on on the workers (Ctrl-C stops following it)'}`,
          ],
        };
      return { kind: 'cancel', agent: id };
    }
    case 'msg': {
      const split = /^(\S+)\s+(\S[\s\S]*)$/.exec(rest);
      if (!split) return { kind: 'wrong', answer: ['exarch: /msg takes an agent path and the message: /msg root/lead also check the README'] };
      return { kind: 'msg', agent: agentId(split[1] ?? ''), text: (split[2] ?? '').trim() };
    }
    default:
      return { kind: 'wrong', answer: [`exarch: ${match ? `unknown command /${command}` : 'commands start with /'}; type /help`] };
  }
}

/** What a steering command says back, wherever the tree runs (`running`: the agents running now, root first). */
export const steeringAnswers = {
  help: (running: readonly string[], place: SteeringPlace): string[] => [
    ...steeringHelp(WHOLE_RUN[place]),
    `exarch: running: ${running.length > 0 ? running.join(', ') : 'nothing'}`,
  ],
  noSubAgent: (id: string, running: readonly string[]): string[] => [`exarch: no sub-agent ${id} is running (running: ${running.join(', ')})`],
  cancelling: (id: string): string[] => [`exarch: cancelling ${id} and everything it started`],
  noAgent: (id: string, running: readonly string[]): string[] => [`exarch: no agent ${id} is running (running: ${running.join(', ')})`],
  messaged: (id: string): string[] => [`exarch: ${id} gets the message at its next boundary`],
};

/**
 * What a steering line acts on, wherever the tree runs: the tree here (`steeringCommand`, which
 * answers at once, so an answer is printed before the next line is read) or a run spread over
 * workers (`steerSpreadRun`, which answers through the store). `A` is what an answer is there:
 * `string[]`, or a promise of one. Each method answers in `steeringAnswers`' words.
 */
export interface SteeringTarget<A> {
  /** `/help`: the help, and the agents running now. */
  help(): A;
  /** `/cancel PATH`: cancels the running sub-agent `agent`, or says none runs there. */
  cancel(agent: string): A;
  /** `/msg PATH TEXT`: gives the running agent `agent` the message, or says none runs there. */
  message(agent: string, text: string): A;
  /** An answer known without acting: nothing (a blank line), or why a line is no command. */
  said(lines: string[]): A;
}

/**
 * Acts on one steering line against `target`: the one place that reads what a line asks for, so a
 * tree here and a tree on the workers answer the same lines alike.
 *
 * @example
 * ```ts
 * const answer = steer('/msg lead look at the tests', 'here', {
 *   help: () => steeringAnswers.help(['root'], 'here'),
 *   cancel: (agent) => steeringAnswers.cancelling(agent),
 *   message: (agent) => steeringAnswers.messaged(agent),
 *   said: (lines) => lines,
 * }); // ['exarch: root/lead gets the message at its next boundary']
 * ```
 */
export function steer<A>(line: string, place: SteeringPlace, target: SteeringTarget<A>): A {
  const parsed = parseSteeringLine(line, place);
  switch (parsed.kind) {
    case 'none':
      return target.said([]);
    case 'wrong':
      return target.said([...parsed.answer]);
    case 'help':
      return target.help();
    case 'cancel':
      return target.cancel(parsed.agent);
    case 'msg':
      return target.message(parsed.agent, parsed.text);
  }
}

/** `lead/scribe` and `root/lead/scribe` name the same agent. */
function agentId(path: string): string {
  const trimmed = path.replace(/^\/+|\/+$/g, '');
  return trimmed === 'root' || trimmed.startsWith('root/') ? trimmed : `root/${trimmed}`;
}
