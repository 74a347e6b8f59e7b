import { ExarchError } from './exarchError.js';
import type { Message } from './types.js';

/**
 * The Messages API's structural rule for a request history, written once and used everywhere
 * (the scripted provider, the local API server, invariants in tests):
 * - roles alternate, starting with `user`; no message is empty; no text block is empty;
 * - every `tool_use` id is unique and is answered by exactly one `tool_result` in the very next
 *   message, which is a user message whose tool results come before any text;
 * - every `tool_result` answers a `tool_use` of the message just before it.
 * Returns the problems found, each naming the message index; an empty array means the API would
 * accept the history.
 */
export function findPairingProblems(messages: readonly Message[]): string[] {
  const problems: string[] = [];
  const seenToolUseIds = new Set<string>();
  if (messages.length === 0) problems.push('history is empty');
  messages.forEach((message, index) => {
    const expectedRole = index % 2 === 0 ? 'user' : 'assistant';
    if (message.role !== expectedRole) problems.push(`message ${index}: role ${message.role}, expected ${expectedRole}`);
    if (message.content.length === 0) problems.push(`message ${index}: empty content`);
    for (const block of message.content) {
      if (block.type === 'text' && block.text.length === 0) problems.push(`message ${index}: empty text block`);
    }
    if (message.role === 'assistant') {
      const ids = message.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
      for (const id of ids) {
        if (seenToolUseIds.has(id)) problems.push(`message ${index}: duplicate tool_use id ${id}`);
        seenToolUseIds.add(id);
      }
      if (ids.length === 0) return;
      const next = messages[index + 1];
      if (!next) {
        problems.push(`message ${index}: tool_use ${ids.join(', ')} without tool_result (history ends)`);
        return;
      }
      if (next.role !== 'user') return; // reported as a role problem
      const answered = new Map<string, number>();
      for (const block of next.content) {
        if (block.type === 'tool_result') answered.set(block.tool_use_id, (answered.get(block.tool_use_id) ?? 0) + 1);
      }
      for (const id of ids) {
        const count = answered.get(id) ?? 0;
        if (count === 0) problems.push(`message ${index}: tool_use ${id} has no tool_result in message ${index + 1}`);
        if (count > 1) problems.push(`message ${index + 1}: ${count} tool_results for tool_use ${id}`);
      }
    } else {
      const previous = messages[index - 1];
      const offered = new Set(previous?.role === 'assistant' ? previous.content.flatMap((b) => (b.type === 'tool_use' ? [b.id] : [])) : []);
      let sawText = false;
      for (const block of message.content) {
        if (block.type === 'text') sawText = true;
        else {
          if (sawText) problems.push(`message ${index}: tool_result ${block.tool_use_id} after text`);
          if (!offered.has(block.tool_use_id)) {
            problems.push(`message ${index}: tool_result ${block.tool_use_id} answers no tool_use of message ${index - 1}`);
          }
        }
      }
    }
  });
  return problems;
}

/** A history the API would refuse: every broken tool_use/tool_result pairing, one line each in `problems`. */
export class PairingError extends ExarchError<'pairing'> {
  constructor(readonly problems: readonly string[]) {
    super('pairing', `history breaks the tool_use/tool_result pairing rule: ${problems.join('; ')}`);
  }
}

/** Throws a `PairingError` listing every problem when the API would refuse `messages`. */
export function assertToolPairing(messages: readonly Message[]): void {
  const problems = findPairingProblems(messages);
  if (problems.length > 0) throw new PairingError(problems);
}
