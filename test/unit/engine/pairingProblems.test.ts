import { describe, expect, it } from 'vitest';
import { findPairingProblems, PairingError, assertToolPairing } from '../../../src/engine/pairing.js';
import type { Message, ToolResultBlock } from '../../../src/engine/types.js';

/**
 * Every problem the pairing rule reports, for histories that break it in more than one way at
 * once: the expected lists are written out by hand from the rule in src/engine/pairing.ts's doc comment.
 */

const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] });
const said = (text: string): Message => ({ role: 'assistant', content: [{ type: 'text', text }] });
const calls = (...ids: string[]): Message => ({ role: 'assistant', content: ids.map((id) => ({ type: 'tool_use' as const, id, name: 'x', input: {} })) });
const resultBlocks = (...ids: string[]): ToolResultBlock[] => ids.map((id) => ({ type: 'tool_result', tool_use_id: id, content: 'ok' }));
const results = (...ids: string[]): Message => ({ role: 'user', content: resultBlocks(...ids) });

describe('pairing rule: each problem named with its message', () => {
  it('an empty history is refused', () => {
    expect(findPairingProblems([])).toEqual(['history is empty']);
  });

  it('a plain conversation that alternates from the user is accepted', () => {
    expect(findPairingProblems([user('a'), said('b'), user('c'), said('d')])).toEqual([]);
    expect(findPairingProblems([user('a'), calls('1', '2'), results('2', '1'), said('d')])).toEqual([]);
  });

  it('roles out of turn are each named, with the role expected there', () => {
    expect(findPairingProblems([said('a'), user('b')])).toEqual(['message 0: role assistant, expected user', 'message 1: role user, expected assistant']);
    expect(findPairingProblems([user('a'), user('b')])).toEqual(['message 1: role user, expected assistant']);
  });

  it('an empty message and an empty text block are both reported, wherever they are', () => {
    expect(findPairingProblems([user('a'), { role: 'assistant', content: [] }, user('')])).toEqual(['message 1: empty content', 'message 2: empty text block']);
  });

  it('two calls, one unanswered: only the unanswered one is named', () => {
    expect(findPairingProblems([user('a'), calls('1', '2'), results('1')])).toEqual(['message 1: tool_use 2 has no tool_result in message 2']);
  });

  it('calls at the end of the history are all listed', () => {
    expect(findPairingProblems([user('a'), calls('1', '2')])).toEqual(['message 1: tool_use 1, 2 without tool_result (history ends)']);
  });

  it('calls followed by another assistant message are a role problem, not missing results', () => {
    expect(findPairingProblems([user('a'), calls('1'), said('b')])).toEqual(['message 2: role assistant, expected user']);
  });

  it('three results for one call are counted', () => {
    expect(findPairingProblems([user('a'), calls('1'), results('1', '1', '1')])).toEqual(['message 2: 3 tool_results for tool_use 1']);
  });

  it('a result after a plain assistant message, or as the first message, answers nothing', () => {
    expect(findPairingProblems([user('a'), said('b'), results('1')])).toEqual(['message 2: tool_result 1 answers no tool_use of message 1']);
    expect(findPairingProblems([results('1')])).toEqual(['message 0: tool_result 1 answers no tool_use of message -1']);
  });

  it('a result answers only the message just before it, not an earlier call', () => {
    expect(findPairingProblems([user('a'), calls('1'), results('1'), said('b'), results('1')])).toEqual([
      'message 4: tool_result 1 answers no tool_use of message 3',
    ]);
  });

  it('results after text are named; text after results is fine', () => {
    const textThenResults: Message = { role: 'user', content: [{ type: 'text', text: 'note' }, ...resultBlocks('1', '2')] };
    expect(findPairingProblems([user('a'), calls('1', '2'), textThenResults])).toEqual([
      'message 2: tool_result 1 after text',
      'message 2: tool_result 2 after text',
    ]);
    const resultsThenText: Message = { role: 'user', content: [...resultBlocks('1'), { type: 'text', text: 'note' }] };
    expect(findPairingProblems([user('a'), calls('1'), resultsThenText])).toEqual([]);
  });

  it('an id reused in a later response is named at that message, once', () => {
    expect(findPairingProblems([user('a'), calls('1'), results('1'), calls('2', '1'), results('2', '1')])).toEqual(['message 3: duplicate tool_use id 1']);
  });

  it('the error lists every problem, in order, and keeps them', () => {
    let caught: unknown;
    try {
      assertToolPairing([said('a'), user('')]);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(PairingError);
    const error = caught as PairingError;
    expect(error.name).toBe('PairingError');
    expect(error.message).toBe(
      'history breaks the tool_use/tool_result pairing rule: message 0: role assistant, expected user; message 1: role user, expected assistant; message 1: empty text block',
    );
    expect(error.problems).toEqual(['message 0: role assistant, expected user', 'message 1: role user, expected assistant', 'message 1: empty text block']);
    expect(() => assertToolPairing([user('a')])).not.toThrow();
  });
});
