/** The viewer page's stylesheet, inlined into the page: system fonts only, nothing fetched. */
export const VIEWER_CSS = `
:root {
  --row: 24px;
  --tree-w: 300px;
  --ink: #0f172a;
  --ink-2: #334155;
  --muted: #64748b;
  --line: #e2e8f0;
  --paper: #ffffff;
  --wash: #f8fafc;
  --accent: #2563eb;
  --sans: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "Liberation Sans", "DejaVu Sans", Arial, sans-serif;
  --mono: ui-monospace, SFMono-Regular, Menlo, Consolas, "Liberation Mono", "DejaVu Sans Mono", monospace;
}
* { box-sizing: border-box; }
html, body { height: 100%; margin: 0; }
body {
  font: 13px/1.45 var(--sans);
  color: var(--ink);
  background: var(--wash);
  display: grid;
  grid-template-rows: auto auto fit-content(58vh) minmax(240px, 1fr);
  /* One column no wider than the window, whatever the header's text wants: what does not fit is cut inside its own box. */
  grid-template-columns: minmax(0, 1fr);
  overflow: hidden;
}
button { font: inherit; }

/* header */
/* What does not fit on one line goes to the next (the run's stats first), rather than being cut. */
#top {
  display: flex; flex-wrap: wrap; align-items: center; gap: 6px 16px; min-width: 0;
  padding: 10px 16px; background: #0f172a; color: #e2e8f0;
}
#top .brand { font-weight: 700; letter-spacing: .02em; color: #fff; white-space: nowrap; }
#top .brand span { font-weight: 400; color: #94a3b8; }
#top h1 { font-size: 15px; font-weight: 600; margin: 0; color: #fff; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; min-width: 0; }
#stats { color: #94a3b8; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; flex: 1 1 auto; min-width: 0; }
#stats b { color: #e2e8f0; font-weight: 600; }
.zoom { display: flex; gap: 4px; align-items: center; white-space: nowrap; }
.zoom button {
  min-width: 30px; height: 26px; padding: 0 8px; border-radius: 6px; cursor: pointer;
  border: 1px solid #334155; background: #1e293b; color: #e2e8f0;
}
.zoom button:hover { background: #334155; }
#range { color: #94a3b8; font-variant-numeric: tabular-nums; margin-right: 6px; }
#search {
  margin-left: auto; width: 220px; min-width: 120px; height: 26px; padding: 0 8px; border-radius: 6px; font: inherit;
  border: 1px solid #334155; background: #1e293b; color: #e2e8f0;
}
#search::placeholder { color: #94a3b8; }
#search:focus { outline: 2px solid #60a5fa; outline-offset: -1px; }
#live { font-size: 11px; font-weight: 600; padding: 2px 8px; border-radius: 9px; white-space: nowrap; background: #334155; color: #e2e8f0; }
#live.open { background: #16a34a; color: #fff; }
#live.retrying { background: #b45309; color: #fff; }

/* legend */
#legend {
  display: flex; flex-wrap: wrap; gap: 4px 14px; align-items: center;
  padding: 6px 16px; background: var(--paper); border-bottom: 1px solid var(--line); color: var(--ink-2); font-size: 12px;
}
#legend .item { display: inline-flex; align-items: center; gap: 6px; white-space: nowrap; }
#legend .sw { width: 18px; height: 10px; border-radius: 3px; display: inline-block; }
#legend .sw.final { width: 8px; height: 12px; border-radius: 2px; box-shadow: inset 0 0 0 1.5px rgba(255,255,255,.7); }
#legend .sep { width: 1px; height: 16px; background: var(--line); }
#legend svg { display: block; }

/* timeline */
#timeline {
  display: grid; grid-template-columns: var(--tree-w) 1fr; grid-template-rows: 28px 1fr;
  min-height: 0; background: var(--paper); border-bottom: 1px solid var(--line);
}
#corner {
  padding: 6px 12px; font-size: 11px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted);
  border-bottom: 1px solid var(--line); border-right: 1px solid var(--line); background: var(--paper);
}
#axis-wrap { border-bottom: 1px solid var(--line); overflow: hidden; position: relative; background: var(--paper); }
#axis { display: block; }
#axis text { font: 11px var(--sans); fill: var(--muted); font-variant-numeric: tabular-nums; }
#axis line { stroke: #cbd5e1; }
#axis .cursor-label rect { fill: #0f172a; }
#axis .cursor-label text { fill: #fff; font-weight: 600; }
#body {
  grid-column: 1 / span 2; overflow-y: auto; overflow-x: hidden; min-height: 0;
  display: grid; grid-template-columns: var(--tree-w) 1fr; align-items: start;
}
#tree, #lanes-wrap {
  background: repeating-linear-gradient(to bottom, #ffffff 0 var(--row), #f6f8fb var(--row) calc(2 * var(--row)));
}
#tree { border-right: 1px solid var(--line); }
.row {
  height: var(--row); display: flex; align-items: center; gap: 6px; cursor: pointer;
  padding: 0 8px 0 calc(10px + var(--depth, 0) * 16px); white-space: nowrap; overflow: hidden;
}
.row:hover { background: rgba(37, 99, 235, .06); }
.row.sel { background: rgba(37, 99, 235, .14); box-shadow: inset 3px 0 0 var(--accent); }
.row .twig { color: #cbd5e1; font-family: var(--mono); font-size: 11px; }
/* When a row is too narrow the counts give way first, then the name (never below a few letters). */
.row .name { font-weight: 600; overflow: hidden; text-overflow: ellipsis; min-width: 4em; flex: 0 1 auto; }
.row .chip {
  font-size: 10.5px; line-height: 16px; padding: 0 6px; border-radius: 8px; color: #fff; background: var(--c, #94a3b8); flex: none;
}
.row .chip.light { color: var(--ink-2); }
.row .meta { color: var(--muted); font-size: 11px; margin-left: auto; font-variant-numeric: tabular-nums; flex: 0 100 auto; min-width: 0; overflow: hidden; text-overflow: ellipsis; }
#lanes-wrap { position: relative; overflow: hidden; }
#lanes { display: block; }
#lanes .lane-bg { fill: transparent; }
#lanes .lane.sel-lane .lane-bg { fill: rgba(37, 99, 235, .10); }
#lanes .life { stroke: #cbd5e1; stroke-width: 2; stroke-linecap: round; }
#lanes .bar { cursor: pointer; rx: 2.5px; }
#lanes .bar:hover { filter: brightness(1.12); }
#lanes .bar.final { stroke: #fff; stroke-width: 1.5; }
#lanes .bar.sel, #lanes .ev.sel, #lanes .point.sel { stroke: #0f172a; stroke-width: 2; }
#lanes .blabel { font: 10.5px var(--sans); pointer-events: none; }
#lanes .endcap { stroke: #64748b; stroke-width: 2; }
#lanes .ev { cursor: pointer; stroke: #fff; stroke-width: .8; }
#lanes .point { cursor: pointer; stroke: #fff; stroke-width: 1.2; }
#lanes .point:hover { filter: brightness(1.12); }
#lanes .bar.hit, #lanes .point.hit { stroke: #facc15; stroke-width: 2.5; }
#lanes .arrow { cursor: pointer; }
#lanes .arrow .hit { stroke: transparent; stroke-width: 9; }
#lanes .arrow .vis { stroke-width: 1.6; fill: none; }
#lanes .arrow.spawn .vis { stroke: #64748b; stroke-dasharray: 4 3; }
#lanes .arrow:hover .vis { stroke-width: 2.6; }
#lanes .arrow.sel .vis { stroke-width: 3; stroke-dasharray: none; }
#lanes .dot { pointer-events: none; }
#cursor {
  position: absolute; top: 0; bottom: 0; width: 0; border-left: 1.5px solid #0f172a; pointer-events: none; display: none;
}

/* bottom: details and statechart */
#bottom { display: grid; grid-template-columns: minmax(0, 1fr) minmax(360px, 44%); min-height: 0; }
#details { overflow: auto; padding: 12px 16px 24px; background: var(--paper); border-right: 1px solid var(--line); min-height: 0; }
#details .hint { color: var(--muted); margin: 8px 0; }
#details h2 { font-size: 14px; margin: 0 0 2px; display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
#details .kind { font-size: 10.5px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); font-weight: 600; }
#details .sub { color: var(--muted); font-size: 12px; margin-bottom: 10px; font-variant-numeric: tabular-nums; }
#details .badge { font-size: 11px; padding: 1px 8px; border-radius: 9px; color: #fff; font-weight: 600; background: var(--c, #64748b); }
#details .badge.light { color: var(--ink-2); }
#details .item { border: 1px solid var(--line); border-radius: 8px; margin: 8px 0; background: #fff; overflow: hidden; }
#details .item > .head {
  display: flex; gap: 8px; align-items: baseline; padding: 5px 10px; background: var(--wash); border-bottom: 1px solid var(--line);
  font-size: 12px; color: var(--ink-2);
}
#details .item > .head .who { font-weight: 700; color: var(--ink); white-space: nowrap; }
#details .item > .head .t { white-space: nowrap; }
#details .item > .head .t { margin-left: auto; color: var(--muted); font-variant-numeric: tabular-nums; }
#details .item.summary > .head { border-bottom: none; }
#details .item.assistant > .head { box-shadow: inset 3px 0 0 #3b82f6; }
#details .item.user > .head { box-shadow: inset 3px 0 0 #94a3b8; }
#details .item.tools > .head { box-shadow: inset 3px 0 0 #f59e0b; }
#details .item.inbox > .head, #details .item.delivery > .head { box-shadow: inset 3px 0 0 #16a34a; }
#details .item.bad > .head { box-shadow: inset 3px 0 0 #dc2626; }
#details .block { padding: 6px 10px; border-top: 1px dashed var(--line); }
#details .block:first-of-type { border-top: none; }
#details .label { font-size: 11px; color: var(--muted); margin-bottom: 2px; }
#details .label b { color: var(--ink-2); }
#details .err { color: #b91c1c; font-weight: 600; }
#details pre, #details .text {
  margin: 0; white-space: pre-wrap; word-break: break-word; overflow-wrap: anywhere;
}
#details .text { font: 13px/1.5 var(--sans); }
#details .md { font: 13px/1.5 var(--sans); overflow-wrap: anywhere; }
#details .md > :first-child { margin-top: 0; }
#details .md > :last-child { margin-bottom: 0; }
#details .md h1, #details .md h2, #details .md h3 { font-size: 14px; margin: 10px 0 4px; }
#details .md h1 { font-size: 15px; }
#details .md p, #details .md ul, #details .md ol { margin: 4px 0; }
#details .md ul, #details .md ol { padding-left: 22px; }
#details .md code { font: 12px var(--mono); background: #f1f5f9; padding: 0 3px; border-radius: 3px; }
#details .md pre { background: #f1f5f9; padding: 6px 8px; border-radius: 6px; overflow-x: auto; }
#details .md pre code { background: none; padding: 0; }
#details .md table { border-collapse: collapse; }
#details .md th, #details .md td { border: 1px solid var(--line); padding: 2px 6px; }
#details .md blockquote { margin: 4px 0; padding-left: 10px; border-left: 3px solid var(--line); color: var(--ink-2); }
#details div.reply { background: #f8fafc; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
#details .toggle { display: block; margin: 0 0 4px; }
#details .call .sub-label { font-size: 10.5px; text-transform: uppercase; letter-spacing: .05em; color: var(--muted); margin-top: 4px; }
#details .call pre.error { color: #b91c1c; }
#details pre { font: 12px/1.5 var(--mono); color: #1e293b; }
#details pre.reply {
  font: 12.5px/1.55 var(--mono); background: #f8fafc; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px;
}
#details .tag { font: 600 12.5px var(--mono); color: #15803d; margin: 6px 0; }
#details .tag.bad { color: #b91c1c; }
#details .more { margin-top: 4px; font-size: 11.5px; color: var(--accent); background: none; border: none; padding: 0; cursor: pointer; }
#details dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 6px 0 10px; }
#details dt { color: var(--muted); }
#details dd { margin: 0; font-variant-numeric: tabular-nums; }
#details .empty { color: var(--muted); font-style: italic; }
#chart-panel { overflow: auto; padding: 10px 14px; background: #fbfcfe; min-height: 0; }
#chart-panel .panel-head { display: flex; gap: 8px; align-items: baseline; margin-bottom: 6px; }
#chart-panel .panel-head > b { font-size: 12px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); }
#chart-caption { color: var(--ink-2); font-size: 12.5px; }
#chart-caption b { color: var(--ink); }
#chart-scroll { overflow-x: auto; }
/* Scaled down with its panel to a legible size, then scrolled. */
svg.statechart { display: block; height: auto; max-width: 100%; min-width: 400px; }
.sc-state rect { fill: #fff; stroke: var(--c); stroke-width: 1.6; }
.sc-state rect.inner { fill: none; stroke-width: 1; }
.sc-state .dot { fill: var(--c); }
.sc-state text { font: 12px var(--sans); fill: var(--ink); }
.sc-state path.initial { stroke: #0f172a; stroke-width: 1.4; fill: none; }
.sc-state circle.initial { fill: #0f172a; }
.sc-state.active rect { fill: var(--c); stroke: #0f172a; stroke-width: 2.2; }
.sc-state.active rect.inner { stroke: rgba(255,255,255,.8); }
.sc-state.active .dot { fill: #fff; }
.sc-state.active text { fill: #fff; font-weight: 700; }
.sc-state.active.light text { fill: #0f172a; }
.sc-edge path { stroke: #94a3b8; stroke-width: 1.3; fill: none; }
.sc-edge path.taken-path { display: none; stroke: #0f172a; stroke-width: 2.4; }
.sc-edge:hover path { stroke: #475569; stroke-width: 2; }
.sc-edge.taken path { display: none; }
.sc-edge.taken path.taken-path { display: inline; }
#any-state, #outgoing { margin: 8px 0 0; padding: 0; list-style: none; font-size: 12px; color: var(--ink-2); }
#any-state li, #outgoing li { padding: 1px 0; }
#any-state code, #outgoing code { font: 11.5px var(--mono); color: var(--ink); }
#chart-panel h3 { font-size: 11px; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin: 12px 0 2px; }

#tip {
  position: fixed; z-index: 10; pointer-events: none; display: none; max-width: 420px;
  background: #0f172a; color: #f1f5f9; font-size: 12px; padding: 5px 9px; border-radius: 6px;
  box-shadow: 0 4px 14px rgba(15, 23, 42, .25); white-space: pre-line;
}
`;
