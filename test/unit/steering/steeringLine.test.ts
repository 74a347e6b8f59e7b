import { describe, expect, it } from 'vitest';
import { steer, steeringAnswers, type SteeringTarget } from '../../../src/engine/steeringLine.js';

/** A target that answers with what it was asked, so each test sees which act a line became. */
const asked: SteeringTarget<string[]> = {
  help: () => ['help'],
  cancel: (agent) => [`cancel ${agent}`],
  message: (agent, text) => [`message ${agent}: ${text}`],
  said: (lines) => ['said', ...lines],
};

describe('steer: one reading of a steering line for the tree here and the tree on the workers', () => {
  it('a blank line asks for nothing', () => {
    expect(steer('   ', 'here', asked)).toEqual(['said']);
  });

  it('/help and /? ask for the help', () => {
    expect(steer('/help', 'here', asked)).toEqual(['help']);
    expect(steer('  /?  ', 'followed', asked)).toEqual(['help']);
  });

  it('/cancel takes one path, with or without root/, and names the agent from the root', () => {
    expect(steer('/cancel lead/scribe', 'here', asked)).toEqual(['cancel root/lead/scribe']);
    expect(steer('/cancel /root/lead/', 'here', asked)).toEqual(['cancel root/lead']);
    expect(steer('/cancel //lead//', 'here', asked)).toEqual(['cancel root/lead']);
    expect(steer('/cancel', 'here', asked)).toEqual(['said', 'exarch: /cancel takes one agent path: /cancel root/lead']);
    expect(steer('/cancel a b', 'here', asked)).toEqual(['said', 'exarch: /cancel takes one agent path: /cancel root/lead']);
  });

  it('/cancel of the root is refused in the words of where the person is', () => {
    expect(steer('/cancel root', 'here', asked)).toEqual(['said', 'exarch: /cancel takes a sub-agent; Ctrl-C stops the whole run']);
    expect(steer('/cancel root', 'followed', asked)).toEqual([
      'said',
      'exarch: /cancel takes a sub-agent; the whole run goes on on the workers (Ctrl-C stops following it)',
    ]);
  });

  it('/msg takes a path and the rest of the line, its inner spacing kept', () => {
    expect(steer('/msg lead  look at  the tests ', 'here', asked)).toEqual(['message root/lead: look at  the tests']);
    expect(steer('/msg root hi', 'followed', asked)).toEqual(['message root: hi']);
    expect(steer('/msg lead', 'here', asked)).toEqual(['said', 'exarch: /msg takes an agent path and the message: /msg root/lead also check the README']);
  });

  it('anything else is refused with one line', () => {
    expect(steer('/stop', 'here', asked)).toEqual(['said', 'exarch: unknown command /stop; type /help']);
    expect(steer('hello', 'here', asked)).toEqual(['said', 'exarch: commands start with /; type /help']);
    expect(steer('see /help', 'here', asked)).toEqual(['said', 'exarch: commands start with /; type /help']);
    const long = `/msg lead ${'x'.repeat(64 * 1024)}`;
    expect(steer(long, 'here', asked)).toEqual([
      'said',
      'exarch: a line longer than 65536 characters was refused; put a long message in a file and /msg the agent to read it',
    ]);
  });

  it('a line of exactly 65,536 characters is still a command', () => {
    const text = 'x'.repeat(64 * 1024 - '/msg lead '.length);
    expect(steer(`/msg lead ${text}`, 'here', asked)).toEqual([`message root/lead: ${text}`]);
  });

  it('answers in the target’s kind: a promise from an asynchronous target', async () => {
    const later: SteeringTarget<Promise<string[]>> = {
      help: async () => ['help'],
      cancel: async (agent) => [`cancel ${agent}`],
      message: async (agent) => [`message ${agent}`],
      said: async (lines) => lines,
    };
    await expect(steer('/cancel lead', 'followed', later)).resolves.toEqual(['cancel root/lead']);
    await expect(steer('', 'followed', later)).resolves.toEqual([]);
  });
});

describe('steeringAnswers: the same words wherever the tree runs', () => {
  const help = [
    'exarch: commands, while the run goes on:',
    '  /cancel PATH      cancel a sub-agent and everything it started (its parent is told it was cancelled)',
    '  /msg PATH TEXT    give a running agent a message: it reads it at its next boundary',
    '  /help             this help, and the agents running now',
  ];

  it('/help says the commands, what stops the whole run where the person is, and who runs', () => {
    expect(steeringAnswers.help(['root', 'root/lead'], 'here')).toEqual([
      ...help,
      "exarch: PATH is an agent's path in the tree (root/lead/scribe; the root/ may be left out). Ctrl-C stops the whole run.",
      'exarch: running: root, root/lead',
    ]);
    expect(steeringAnswers.help([], 'followed')).toEqual([
      ...help,
      "exarch: PATH is an agent's path in the tree (root/lead/scribe; the root/ may be left out). The whole run goes on on the workers; Ctrl-C stops following it.",
      'exarch: running: nothing',
    ]);
  });

  it('what a cancel and a message say, done or not', () => {
    expect(steeringAnswers.cancelling('root/lead')).toEqual(['exarch: cancelling root/lead and everything it started']);
    expect(steeringAnswers.noSubAgent('root/x', ['root', 'root/lead'])).toEqual(['exarch: no sub-agent root/x is running (running: root, root/lead)']);
    expect(steeringAnswers.messaged('root')).toEqual(['exarch: root gets the message at its next boundary']);
    expect(steeringAnswers.noAgent('root/x', ['root', 'root/lead'])).toEqual(['exarch: no agent root/x is running (running: root, root/lead)']);
  });
});
