import type { AgentResult } from './types.js';

/** One finished child, rendered with the tags of CONTRACT §4. */
export function renderAgentResult(result: AgentResult): string {
  const name = result.name;
  switch (result.outcome) {
    case 'replied':
      return `[agent '${name}' replied]\n${result.text}`;
    case 'empty':
      return `[agent '${name}' finished with no output]`;
    case 'capped':
      return `[agent '${name}' hit the step cap]`;
    case 'failed':
      return `[agent '${name}' failed: ${oneLine(result.reason ?? 'unknown error')}]`;
    case 'cancelled':
      return `[agent '${name}' was cancelled]`;
  }
}

/** The inbox as the text of one synthetic user turn. */
export function renderInbox(results: readonly AgentResult[]): string {
  return results.map(renderAgentResult).join('\n\n');
}

/** Collapses whitespace so a reason fits the one-line tag. */
export function oneLine(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}
