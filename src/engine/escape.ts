import { stringifyBounded } from './nesting.js';

/** Text for HTML element content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * JSON to embed in a `<script type="application/json">` element. Every `<`, `>` and `&` becomes a
 * JSON unicode escape, so the data can never close the element (`</script>`) or open a comment
 * (`<!--`), and U+2028/U+2029 are escaped for old parsers. `JSON.parse` reads it back unchanged.
 * Values nested deeper than the trace keeps are elided (see nesting.ts), so no input can overflow the stack here.
 */
export function jsonForScript(value: unknown): string {
  return escapeForScript(stringifyBounded(value));
}

/** JSON text made safe inside a `<script>` element, as `jsonForScript` writes it. */
export function escapeForScript(json: string): string {
  return json.replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
