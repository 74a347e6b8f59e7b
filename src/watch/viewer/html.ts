import { Redactor } from '../../engine/redact.js';
import type { TraceRecord } from '../trace/format.js';
import { OUTCOME_COLORS, STATE_COLORS, STATE_MEANINGS, UNKNOWN_STATE_COLOR } from './colors.js';
import { escapeHtml, jsonForScript } from '../../engine/escape.js';
import { pageScripts } from './pageScript.js';
import { drawStatechart } from './statechartSvg.js';
import { VIEWER_CSS } from './styles.js';

/** States drawn light, with dark text on them. */
const LIGHT_STATES = ['readyForUser', 'finishedWithoutReply'];

export interface ViewerPageOptions {
  /** Overrides the trace's own title. */
  readonly title?: string;
  /** Secrets to keep out of the page (default: those of `process.env`; see redact.ts). */
  readonly redactor?: Redactor;
  /**
   * A live page: it shows `records` (the run so far), then follows the run as its records arrive
   * as server-sent events from `events` (a URL on the page's own server; see liveServer.ts).
   */
  readonly live?: { readonly events: string };
}

/**
 * The turn-flow viewer: one self-contained HTML page (inline CSS and scripts, the trace embedded
 * as JSON, nothing fetched) showing the agent tree, one swimlane of states per agent on a shared
 * time axis, spawn and delivery arrows, markers for reminders and approvals, a details panel, a
 * filter box and the session statechart. The page builds its model from the records itself (with
 * src/watch/viewer/model.ts, as Node does), so a live page that is sent the rest of a run as it happens
 * ends up the same as this page made from the finished trace. Secrets are redacted from the page
 * (`options.redactor`, by default those of `process.env`), whether or not the trace was.
 */
export function renderViewerHtml(records: readonly TraceRecord[], options: ViewerPageOptions = {}): string {
  const first = records[0];
  const start = first?.kind === 'trace.start' ? first : undefined;
  const data = {
    records,
    ...(options.title === undefined ? {} : { title: options.title }),
    colors: STATE_COLORS,
    outcomeColors: OUTCOME_COLORS,
    unknownColor: UNKNOWN_STATE_COLOR,
    lightStates: LIGHT_STATES,
    meanings: STATE_MEANINGS,
    ...(options.live ? { live: options.live } : {}),
  };
  const chart = start ? drawStatechart(start.statechart) : undefined;
  const title = escapeHtml(options.title ?? start?.title ?? 'exarch trace');
  const redactor = options.redactor ?? Redactor.fromEnv();
  const scripts = pageScripts();
  // Nothing may load: no scripts, styles, fonts or images from anywhere but this file; a live page may also read its own server's event stream.
  const csp = `default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:${options.live ? "; connect-src 'self'" : ''}`;
  const page = [
    '<!doctype html>',
    '<html lang="en">',
    '<head>',
    '<meta charset="utf-8">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    `<meta http-equiv="Content-Security-Policy" content="${csp}">`,
    `<title>${title} · exarch turn flow</title>`,
    `<style>${VIEWER_CSS}${stateFills()}</style>`,
    '</head>',
    '<body>',
    '<header id="top">',
    '<div class="brand">exarch <span>turn flow</span></div>',
    `<h1 id="title">${title}</h1>`,
    options.live ? '<span id="live" class="live connecting">connecting…</span>' : '',
    '<div id="stats"></div>',
    '<input id="search" type="search" placeholder="filter: agent, tool, text" aria-label="filter agents by name, tool or text" autocomplete="off" spellcheck="false">',
    '<div class="zoom"><span id="range"></span>',
    '<button id="zoom-out" title="zoom out (or ctrl + wheel)">−</button>',
    '<button id="zoom-in" title="zoom in (or ctrl + wheel)">+</button>',
    '<button id="zoom-fit" title="show the whole run">fit</button></div>',
    '</header>',
    `<div id="legend">${legend()}</div>`,
    '<main id="timeline">',
    '<div id="corner"></div>',
    '<div id="axis-wrap"><svg id="axis" height="28"></svg></div>',
    '<div id="body">',
    '<div id="tree" role="tree"></div>',
    '<div id="lanes-wrap"><svg id="lanes"></svg><div id="cursor"></div></div>',
    '</div>',
    '</main>',
    '<section id="bottom">',
    '<div id="details" aria-live="polite"></div>',
    '<div id="chart-panel">',
    '<div class="panel-head"><b>session statechart</b><span id="chart-caption">select a bar or a lane to see where that agent was</span></div>',
    chart ? `<div id="chart-scroll">${chart.svg}</div>` : '<p class="empty">This trace carries no statechart.</p>',
    '<ul id="outgoing"></ul>',
    chart && chart.anyState.length > 0
      ? `<h3>transitions not drawn</h3><ul id="any-state">${chart.anyState.map((line) => `<li><code>${escapeHtml(line)}</code></li>`).join('')}</ul>`
      : '',
    '</div>',
    '</section>',
    '<div id="tip"></div>',
    `<script type="application/json" id="exarch-trace">${jsonForScript(data)}</script>`,
    `<script>${scripts.markdown}</script>`,
    `<script type="module">${scripts.app}</script>`,
    '</body>',
    '</html>',
    '',
  ]
    .filter((line) => line !== '')
    .join('\n');
  return redactor.html(`${page}\n`);
}

/** Bars are coloured by their `data-state`, so the page does not repeat a colour per bar. */
function stateFills(): string {
  return [
    `#lanes .bar { fill: ${UNKNOWN_STATE_COLOR}; }`,
    ...Object.entries(STATE_COLORS).map(([state, color]) => `#lanes .bar[data-state="${state}"] { fill: ${color}; }`),
  ].join('\n');
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
    `<span class="item"><svg width="12" height="14" aria-hidden="true"><path d="M6,0 L12,7 L6,14 L0,7 z" fill="${STATE_COLORS['nudged'] ?? UNKNOWN_STATE_COLOR}"/></svg>reminder, wait for approval (any zoom)</span>`,
    '<span class="item"><svg width="10" height="8" aria-hidden="true"><path d="M0,0 L10,0 L5,8 z" fill="#0d9488"/></svg>event</span>',
  ].join('');
}
