/** Text for HTML element content or a quoted attribute value. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * JSON to embed in a `<script type="application/json">` element. Every `<`, `>` and `&` becomes a
 * JSON unicode escape, so the data can never close the element (`</script>`) or open a comment
 * (`<!--`), and U+2028/U+2029 are escaped for old parsers. `JSON.parse` reads it back unchanged.
 */
export function jsonForScript(value: unknown): string {
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
