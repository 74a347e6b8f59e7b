import { renderValue } from '../../engine/render.js';

/**
 * The text a model sees for an MCP `tools/call` result (before the shared clip at the tool
 * output cap). Text blocks pass through; binary content (images, audio, blob resources) is
 * described, never inlined: base64 bytes are tokens a model cannot look at. `structuredContent`
 * is rendered as JSON when the server sent no text (a server that sends both is asked by the
 * MCP spec to put the same JSON in a text block, so showing it twice would pay for it twice).
 * An older server's `{ toolResult }` is rendered as a value.
 */
export function renderCallResult(result: unknown): string {
  if (typeof result !== 'object' || result === null) return renderValue(result);
  const record = result as Record<string, unknown>;
  if (!('content' in record) && 'toolResult' in record) return renderValue(record['toolResult']);
  const content = Array.isArray(record['content']) ? (record['content'] as unknown[]) : [];
  const parts = content.map(renderBlock);
  const hasText = content.some((block) => isRecord(block) && block['type'] === 'text');
  const structured = record['structuredContent'];
  if (!hasText && structured !== undefined && structured !== null) parts.push(renderValue(structured));
  return parts.filter((part) => part !== '').join('\n\n');
}

function renderBlock(block: unknown): string {
  if (!isRecord(block)) return '[unreadable content block]';
  switch (block['type']) {
    case 'text':
      return typeof block['text'] === 'string' ? block['text'] : '';
    case 'image':
    case 'audio':
      return `[${block['type']}: ${text(block['mimeType'], 'unknown type')}, ${base64Bytes(block['data'])} bytes, not shown]`;
    case 'resource_link':
      return `[resource link: ${text(block['name'], '(no name)')} ${text(block['uri'], '')}${block['mimeType'] === undefined ? '' : ` (${text(block['mimeType'], '')})`}]`;
    case 'resource': {
      const resource = isRecord(block['resource']) ? block['resource'] : {};
      const uri = text(resource['uri'], '(no uri)');
      if (typeof resource['text'] === 'string') return `[resource ${uri}]\n${resource['text']}`;
      return `[resource ${uri}: ${text(resource['mimeType'], 'binary')}, ${base64Bytes(resource['blob'])} bytes, not shown]`;
    }
    default:
      return `[content of type ${JSON.stringify(text(block['type'], '?')).slice(0, 80)}, not shown]`;
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** A short string field of the server's, kept to one line of bounded length. */
function text(value: unknown, fallback: string): string {
  if (typeof value !== 'string') return fallback;
  const line = value.replace(/\s+/g, ' ');
  return line.length > 200 ? `${line.slice(0, 200)}…` : line;
}

/** Bytes a base64 string decodes to, without decoding it. */
function base64Bytes(data: unknown): number {
  if (typeof data !== 'string') return 0;
  const padding = data.endsWith('==') ? 2 : data.endsWith('=') ? 1 : 0;
  return Math.max(0, Math.floor((data.length * 3) / 4) - padding);
}
