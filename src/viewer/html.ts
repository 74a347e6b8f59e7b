import { Redactor } from '../redact.js';
import type { TraceRecord } from '../trace/format.js';
import { OUTCOME_COLORS, STATE_COLORS, STATE_MEANINGS, UNKNOWN_STATE_COLOR, stateColor } from './colors.js';
import { VIEWER_SCRIPT } from './client.js';
import { escapeHtml, jsonForScript } from './escape.js';
import { buildViewerModel, type ViewerAgent, type ViewerModel } from './model.js';
import { drawStatechart } from './statechartSvg.js';
import { VIEWER_CSS } from './styles.js';

/** States drawn light, with dark text on them. */
const LIGHT_STATES = ['readyForUser', 'finishedWithoutReply'];

/**
 * The turn-flow viewer: one self-contained HTML page (inline CSS and script, the trace embedded
 * as JSON, no network) showing the agent tree, one swimlane of states per agent on a shared time
 * axis, spawn and delivery arrows, a details panel and the session statechart. Secrets are
 * redacted from the page (`options.redactor`, by default those of `process.env`; see redact.ts),
 * whether or not the trace it is made from was.
 */
export function renderViewerHtml(records: readonly TraceRecord[], options: { title?: string; redactor?: Redactor } = {}): string {
  const model = buildViewerModel(records, options.title);
  const data = {
    model,
    records,
    colors: STATE_COLORS,
    outcomeColors: OUTCOME_COLORS,
    unknownColor: UNKNOWN_STATE_COLOR,
    lightStates: LIGHT_STATES,
  };
  const chart = model.statechart ? drawStatechart(model.statechart) : undefined;
  const title = escapeHtml(model.title);
  const redactor = options.redactor ?? Redactor.fromEnv();
  const page = [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    // Nothing may load: no scripts, styles, fonts or images from anywhere but this file.
    `<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">`,
    `<title>${title} · exarch turn flow</title>`,
    `<style>${VIEWER_CSS}${stateFills()}</style>`,
    '</head>',
    '<body>',
    '<header id="top">',
    '<div class="brand">exarch <span>turn flow</span></div>',
    `<h1 id="title">${title}</h1>`,
    `<div id="stats">${stats(model, records.length)}</div>`,
    '<div class="zoom"><span id="range"></span>',
    '<button id="zoom-out" title="zoom out (or ctrl + wheel)">−</button>',
    '<button id="zoom-in" title="zoom in (or ctrl + wheel)">+</button>',
    '<button id="zoom-fit" title="show the whole run">fit</button></div>',
    '</header>',
    `<div id="legend">${legend()}</div>`,
    '<main id="timeline">',
    `<div id="corner">${model.agents.length === 1 ? '1 agent' : `${model.agents.length} agents`}</div>`,
    '<div id="axis-wrap"><svg id="axis" height="28"></svg></div>',
    '<div id="body">',
    `<div id="tree" role="tree">${model.agents.map((agent, lane) => treeRow(agent, lane)).join('')}</div>`,
    '<div id="lanes-wrap"><svg id="lanes"></svg><div id="cursor"></div></div>',
    '</div>',
    '</main>',
    '<section id="bottom">',
    `<div id="details" aria-live="polite">${intro(model)}</div>`,
    '<div id="chart-panel">',
    '<div class="panel-head"><b>session statechart</b><span id="chart-caption">select a bar or a lane to see where that agent was</span></div>',
    chart ? chart.svg : '<p class="empty">This trace carries no statechart.</p>',
    '<ul id="outgoing"></ul>',
    chart && chart.anyState.length > 0
      ? `<h3>transitions not drawn</h3><ul id="any-state">${chart.anyState.map((line) => `<li><code>${escapeHtml(line)}</code></li>`).join('')}</ul>`
      : '',
    '</div>',
    '</section>',
    '<div id="tip"></div>',
    `<script type="application/json" id="exarch-trace">${jsonForScript(data)}</script>`,
    `<script>${VIEWER_SCRIPT}</script>`,
    '</body>',
    '</html>',
    '',
  ].join('\n');
  return redactor.html(page);
}

/** Bars are coloured by their `data-state`, so the page does not repeat a colour per bar. */
function stateFills(): string {
  return [
    `#lanes .bar { fill: ${UNKNOWN_STATE_COLOR}; }`,
    ...Object.entries(STATE_COLORS).map(([state, color]) => `#lanes .bar[data-state="${state}"] { fill: ${color}; }`),
  ].join('\n');
}

function formatMs(ms: number): string {
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(2)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms - minutes * 60_000) / 1000)} s`;
}

function stats(model: ViewerModel, records: number): string {
  const parts = [
    `<b>${model.agents.length}</b> agent${model.agents.length === 1 ? '' : 's'}`,
    `<b>${records.toLocaleString('en')}</b> records`,
    `<b>${formatMs(model.t1 - model.t0)}</b>`,
  ];
  const outcomes = Object.entries(model.outcomes).map(([outcome, n]) => `${n} ${outcome}`);
  if (outcomes.length > 0) parts.push(escapeHtml(outcomes.join(', ')));
  if (model.startedAt) parts.push(`started ${escapeHtml(model.startedAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'))}`);
  return parts.join(' · ');
}

function legend(): string {
  const states = Object.entries(STATE_COLORS).map(([state, color]) => {
    const final = ['replied', 'finishedWithoutReply', 'capped', 'failed', 'cancelled'].includes(state);
    return `<span class="item" title="${escapeHtml(STATE_MEANINGS[state] ?? state)}"><span class="sw${final ? ' final' : ''}" style="background:${color}"></span>${escapeHtml(state)}</span>`;
  });
  const arrow = (stroke: string, dash: boolean): string =>
    `<svg width="26" height="10" aria-hidden="true"><line x1="1" y1="5" x2="20" y2="5" stroke="${stroke}" stroke-width="1.6"${dash ? ' stroke-dasharray="4 3"' : ''}/><path d="M19,1 L25,5 L19,9 z" fill="${stroke}"/></svg>`;
  return [
    ...states,
    '<span class="sep"></span>',
    `<span class="item">${arrow('#64748b', true)}spawn</span>`,
    `<span class="item">${arrow(OUTCOME_COLORS.replied, false)}delivery (coloured by outcome)</span>`,
    '<span class="item"><svg width="10" height="8" aria-hidden="true"><path d="M0,0 L10,0 L5,8 z" fill="#0d9488"/></svg>event</span>',
  ].join('');
}

function treeRow(agent: ViewerAgent, lane: number): string {
  const label = agent.outcome ?? (agent.status === 'running' ? agent.lastState || 'running' : `${agent.lastState || agent.status} · ${agent.status}`);
  const color = agent.outcome ? OUTCOME_COLORS[agent.outcome] : stateColor(agent.lastState);
  const light = !agent.outcome && LIGHT_STATES.includes(agent.lastState);
  const tokens = agent.usage.inputTokens + agent.usage.outputTokens + agent.usage.cacheReadInputTokens + agent.usage.cacheCreationInputTokens;
  const meta = `${agent.requests} req · ${compact(tokens)} tok`;
  return (
    `<div class="row" role="treeitem" aria-level="${agent.depth + 1}" data-agent="${escapeHtml(agent.id)}" data-lane="${lane}" style="--depth:${agent.depth}" title="${escapeHtml(agent.id)}">` +
    (agent.depth > 0 ? '<span class="twig">└</span>' : '') +
    `<span class="name">${escapeHtml(agent.name)}</span>` +
    `<span class="chip${light ? ' light' : ''}" style="--c:${color}">${escapeHtml(label)}</span>` +
    `<span class="meta">${meta}</span>` +
    '</div>'
  );
}

function compact(n: number): string {
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)}M`;
  if (n >= 1e4) return `${Math.round(n / 1e3)}k`;
  if (n >= 1e3) return `${(n / 1e3).toFixed(1)}k`;
  return String(n);
}

function intro(model: ViewerModel): string {
  if (model.agents.length === 0) return '<p class="empty">This trace has no agents.</p>';
  return (
    '<h2><span class="kind">turn flow</span><span>click a bar, an arrow or a marker</span></h2>' +
    '<p class="hint">Each lane is one agent; its bars are the states of its session machine over time. ' +
    'Dashed arrows are spawns, solid ones the results children delivered to their parents. ' +
    'Click a state bar for the messages committed in it, a delivery for the text the parent received, a tree row for the agent. ' +
    'Zoom with the buttons or ctrl + wheel; shift + wheel or dragging the time axis pans; double-click a bar to zoom to it.</p>'
  );
}
