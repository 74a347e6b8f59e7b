/** Text and number formats of the page, and the one way it builds DOM from text (never HTML). */

function esc(text: unknown): string {
  return String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** Milliseconds on the time axis and in details: `12.5 ms`, `3.250 s`, `2:05.3`. */
function fmtT(ms: number): string {
  const a = Math.abs(ms);
  if (a < 1000) return `${a < 10 ? ms.toFixed(2) : ms.toFixed(1)} ms`;
  if (a < 60000) return `${(ms / 1000).toFixed(a < 10000 ? 3 : 2)} s`;
  const m = Math.floor(ms / 60000);
  const s = (ms - m * 60000) / 1000;
  return `${m}:${s < 10 ? '0' : ''}${s.toFixed(1)}`;
}

/** A duration for the header: `812.0 ms`, `4.21 s`, `3 min 12 s`. */
function fmtDuration(ms: number): string {
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms - minutes * 60_000) / 1000)} s`;
}

/** A count: `950`, `1.2k`, `34k`, `1.5M`. */
function fmtN(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${Math.round(n / 1e3)}k`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return String(n);
}

/** US$ at list prices, as the CLI's summary writes it: `$0.012`, `$1.25`. */
function fmtCost(usd: number): string {
  return `$${usd.toFixed(usd < 1 ? 3 : 2)}`;
}

function plural(n: number, word: string): string {
  return `${n} ${word}${n === 1 ? '' : 's'}`;
}

function tokensOf(u: Usage): number {
  return u.inputTokens + u.outputTokens + u.cacheReadInputTokens + u.cacheCreationInputTokens;
}

function usageText(u: Usage | undefined): string {
  if (!u) return '';
  let s = `in ${fmtN(u.inputTokens)} · out ${fmtN(u.outputTokens)}`;
  if (u.cacheReadInputTokens) s += ` · cache read ${fmtN(u.cacheReadInputTokens)}`;
  if (u.cacheCreationInputTokens) s += ` · cache write ${fmtN(u.cacheCreationInputTokens)}`;
  return s;
}

/** An element with a class and text content (set as text, so nothing in it is markup). */
function h<K extends keyof HTMLElementTagNameMap>(tag: K, cls?: string | null, text?: string | null): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  if (cls) el.className = cls;
  if (text !== undefined && text !== null) el.textContent = text;
  return el;
}

/** Text cut at `limit` characters, with a button that shows the rest. */
function clip(tag: 'div' | 'pre', cls: string | null, text: string, limit: number): HTMLDivElement {
  const box = h('div');
  const long = text.length > limit;
  const el = h(tag, cls, long ? `${text.slice(0, limit)}…` : text);
  box.appendChild(el);
  if (long) {
    const more = h('button', 'more', `show all ${text.length.toLocaleString('en')} characters`);
    more.addEventListener('click', () => {
      el.textContent = text;
      more.remove();
    });
    box.appendChild(more);
  }
  return box;
}
