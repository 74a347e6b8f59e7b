import type { AssistantBlock, Message, TextBlock, ToolUseBlock, UserBlock } from './types.js';
import { wellFormedAssistantBlock, wellFormedUserBlock } from './wellFormed.js';

/**
 * History helpers. The history is one append-only array per session, shared by reference
 * between snapshots: appending is O(1), so a long session costs linear time.
 */

/**
 * Appends user content, merging into a trailing user message so roles keep alternating
 * (tool results and a reminder, or an inbox turn and a queued user message, become one message).
 * Tool results always stay ahead of text, as the API requires.
 */
export function appendUserBlocks(messages: Message[], appended: readonly UserBlock[]): void {
  if (appended.length === 0) return;
  // Nothing enters a history that a request could not carry (see wellFormed.ts).
  const blocks = appended.map(wellFormedUserBlock);
  const last = messages[messages.length - 1];
  if (last?.role === 'user') {
    const merged = [...last.content, ...blocks];
    const results = merged.filter((b) => b.type === 'tool_result');
    const texts = merged.filter((b) => b.type === 'text');
    messages[messages.length - 1] = { role: 'user', content: [...results, ...texts] };
  } else {
    messages.push({ role: 'user', content: blocks });
  }
}

/**
 * Appends an assistant message. After `pause_turn` the history already ends with the paused
 * assistant message, and the continuation belongs to that same message.
 */
export function appendAssistantBlocks(messages: Message[], appended: readonly AssistantBlock[]): void {
  if (appended.length === 0) return;
  const blocks = appended.map(wellFormedAssistantBlock);
  const last = messages[messages.length - 1];
  if (last?.role === 'assistant') messages[messages.length - 1] = { role: 'assistant', content: [...last.content, ...blocks] };
  else messages.push({ role: 'assistant', content: blocks });
}

/** Text blocks the API accepts (it refuses empty ones). */
export function nonEmptyBlocks(blocks: readonly AssistantBlock[]): AssistantBlock[] {
  return blocks.filter((b) => b.type !== 'text' || b.text.length > 0);
}

export function toolUses(blocks: readonly AssistantBlock[]): ToolUseBlock[] {
  return blocks.filter((b): b is ToolUseBlock => b.type === 'tool_use');
}

export function textOf(blocks: readonly AssistantBlock[]): string {
  return blocks
    .filter((b): b is TextBlock => b.type === 'text')
    .map((b) => b.text)
    .join('');
}

/** The text of the last assistant message: what a root "says" at the end of its turn. */
export function finalAssistantText(messages: readonly Message[]): string {
  for (let i = messages.length - 1; i >= 0; i--) {
    const message = messages[i];
    if (message?.role === 'assistant') return textOf(message.content);
  }
  return '';
}

export function text(text: string): TextBlock {
  return { type: 'text', text };
}
