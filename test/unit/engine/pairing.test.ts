import { describe, expect, it } from 'vitest';
import { assertToolPairing, findPairingProblems, type Message } from '../../../src/index.js';

/** The pairing check is the oracle for every other test: it must catch each way a history breaks. */

const user = (text: string): Message => ({ role: 'user', content: [{ type: 'text', text }] });
const call = (id: string): Message => ({ role: 'assistant', content: [{ type: 'tool_use', id, name: 'x', input: {} }] });
const result = (...ids: string[]): Message => ({ role: 'user', content: ids.map((id) => ({ type: 'tool_result' as const, tool_use_id: id, content: 'ok' })) });

describe('findPairingProblems', () => {
  it('accepts a well-formed history', () => {
    expect(findPairingProblems([user('hi'), call('a'), result('a'), { role: 'assistant', content: [{ type: 'text', text: 'done' }] }])).toEqual([]);
  });

  it('finds a tool_use without its result', () => {
    expect(findPairingProblems([user('hi'), call('a'), user('next')])).toEqual(['message 1: tool_use a has no tool_result in message 2']);
    expect(findPairingProblems([user('hi'), call('a')])).toEqual(['message 1: tool_use a without tool_result (history ends)']);
  });

  it('finds a result that answers nothing, and a duplicate result', () => {
    expect(findPairingProblems([user('hi'), call('a'), result('a', 'b')])).toEqual(['message 2: tool_result b answers no tool_use of message 1']);
    expect(findPairingProblems([user('hi'), call('a'), result('a', 'a')])).toEqual(['message 2: 2 tool_results for tool_use a']);
  });

  it('finds roles out of order, empty messages and empty text', () => {
    expect(findPairingProblems([call('a')])).toContain('message 0: role assistant, expected user');
    expect(findPairingProblems([{ role: 'user', content: [] }])).toContain('message 0: empty content');
    expect(findPairingProblems([user('')])).toContain('message 0: empty text block');
  });

  it('finds text ahead of tool results and reused tool_use ids', () => {
    const textFirst: Message = {
      role: 'user',
      content: [
        { type: 'text', text: 'x' },
        { type: 'tool_result', tool_use_id: 'a', content: 'ok' },
      ],
    };
    expect(findPairingProblems([user('hi'), call('a'), textFirst])).toEqual(['message 2: tool_result a after text']);
    expect(findPairingProblems([user('hi'), call('a'), result('a'), call('a'), result('a')])).toContain('message 3: duplicate tool_use id a');
  });

  it('assertToolPairing throws one error listing every problem', () => {
    expect(() => assertToolPairing([user('hi'), call('a'), user('x')])).toThrow(
      'history breaks the tool_use/tool_result pairing rule: message 1: tool_use a has no tool_result in message 2',
    );
  });
});
