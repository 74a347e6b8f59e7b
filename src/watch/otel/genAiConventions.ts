import type { Attributes } from '@opentelemetry/api';
import type { Message, Usage } from '../../engine/types.js';

/** `gen_ai.usage.*`; the conventions count cached tokens in `input_tokens` too, unlike Anthropic's `input_tokens`. */
export function usageAttributes(usage: Usage): Attributes {
  return {
    'gen_ai.usage.input_tokens': usage.inputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens,
    'gen_ai.usage.output_tokens': usage.outputTokens,
    'gen_ai.usage.cache_read.input_tokens': usage.cacheReadInputTokens,
    'gen_ai.usage.cache_creation.input_tokens': usage.cacheCreationInputTokens,
  };
}

/** A low-cardinality `error.type`: the HTTP status of a failed request when it had one. */
export function errorTypeOf(message: string): string {
  return /\(HTTP (\d{3})\)/.exec(message)?.[1] ?? '_OTHER';
}

type ConventionPart =
  | { readonly type: 'text'; readonly content: string }
  | { readonly type: 'tool_call'; readonly id: string; readonly name: string; readonly arguments: unknown }
  | { readonly type: 'tool_call_response'; readonly id: string; readonly response: string };

/** A message in the conventions' input-message schema: tool results as a `tool` message of their own, before the user's text. */
export function conventionMessages(message: Message): { role: string; parts: ConventionPart[] }[] {
  if (message.role === 'assistant') {
    return [
      {
        role: 'assistant',
        parts: message.content.map(
          (b): ConventionPart => (b.type === 'text' ? { type: 'text', content: b.text } : { type: 'tool_call', id: b.id, name: b.name, arguments: b.input }),
        ),
      },
    ];
  }
  const results: ConventionPart[] = [];
  const texts: ConventionPart[] = [];
  for (const block of message.content) {
    if (block.type === 'tool_result') results.push({ type: 'tool_call_response', id: block.tool_use_id, response: block.content });
    else texts.push({ type: 'text', content: block.text });
  }
  return [...(results.length > 0 ? [{ role: 'tool', parts: results }] : []), ...(texts.length > 0 ? [{ role: 'user', parts: texts }] : [])];
}
