import type { AssistantBlock, UserBlock } from './types.js';

/**
 * Lone surrogates (half of a UTF-16 pair, e.g. `\ud800`) become U+FFFD before anything enters a
 * history, because the API refuses a request body that holds one (HTTP 400) and the session would
 * fail on text it did not write: a tool's output, a child's reply, a model's own cut-off emoji.
 * Strings that are already well formed (all but a few) are returned as they are.
 */

// ES2024's String.prototype.isWellFormed / toWellFormed (Node 20 has them; the project's lib is ES2023).
interface WellFormedString {
  isWellFormed(): boolean;
  toWellFormed(): string;
}

/** Whether `text` holds no lone surrogate. */
export function isWellFormedText(text: string): boolean {
  return (text as unknown as WellFormedString).isWellFormed();
}

export function wellFormedText(text: string): string {
  const s = text as unknown as WellFormedString;
  return s.isWellFormed() ? text : s.toWellFormed();
}

/** Past this depth a value is left as it is: tool inputs deeper than 64 levels are refused before they get here. */
const MAX_DEPTH = 256;

/** `value` with every string well formed; objects and arrays are copied only where something changed. */
function wellFormedValue(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return wellFormedText(value);
  if (typeof value !== 'object' || value === null || depth > MAX_DEPTH) return value;
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    value.forEach((item, i) => {
      const fixed = wellFormedValue(item, depth + 1);
      if (fixed !== item) (copy ??= [...value])[i] = fixed;
    });
    return copy ?? value;
  }
  let copy: Record<string, unknown> | undefined;
  for (const [key, item] of Object.entries(value)) {
    const fixed = wellFormedValue(item, depth + 1);
    const fixedKey = wellFormedText(key);
    if (fixed !== item || fixedKey !== key) {
      copy ??= { ...(value as Record<string, unknown>) };
      if (fixedKey !== key) delete copy[key];
      copy[fixedKey] = fixed;
    }
  }
  return copy ?? value;
}

export function wellFormedUserBlock(block: UserBlock): UserBlock {
  if (block.type === 'text') {
    const text = wellFormedText(block.text);
    return text === block.text ? block : { ...block, text };
  }
  const content = wellFormedText(block.content);
  return content === block.content ? block : { ...block, content };
}

export function wellFormedAssistantBlock(block: AssistantBlock): AssistantBlock {
  if (block.type === 'text') {
    const text = wellFormedText(block.text);
    return text === block.text ? block : { ...block, text };
  }
  const input = wellFormedValue(block.input);
  return input === block.input ? block : { ...block, input: input as typeof block.input };
}
