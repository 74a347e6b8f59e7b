/**
 * Replies and assistant prose are mostly markdown: the page renders them with markdown-it, with
 * raw HTML off (`<script>`, `<img onerror>` in a reply show as text) and its link check on (no
 * `javascript:` links); the page's CSP loads nothing from anywhere either way. A value that is
 * JSON (a reply of an object, pretty-printed) stays as it is, monospaced.
 */
const markdown = markdownit({ html: false, linkify: false, typographer: false });

function looksLikeJson(text: string): boolean {
  const t = text.trim();
  if (!(t.startsWith('{') || t.startsWith('['))) return false;
  try {
    JSON.parse(t);
    return true;
  } catch {
    return false;
  }
}

/** `text` rendered (markdown, or JSON as it is), cut at `limit` characters with a button for the rest. */
function rendered(text: string, limit: number, cls = 'md'): HTMLDivElement {
  if (looksLikeJson(text)) return clip('pre', null, text, limit);
  const box = h('div');
  const body = h('div', cls);
  const long = text.length > limit;
  // markdown-it escapes everything it does not turn into markup itself (html: false).
  body.innerHTML = markdown.render(long ? `${text.slice(0, limit)}…` : text);
  box.appendChild(body);
  if (long) {
    const more = h('button', 'more', `show all ${text.length.toLocaleString('en')} characters`);
    more.addEventListener('click', () => {
      body.innerHTML = markdown.render(text);
      more.remove();
    });
    box.appendChild(more);
  }
  return box;
}

/**
 * A reply as the parent's model reads it, rendered; a toggle shows the exact text it received
 * (real newlines, nothing interpreted).
 */
function replyView(text: string): HTMLDivElement {
  const box = h('div', 'reply-box');
  const json = looksLikeJson(text);
  const raw = h('pre', 'reply', text);
  if (json) {
    box.appendChild(raw);
    return box;
  }
  const pretty = h('div', 'reply md');
  pretty.innerHTML = markdown.render(text);
  raw.hidden = true;
  const toggle = h('button', 'more toggle', 'show the exact text');
  toggle.addEventListener('click', () => {
    raw.hidden = !raw.hidden;
    pretty.hidden = !raw.hidden;
    toggle.textContent = raw.hidden ? 'show the exact text' : 'show it rendered';
  });
  box.appendChild(toggle);
  box.appendChild(pretty);
  box.appendChild(raw);
  return box;
}
