import dagreModule from '@dagrejs/dagre';
import type { TraceStatechart } from '../trace/format.js';
import { displayGuards, transitionLabel, type Transition } from './labels.js';

/*
 * An offline SVG rendering of a statechart: @dagrejs/dagre lays the graph out, and the SVG is
 * written here as text (no DOM, no browser, no network). Text is never measured: state names are
 * sized by a per-character estimate of a bold sans-serif and labels are set in a monospace face,
 * so the same chart gives byte-identical SVG on every machine.
 */

// dagre ships declarations whose extensionless relative imports do not resolve under NodeNext, so
// they type as `any`. The little of its API used here, spelled out:
interface DagreNode {
  width: number;
  height: number;
  x: number;
  y: number;
}
interface DagreEdge {
  width: number;
  height: number;
  labelpos: 'c';
  minlen?: number;
  weight?: number;
  x: number;
  y: number;
  points: { x: number; y: number }[];
}
interface DagreGraphLabel {
  rankdir: 'TB' | 'LR';
  nodesep: number;
  ranksep: number;
  edgesep: number;
  marginx: number;
  marginy: number;
  width?: number;
  height?: number;
}
interface DagreGraph {
  setGraph(label: DagreGraphLabel): unknown;
  graph(): DagreGraphLabel;
  setDefaultEdgeLabel(label: () => object): unknown;
  setNode(id: string, label: { width: number; height: number }): unknown;
  setEdge(source: string, target: string, label: Omit<DagreEdge, 'x' | 'y' | 'points'>): unknown;
  node(id: string): DagreNode;
  edge(source: string, target: string): DagreEdge;
}
interface Dagre {
  graphlib: { Graph: new (options?: { multigraph?: boolean; compound?: boolean }) => DagreGraph };
  layout(graph: DagreGraph): void;
}
const dagre = dagreModule as unknown as Dagre;

const INITIAL = '__initial__';
const ANY = '__any__';

const STATE_FONT = 14;
const STATE_HEIGHT = 40;
const STATE_PAD_X = 22;
const LABEL_FONT = 11;
/** Advance of one character of a monospace face (DejaVu Sans Mono, Menlo, Consolas…) in em. */
const MONO_EM = 0.61;
const LABEL_LINE = 15;
const LABEL_PAD_X = 6;
const LABEL_PAD_Y = 4;
const TITLE_HEIGHT = 54;
const LEGEND_HEIGHT = 40;
const LOOP_REACH = 34;

const COLORS = {
  ink: '#1f2430',
  muted: '#5b6270',
  edge: '#6b7280',
  stateFill: '#eef2ff',
  stateStroke: '#4f5fd6',
  finalFill: '#f4f4f6',
  finalStroke: '#3f4450',
  anyStroke: '#8a8f98',
  guard: '#9a4d00',
  labelFill: '#ffffff',
  labelStroke: '#e3e5ea',
  background: '#ffffff',
};

/** Width of a bold sans-serif string, estimated per character (generous, never measured). */
function stateTextWidth(text: string, size: number): number {
  let em = 0;
  for (const ch of text) {
    if ("iljtfrI.,:;!|'()[]".includes(ch)) em += 0.34;
    else if ('mwMW'.includes(ch)) em += 0.92;
    else if (ch >= 'A' && ch <= 'Z') em += 0.74;
    else em += 0.62;
  }
  return em * size;
}

function monoWidth(text: string, size: number): number {
  return [...text].length * MONO_EM * size;
}

function escapeXml(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');
}

/** Rounds to 0.1 and drops a trailing `.0`: stable, compact numbers. */
function n(value: number): string {
  const rounded = Math.round(value * 10) / 10;
  return Object.is(rounded, -0) ? '0' : String(rounded);
}

/** One line of an edge label: an indent (in characters) and runs of event or guard text. */
interface LabelLine {
  readonly indent: number;
  readonly runs: readonly { readonly text: string; readonly kind: 'event' | 'guard' }[];
}

/** Transitions between one pair of nodes, drawn as one arrow with one label. */
interface EdgeGroup {
  readonly source: string;
  readonly target: string;
  readonly transitions: Transition[];
  /** The guard each transition shows (see `displayGuards`). */
  readonly guards: (string | undefined)[];
}

function nodeKey(id: string): string {
  return id === '*' ? ANY : `s:${id}`;
}

/** Guard lines longer than this break before an `&&`. */
const GUARD_WRAP = 34;

/** `[a && b && c]`, broken before `&&` into lines of at most `GUARD_WRAP` characters where it can be. */
function guardLines(guard: string): string[] {
  const parts = guard.split(/\s*&&\s*/);
  const lines: string[] = [];
  let line = '';
  parts.forEach((part, i) => {
    const piece = i === 0 ? part : `&& ${part}`;
    if (line && line.length + 1 + piece.length > GUARD_WRAP) {
      lines.push(line);
      line = piece;
    } else {
      line = line ? `${line} ${piece}` : piece;
    }
  });
  lines.push(line);
  return lines.map((l, i) => `${i === 0 ? '[' : ' '}${l}${i === lines.length - 1 ? ']' : ''}`);
}

/**
 * Label lines for a group: `event [guard]` per transition; when one event has several guarded
 * transitions, the event stands alone on a line and its guards follow, indented, in the machine's
 * order (the order they are tried in). Long guards wrap before `&&`.
 */
function labelLines(group: EdgeGroup): LabelLine[] {
  const byEvent = new Map<string, (string | undefined)[]>();
  group.transitions.forEach((t, i) => {
    byEvent.set(t.event, [...(byEvent.get(t.event) ?? []), group.guards[i]]);
  });
  const lines: LabelLine[] = [];
  for (const [event, list] of byEvent) {
    const guards = [...new Set(list)];
    const only = guards.length === 1 ? guards[0] : undefined;
    if (guards.length === 1 && (only === undefined || event.length + 3 + only.length <= GUARD_WRAP + 12)) {
      lines.push({
        indent: 0,
        runs:
          only === undefined
            ? [{ text: event, kind: 'event' }]
            : [
                { text: event, kind: 'event' },
                { text: ` [${only}]`, kind: 'guard' },
              ],
      });
      continue;
    }
    lines.push({ indent: 0, runs: [{ text: event, kind: 'event' }] });
    for (const guard of guards) {
      if (guard === undefined) lines.push({ indent: 2, runs: [{ text: '(no guard)', kind: 'event' }] });
      else for (const text of guardLines(guard)) lines.push({ indent: 2, runs: [{ text, kind: 'guard' }] });
    }
  }
  return lines;
}

function lineChars(line: LabelLine): number {
  return line.indent + line.runs.reduce((sum, run) => sum + [...run.text].length, 0);
}

/** A smooth path through `points` (the B-spline d3's `curveBasis` draws), from the first point to the last. */
function basisPath(points: readonly { x: number; y: number }[]): string {
  const first = points[0];
  if (!first) return '';
  if (points.length < 3) return points.map((p, i) => `${i === 0 ? 'M' : 'L'}${n(p.x)},${n(p.y)}`).join(' ');
  let d = `M${n(first.x)},${n(first.y)}`;
  let [x0, y0, x1, y1] = [first.x, first.y, first.x, first.y];
  const curve = (x: number, y: number): void => {
    d += ` C${n((2 * x0 + x1) / 3)},${n((2 * y0 + y1) / 3)} ${n((x0 + 2 * x1) / 3)},${n((y0 + 2 * y1) / 3)} ${n((x0 + 4 * x1 + x) / 6)},${n((y0 + 4 * y1 + y) / 6)}`;
  };
  points.forEach((p, i) => {
    if (i === 0) return;
    if (i === 1) {
      d += ` L${n((5 * x0 + p.x) / 6)},${n((5 * y0 + p.y) / 6)}`;
    } else {
      curve(p.x, p.y);
    }
    [x0, x1] = [x1, p.x];
    [y0, y1] = [y1, p.y];
  });
  curve(x1, y1);
  d += ` L${n(x1)},${n(y1)}`;
  return d;
}

/**
 * The statechart as a standalone SVG document: rounded state boxes (final states with a double
 * border, each `<g data-state="ID">`), the initial marker, and one arrow per pair of states
 * labelled with its transitions, `event [guard]` (hover an arrow or a state for the actions and
 * details). Transitions the machine takes in any state start from a dashed "any state" box.
 */
export function toSvg(chart: TraceStatechart, options: { title?: string; subtitle?: string } = {}): string {
  const title = options.title ?? 'exarch session machine';
  const subtitle = options.subtitle ?? 'machines/session.ts · generated by npm run visualize';
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'TB', nodesep: 36, ranksep: 46, edgesep: 18, marginx: 24, marginy: 16 });
  g.setDefaultEdgeLabel(() => ({}));

  const finals = new Set(chart.states.filter((s) => s.final).map((s) => s.id));
  const hasAny = chart.transitions.some((t) => t.source === '*');
  g.setNode(INITIAL, { width: 16, height: 16 });
  if (hasAny) g.setNode(ANY, { width: Math.ceil(stateTextWidth('any state', STATE_FONT) + 2 * STATE_PAD_X), height: STATE_HEIGHT });
  for (const state of chart.states) {
    g.setNode(nodeKey(state.id), { width: Math.ceil(stateTextWidth(state.id, STATE_FONT) + 2 * STATE_PAD_X + (state.final ? 8 : 0)), height: STATE_HEIGHT });
  }

  const groups = new Map<string, EdgeGroup>();
  const shownGuards = displayGuards(chart.transitions);
  chart.transitions.forEach((t, i) => {
    const source = nodeKey(t.source);
    // A root transition without a target leaves the machine in whatever state it is in: a loop.
    const target = t.target === '*' ? source : nodeKey(t.target);
    const key = `${source}\u0000${target}`;
    const group = groups.get(key) ?? { source, target, transitions: [], guards: [] };
    group.transitions.push(t);
    group.guards.push(shownGuards[i]);
    groups.set(key, group);
  });
  const labels = new Map<string, LabelLine[]>();
  g.setEdge(INITIAL, nodeKey(chart.initial), { width: 0, height: 0, labelpos: 'c', minlen: 1, weight: 4 });
  for (const [key, group] of groups) {
    const lines = labelLines(group);
    labels.set(key, lines);
    const width = Math.ceil(Math.max(...lines.map((l) => lineChars(l) * MONO_EM * LABEL_FONT)) + 2 * LABEL_PAD_X);
    const height = lines.length * LABEL_LINE + 2 * LABEL_PAD_Y;
    g.setEdge(group.source, group.target, { width: group.source === group.target ? width + LOOP_REACH : width, height, labelpos: 'c' });
  }

  dagre.layout(g);
  const graph = g.graph();
  const width = Math.ceil(Math.max(graph.width ?? 0, monoWidth(subtitle, LABEL_FONT) + 48, 420));
  const height = Math.ceil((graph.height ?? 0) + TITLE_HEIGHT + LEGEND_HEIGHT);
  const dy = TITLE_HEIGHT;

  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" role="img" aria-labelledby="chart-title">`,
  );
  out.push(`<title id="chart-title">${escapeXml(title)}</title>`);
  out.push('<style>');
  out.push(`  .sans { font-family: -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, "DejaVu Sans", sans-serif; }`);
  out.push(
    `  .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", "Liberation Mono", monospace; font-size: ${LABEL_FONT}px; }`,
  );
  out.push(`  .edge path { fill: none; stroke: ${COLORS.edge}; stroke-width: 1.4; }`);
  out.push(`  .edge:hover path { stroke: ${COLORS.stateStroke}; stroke-width: 2.2; }`);
  out.push(`  .edge .event { fill: ${COLORS.ink}; }`);
  out.push(`  .edge .guard { fill: ${COLORS.guard}; }`);
  out.push(`  .state text { font-size: ${STATE_FONT}px; font-weight: 600; fill: ${COLORS.ink}; }`);
  out.push(`  .any text { font-style: italic; font-weight: 500; fill: ${COLORS.muted}; }`);
  out.push('</style>');
  out.push('<defs>');
  out.push(
    `  <marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" markerHeight="8" orient="auto-start-reverse"><path d="M0,1 L9,5 L0,9 z" fill="${COLORS.edge}"/></marker>`,
  );
  out.push('</defs>');
  out.push(`<rect width="100%" height="100%" fill="${COLORS.background}"/>`);
  out.push(`<text class="sans" x="24" y="28" font-size="17" font-weight="700" fill="${COLORS.ink}">${escapeXml(title)}</text>`);
  out.push(`<text class="mono" x="24" y="45" fill="${COLORS.muted}">${escapeXml(subtitle)}</text>`);
  out.push(`<g transform="translate(0,${dy})">`);

  // Edges first, so the boxes and labels sit on top of them.
  const init = g.edge(INITIAL, nodeKey(chart.initial));
  out.push(`<g class="edge initial"><path d="${basisPath(init.points)}" marker-end="url(#arrow)"/></g>`);
  const labelParts: string[] = [];
  for (const [key, group] of groups) {
    const edge = g.edge(group.source, group.target);
    const lines = labels.get(key) ?? [];
    const tip = group.transitions.map((t, i) => transitionLabel(t, group.guards[i])).join('\n');
    const attrs = `data-source="${escapeXml(group.source === ANY ? '*' : group.source.slice(2))}" data-target="${escapeXml(group.target === ANY ? '*' : group.target.slice(2))}"`;
    let d: string;
    let labelX: number;
    const labelY = edge.y;
    const labelWidth = edge.width - (group.source === group.target ? LOOP_REACH : 0);
    if (group.source === group.target) {
      // dagre parks a loop's label beside its node; the loop leaves the node's right side and
      // returns to it, reaching toward the label.
      const node = g.node(group.source);
      const right = node.x + node.width / 2;
      labelX = edge.x - edge.width / 2 + LOOP_REACH;
      // A cubic's farthest point is 3/4 of the way to its control points' x.
      const control = right + Math.max(labelX - 5 - right, 24) / 0.75;
      d = `M${n(right)},${n(node.y - 9)} C${n(control)},${n(node.y - 34)} ${n(control)},${n(node.y + 34)} ${n(right + 1)},${n(node.y + 9)}`;
    } else {
      d = basisPath(edge.points);
      labelX = edge.x - labelWidth / 2;
    }
    out.push(`<g class="edge" ${attrs}><title>${escapeXml(tip)}</title><path d="${d}" marker-end="url(#arrow)"/></g>`);
    const top = labelY - edge.height / 2;
    const text: string[] = [];
    lines.forEach((line, i) => {
      const y = top + LABEL_PAD_Y + LABEL_LINE * i + LABEL_LINE * 0.74;
      const indent = line.indent * MONO_EM * LABEL_FONT;
      const parts = line.runs.map((run) => `<tspan class="${run.kind}">${escapeXml(run.text)}</tspan>`);
      text.push(`<text class="mono" x="${n(labelX + LABEL_PAD_X + indent)}" y="${n(y)}" xml:space="preserve">${parts.join('')}</text>`);
    });
    labelParts.push(
      `<g class="edge label" ${attrs}><title>${escapeXml(tip)}</title>` +
        `<rect x="${n(labelX)}" y="${n(top)}" width="${n(labelWidth)}" height="${n(edge.height)}" rx="4" fill="${COLORS.labelFill}" stroke="${COLORS.labelStroke}"/>` +
        `${text.join('')}</g>`,
    );
  }

  // The initial marker.
  const start = g.node(INITIAL);
  out.push(
    `<g class="initial" data-initial="${escapeXml(chart.initial)}"><title>initial state: ${escapeXml(chart.initial)}</title><circle cx="${n(start.x)}" cy="${n(start.y)}" r="7" fill="${COLORS.ink}"/></g>`,
  );

  if (hasAny) {
    const any = g.node(ANY);
    const x = any.x - any.width / 2;
    const y = any.y - any.height / 2;
    out.push(
      `<g class="state any sans" data-pseudo="*"><title>any state: transitions on the machine's root, taken whatever state the session is in</title>` +
        `<rect x="${n(x)}" y="${n(y)}" width="${n(any.width)}" height="${n(any.height)}" rx="12" fill="${COLORS.background}" stroke="${COLORS.anyStroke}" stroke-width="1.4" stroke-dasharray="6 4"/>` +
        `<text x="${n(any.x)}" y="${n(any.y + STATE_FONT * 0.35)}" text-anchor="middle">any state</text></g>`,
    );
  }

  for (const state of chart.states) {
    const node = g.node(nodeKey(state.id));
    const x = node.x - node.width / 2;
    const y = node.y - node.height / 2;
    const final = finals.has(state.id);
    const tip = `${state.id}${final ? ' (final)' : ''}${state.id === chart.initial ? ' (initial)' : ''}`;
    const boxes = final
      ? `<rect x="${n(x)}" y="${n(y)}" width="${n(node.width)}" height="${n(node.height)}" rx="12" fill="${COLORS.finalFill}" stroke="${COLORS.finalStroke}" stroke-width="1.4"/>` +
        `<rect x="${n(x + 4)}" y="${n(y + 4)}" width="${n(node.width - 8)}" height="${n(node.height - 8)}" rx="8" fill="none" stroke="${COLORS.finalStroke}" stroke-width="1.2"/>`
      : `<rect x="${n(x)}" y="${n(y)}" width="${n(node.width)}" height="${n(node.height)}" rx="12" fill="${COLORS.stateFill}" stroke="${COLORS.stateStroke}" stroke-width="1.6"/>`;
    out.push(
      `<g class="state sans${final ? ' final' : ''}" data-state="${escapeXml(state.id)}"><title>${escapeXml(tip)}</title>${boxes}` +
        `<text x="${n(node.x)}" y="${n(node.y + STATE_FONT * 0.35)}" text-anchor="middle">${escapeXml(state.id)}</text></g>`,
    );
  }
  out.push(...labelParts);
  out.push('</g>');

  // Legend.
  const ly = height - LEGEND_HEIGHT + 16;
  out.push(
    `<text class="mono" x="24" y="${ly}" fill="${COLORS.muted}">` +
      `<tspan class="event" fill="${COLORS.ink}">event</tspan> <tspan fill="${COLORS.guard}">[guard]</tspan>` +
      ` · guards under one event are tried top to bottom · double border: final · hover an arrow for its actions</text>`,
  );
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
