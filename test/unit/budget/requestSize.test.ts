import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { RequestSizer } from '../../../src/engine/requestSize.js';
import type { Message, ToolSpec } from '../../../src/engine/types.js';

/**
 * What a budget estimates a request from (issue 37): its size in UTF-8 bytes, kept up to date as a
 * session's history grows, every message but the last measured once. The oracle measures the whole
 * request afresh each time, the way the request will be sent (its JSON), sharing nothing with the
 * sizer's cache.
 */

const SYSTEM = 'You are a careful agent: réponds en français si on te parle français 😀.';
const TOOLS: ToolSpec[] = [
  { name: 'echo', description: 'Echo the text back — unchanged.', input_schema: { type: 'object', properties: { text: { type: 'string' } } } },
];

function oracle(messages: readonly Message[], extra: number): number {
  let bytes = Buffer.from(SYSTEM, 'utf8').length + Buffer.from(JSON.stringify(TOOLS), 'utf8').length + extra;
  for (const message of messages) bytes += Buffer.from(JSON.stringify(message), 'utf8').length;
  return bytes;
}

const text = fc.string({ unit: 'grapheme', maxLength: 40 });
const op = fc.oneof(
  fc.record({ kind: fc.constant('append' as const), role: fc.constantFrom('user' as const, 'assistant' as const), text }),
  fc.record({ kind: fc.constant('merge' as const), text }),
  fc.record({ kind: fc.constant('cut' as const), keep: fc.nat({ max: 6 }) }),
);

describe('RequestSizer', () => {
  it('is the UTF-8 size of the request as it would be sent, through appends, merges into the last message and a shorter history', () => {
    fc.assert(
      fc.property(fc.array(op, { maxLength: 30 }), fc.nat({ max: 5_000 }), (ops, extra) => {
        const sizer = new RequestSizer(SYSTEM, TOOLS);
        let messages: Message[] = [];
        expect(sizer.bytes(messages, extra)).toBe(oracle(messages, extra));
        for (const step of ops) {
          if (step.kind === 'append') messages.push({ role: step.role, content: [{ type: 'text', text: step.text }] } as Message);
          else if (step.kind === 'merge' && messages.length > 0) {
            // As appendUserBlocks merges: the last message replaced by one with more blocks.
            const last = messages[messages.length - 1] as Message;
            messages[messages.length - 1] = { ...last, content: [...last.content, { type: 'text', text: step.text }] } as Message;
          } else if (step.kind === 'cut') messages = messages.slice(0, step.keep);
          expect(sizer.bytes(messages, extra)).toBe(oracle(messages, extra));
          // Asked twice, the same answer: what it keeps between calls is not spent twice.
          expect(sizer.bytes(messages)).toBe(oracle(messages, 0));
        }
      }),
      { numRuns: 300 },
    );
  });

  it('measures a message appended to in place again once its blocks change, not its stale size', () => {
    const sizer = new RequestSizer(SYSTEM, TOOLS);
    const last: Message = { role: 'user', content: [{ type: 'text', text: 'a' }] };
    const messages: Message[] = [last];
    expect(sizer.bytes(messages)).toBe(oracle(messages, 0));
    (last.content as unknown[]).push({ type: 'text', text: 'ünïcödé and more' });
    expect(sizer.bytes(messages)).toBe(oracle(messages, 0));
  });
});
