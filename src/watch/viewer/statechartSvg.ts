import type { TraceStatechart } from '../trace/format.js';
import { stateColor } from './colors.js';
import { escapeHtml } from '../../engine/escape.js';

/**
 * The session statechart as an SVG, laid out in layers from left to right: the initial state
 * first, each other working state one layer after the first state that reaches it, and the final
 * states together in a last column. Parallel transitions between two states are drawn as one
 * arrow (its tooltip lists them); transitions from `*` (any state) are listed below the drawing.
 *
 * Every state is a `<g data-statechart-state="ID">` and every arrow a
 * `<g data-from="A" data-to="B">`, so the page can mark the active state and the way it came in.
 */
export interface StatechartDrawing {
  readonly svg: string;
  /** Transitions from any state (`*`), one line each: `cancel → cancelled`. */
  readonly anyState: readonly string[];
}

const BOX_H = 28;
const ROW_GAP = 14;
const COL_GAP = 56;
const CHAR_W = 7.4;
const PAD = 14;

interface Box {
  readonly id: string;
  readonly final: boolean;
  readonly x: number;
  readonly y: number;
  readonly w: number;
}

/** An event name as the diagram spells it: `xstate.done.actor.*` → `child done`. */
function shortEvent(event: string): string {
  const actor = /^xstate\.(done|error)\.actor\.(.+)$/.exec(event);
  if (actor) return actor[2] === '*' ? `child ${actor[1]}` : `${actor[1]}: ${actor[2]}`;
  return event;
}

function transitionText(t: TraceStatechart['transitions'][number]): string {
  return `${shortEvent(t.event)}${t.guard ? ` [${t.guard}]` : ''}`;
}

export function drawStatechart(chart: TraceStatechart): StatechartDrawing {
  const states = chart.states.filter((s) => s.id !== '*');
  const real = new Set(states.map((s) => s.id));
  const edges = chart.transitions.filter((t) => real.has(t.source) && real.has(t.target));
  const anyState = chart.transitions
    .filter((t) => !real.has(t.source) || !real.has(t.target))
    .map(
      (t) => `${t.source === '*' ? 'any state' : t.source}: ${transitionText(t)}${t.target === '*' || t.target === t.source ? ' (stays)' : ` → ${t.target}`}`,
    );

  // Layers: breadth-first from the initial state over the working states; finals last.
  const final = new Set(states.filter((s) => s.final).map((s) => s.id));
  const layer = new Map<string, number>();
  const start = real.has(chart.initial) ? chart.initial : states.find((s) => !s.final)?.id;
  if (start !== undefined) {
    layer.set(start, 0);
    const queue = [start];
    while (queue.length > 0) {
      const id = queue.shift() ?? '';
      for (const edge of edges) {
        if (edge.source !== id || final.has(edge.target) || layer.has(edge.target)) continue;
        layer.set(edge.target, (layer.get(id) ?? 0) + 1);
        queue.push(edge.target);
      }
    }
  }
  let lastWorking = Math.max(0, ...layer.values());
  for (const s of states) if (!s.final && !layer.has(s.id)) layer.set(s.id, ++lastWorking);
  for (const s of states) if (s.final) layer.set(s.id, lastWorking + 1);

  const columns: string[][] = [];
  for (const s of states) {
    const column = layer.get(s.id) ?? 0;
    (columns[column] ??= []).push(s.id);
  }
  const widths = columns.map((ids) => Math.max(96, ...ids.map((id) => Math.round(id.length * CHAR_W + 30))));
  const tallest = Math.max(1, ...columns.map((ids) => ids.length));
  // Room above for loops and arrows that go back over the top, below for those that go under.
  const top = PAD + 30;
  const band = tallest * BOX_H + (tallest - 1) * ROW_GAP;
  const height = top + band + 40;
  const boxes = new Map<string, Box>();
  const rank = new Map<string, { index: number; of: number }>();
  let x = PAD + 16;
  columns.forEach((ids, column) => {
    const w = widths[column] ?? 96;
    // Boxes spread evenly over the band, so arrows to the next column pass between them.
    const slot = band / ids.length;
    ids.forEach((id, index) => {
      boxes.set(id, { id, final: final.has(id), x, y: top + slot * (index + 0.5) - BOX_H / 2, w });
      rank.set(id, { index, of: ids.length });
    });
    x += w + COL_GAP;
  });
  const width = x - COL_GAP + PAD;

  // One arrow per (source, target), listing every transition it stands for.
  const grouped = new Map<string, { source: string; target: string; labels: string[] }>();
  for (const edge of edges) {
    const key = `${edge.source}\u0000${edge.target}`;
    const group = grouped.get(key) ?? { source: edge.source, target: edge.target, labels: [] };
    const label = transitionText(edge);
    if (!group.labels.includes(label)) group.labels.push(label);
    grouped.set(key, group);
  }

  const parts: string[] = [];
  parts.push(
    `<svg class="statechart" viewBox="0 0 ${width} ${height}" width="${width}" height="${height}" role="img" aria-label="session statechart">`,
    '<defs>' +
      '<marker id="sc-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#94a3b8"/></marker>' +
      '<marker id="sc-arrow-taken" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="10" markerHeight="10" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#0f172a"/></marker>' +
      '</defs>',
  );
  for (const group of grouped.values()) {
    const a = boxes.get(group.source);
    const b = boxes.get(group.target);
    if (!a || !b) continue;
    const path = edgePath(a, b, layer, rank);
    const title = `${group.source} → ${group.target}\n${group.labels.join('\n')}`;
    parts.push(
      `<g class="sc-edge" data-from="${escapeHtml(group.source)}" data-to="${escapeHtml(group.target)}"><title>${escapeHtml(title)}</title>` +
        `<path d="${path}" marker-end="url(#sc-arrow)"/>` +
        `<path class="taken-path" d="${path}" marker-end="url(#sc-arrow-taken)"/>` +
        '</g>',
    );
  }
  for (const box of boxes.values()) {
    const color = stateColor(box.id);
    const initial = box.id === chart.initial;
    parts.push(
      `<g class="sc-state${box.final ? ' final' : ''}" data-statechart-state="${escapeHtml(box.id)}" style="--c:${color}">` +
        `<title>${escapeHtml(box.id)}${box.final ? ' (final)' : ''}</title>` +
        `<rect x="${box.x}" y="${box.y}" width="${box.w}" height="${BOX_H}" rx="8"/>` +
        (box.final ? `<rect class="inner" x="${box.x + 3}" y="${box.y + 3}" width="${box.w - 6}" height="${BOX_H - 6}" rx="6"/>` : '') +
        `<circle class="dot" cx="${box.x + 11}" cy="${box.y + BOX_H / 2}" r="4"/>` +
        `<text x="${box.x + 20}" y="${box.y + BOX_H / 2 + 4}">${escapeHtml(box.id)}</text>` +
        (initial
          ? `<circle class="initial" cx="${box.x - 20}" cy="${box.y + BOX_H / 2}" r="4"/><path class="initial" d="M${box.x - 16},${box.y + BOX_H / 2} L${box.x - 1},${box.y + BOX_H / 2}" marker-end="url(#sc-arrow-taken)"/>`
          : '') +
        '</g>',
    );
  }
  parts.push('</svg>');
  return { svg: parts.join(''), anyState };
}

/**
 * Forward arrows run from the right edge to the left edge; a loop sits on the top left of its box;
 * an arrow back to an earlier column goes over the top when it leaves the top box of its column,
 * else underneath.
 */
function edgePath(a: Box, b: Box, layer: ReadonlyMap<string, number>, rank: ReadonlyMap<string, { index: number; of: number }>): string {
  const r = (n: number): string => String(Math.round(n * 10) / 10);
  if (a.id === b.id) {
    const cx = a.x + 26;
    return `M${r(cx - 9)},${r(a.y)} C${r(cx - 16)},${r(a.y - 22)} ${r(cx + 16)},${r(a.y - 22)} ${r(cx + 9)},${r(a.y)}`;
  }
  const la = layer.get(a.id) ?? 0;
  const lb = layer.get(b.id) ?? 0;
  if (lb > la) {
    const x1 = a.x + a.w;
    const y1 = a.y + BOX_H / 2;
    const x2 = b.x;
    const y2 = b.y + BOX_H / 2;
    const dx = (x2 - x1) / 2;
    return `M${r(x1)},${r(y1)} C${r(x1 + dx)},${r(y1)} ${r(x2 - dx)},${r(y2)} ${r(x2)},${r(y2)}`;
  }
  if (la === lb) {
    // Within a column: out of the right edge and back in, bulging to the right.
    const x1 = a.x + a.w;
    const x2 = b.x + b.w;
    const y1 = a.y + BOX_H * (b.y > a.y ? 0.75 : 0.25);
    const y2 = b.y + BOX_H * (b.y > a.y ? 0.25 : 0.75);
    const xc = Math.max(x1, x2) + 24;
    return `M${r(x1)},${r(y1)} C${r(xc)},${r(y1)} ${r(xc)},${r(y2)} ${r(x2)},${r(y2)}`;
  }
  const position = rank.get(a.id);
  const over = position !== undefined && position.of > 1 && position.index === 0;
  const x1 = a.x + a.w * 0.4;
  const x2 = b.x + b.w * 0.7;
  const lift = 20 + Math.abs(la - lb) * 6;
  if (over) {
    const y1 = a.y;
    const y2 = b.y;
    const yc = Math.min(y1, y2) - lift;
    return `M${r(x1)},${r(y1)} C${r(x1)},${r(yc)} ${r(x2)},${r(yc)} ${r(x2)},${r(y2)}`;
  }
  const y1 = a.y + BOX_H;
  const y2 = b.y + BOX_H;
  const yc = Math.max(y1, y2) + lift;
  return `M${r(x1)},${r(y1)} C${r(x1)},${r(yc)} ${r(x2)},${r(yc)} ${r(x2)},${r(y2)}`;
}
