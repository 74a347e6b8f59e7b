/**
 * The viewer page's script, as a string the page inlines (so it works from the compiled dist/
 * with no asset to copy). Plain ES5-style browser JavaScript in one IIFE: it reads the embedded
 * `{ model, records }` JSON, draws one SVG of swimlanes (plain rects, lines and paths, built as
 * one string per render and culled to the visible time window), and builds the details panel
 * only when something is clicked. It never touches the network.
 *
 * Keep it free of backticks and dollar-brace sequences: it lives in a template literal.
 */
export const VIEWER_SCRIPT = String.raw`
(function () {
  'use strict';
  var scriptStart = performance.now();
  var data = JSON.parse(document.getElementById('exarch-trace').textContent);
  var model = data.model;
  var records = data.records;
  var colors = data.colors;
  var outcomeColors = data.outcomeColors;
  var unknownColor = data.unknownColor;
  var lightStates = data.lightStates;
  var agents = model.agents;
  var arrows = model.arrows;
  var chart = model.statechart;
  var parsedAt = performance.now();

  // The lane height is the tree's row height (--row), so each lane sits beside its tree row.
  var ROW = parseFloat(getComputedStyle(document.documentElement).getPropertyValue('--row')) || 24;
  var MID = ROW / 2, FINAL_W = 9;
  function $(id) { return document.getElementById(id); }
  var lanesWrap = $('lanes-wrap'), lanesSvg = $('lanes'), axisSvg = $('axis'), details = $('details');
  var tree = $('tree'), tip = $('tip'), cursorEl = $('cursor'), caption = $('chart-caption');
  var outgoing = $('outgoing'), rangeEl = $('range'), chartSvg = document.querySelector('#chart-panel svg');

  var fullSpan = Math.max(model.t1 - model.t0, 1);
  var view = { t0: model.t0, t1: model.t0 + fullSpan };
  var W = 0;
  var sel = null;
  var selAgent = -1;
  var cursorT = null;
  var toolNames = null;

  var has = Object.prototype.hasOwnProperty;
  function colorOf(state) { return has.call(colors, state) ? colors[state] : unknownColor; }
  function outcomeColor(outcome) { return has.call(outcomeColors, outcome) ? outcomeColors[outcome] : unknownColor; }
  function isLight(state) { return lightStates.indexOf(state) >= 0; }
  function esc(s) { return String(s).replace(/[&<>"']/g, function (c) { return '&#' + c.charCodeAt(0) + ';'; }); }
  function xOf(t) { return (t - view.t0) / (view.t1 - view.t0) * W; }
  function tOf(x) { return view.t0 + x / W * (view.t1 - view.t0); }
  function clampX(x) { return x < -20 ? -20 : x > W + 20 ? W + 20 : x; }
  function r1(n) { return Math.round(n * 10) / 10; }

  function fmtT(ms) {
    var a = Math.abs(ms);
    if (a < 1000) return (a < 10 ? ms.toFixed(2) : ms.toFixed(1)) + ' ms';
    if (a < 60000) return (ms / 1000).toFixed(a < 10000 ? 3 : 2) + ' s';
    var m = Math.floor(ms / 60000), s = (ms - m * 60000) / 1000;
    return m + ':' + (s < 10 ? '0' : '') + s.toFixed(1);
  }
  function fmtN(n) {
    if (n >= 1e6) return (n / 1e6).toFixed(1) + 'M';
    if (n >= 1e4) return Math.round(n / 1e3) + 'k';
    if (n >= 1e3) return (n / 1e3).toFixed(1) + 'k';
    return String(n);
  }
  function plural(n, word) { return n + ' ' + word + (n === 1 ? '' : 's'); }

  // ---- time axis ---------------------------------------------------------------------------
  function niceStep(span, px) {
    var raw = span / Math.max(1, px / 110);
    var p10 = Math.pow(10, Math.floor(Math.log(raw) / Math.LN10));
    var m = raw / p10;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p10;
  }
  function tickLabel(t, step) {
    if (step < 1000) return (step < 1 ? t.toFixed(2) : step < 10 ? t.toFixed(1) : String(Math.round(t))) + ' ms';
    if (step < 60000) return (t / 1000).toFixed(step % 1000 === 0 ? 0 : 1) + ' s';
    var m = Math.floor(t / 60000), s = Math.round((t - m * 60000) / 1000);
    return m + ':' + (s < 10 ? '0' : '') + s;
  }
  function ticks() {
    var step = niceStep(view.t1 - view.t0, W);
    var out = [];
    var first = Math.ceil(view.t0 / step);
    for (var i = first; i * step <= view.t1 && out.length < 200; i++) out.push(i * step);
    return { step: step, list: out };
  }
  function renderAxis() {
    var tk = ticks();
    var p = [];
    for (var i = 0; i < tk.list.length; i++) {
      var t = tk.list[i], x = r1(xOf(t));
      p.push('<line x1="' + x + '" x2="' + x + '" y1="19" y2="28"/>');
      p.push('<text x="' + (x + 4) + '" y="17">' + tickLabel(t, tk.step) + '</text>');
    }
    if (cursorT !== null && cursorT >= view.t0 && cursorT <= view.t1) {
      var cx = xOf(cursorT), label = fmtT(cursorT), lw = label.length * 6.4 + 12;
      var lx = Math.min(Math.max(cx - lw / 2, 0), W - lw);
      p.push('<g class="cursor-label"><rect x="' + r1(lx) + '" y="3" width="' + r1(lw) + '" height="19" rx="4"/><text x="' + r1(lx + 6) + '" y="17">' + label + '</text></g>');
    }
    axisSvg.setAttribute('width', W);
    axisSvg.setAttribute('height', 28);
    axisSvg.innerHTML = p.join('');
    rangeEl.textContent = fmtT(view.t0) + ' – ' + fmtT(view.t1);
  }

  // ---- lanes -------------------------------------------------------------------------------
  var markerColors = {};
  function marker(color) {
    var id = 'ah' + color.replace('#', '');
    markerColors[id] = color;
    return 'url(#' + id + ')';
  }
  function eventColor(type) {
    if (type === 'cancel' || type === 'model.error') return '#dc2626';
    if (type === 'user.message') return '#0d9488';
    return '#475569';
  }

  function render() {
    var t0 = performance.now();
    W = Math.max(200, lanesWrap.clientWidth);
    var H = Math.max(agents.length * ROW, ROW);
    var v0 = view.t0, v1 = view.t1;
    var p = [];
    markerColors = {};
    var tk = ticks();
    for (var g = 0; g < tk.list.length; g++) {
      var gx = r1(xOf(tk.list[g]));
      p.push('<line class="grid" x1="' + gx + '" x2="' + gx + '" y1="0" y2="' + H + '" stroke="#eef2f7"/>');
    }
    for (var i = 0; i < agents.length; i++) {
      var a = agents[i];
      p.push('<g class="lane' + (i === selAgent ? ' sel-lane' : '') + '" data-agent="' + esc(a.id) + '" data-lane="' + i + '" transform="translate(0,' + i * ROW + ')">');
      p.push('<rect class="lane-bg" width="' + W + '" height="' + ROW + '"/>');
      if (a.end >= v0 && a.start <= v1) {
        p.push('<line class="life" x1="' + r1(clampX(xOf(a.start))) + '" x2="' + r1(clampX(xOf(a.end))) + '" y1="' + MID + '" y2="' + MID + '"/>');
      }
      var bars = a.bars;
      // Bars narrower than a pixel that the last drawn rect already covers are not drawn.
      var coveredTo = -Infinity;
      for (var j = 0; j < bars.length; j++) {
        var b = bars[j];
        if (b.t1 < v0 || b.t0 > v1) continue;
        var x0 = xOf(b.t0);
        if (b.final) {
          p.push('<rect class="bar final" data-state="' + esc(b.state) + '" data-b="' + j + '" x="' + r1(x0) + '" y="2" width="' + FINAL_W + '" height="20"/>');
          continue;
        }
        var cx0 = clampX(x0), cx1 = clampX(xOf(b.t1));
        if (cx1 <= coveredTo) continue;
        var w = cx1 - cx0;
        if (w > 3) w -= 1;
        if (w < 1) w = 1;
        coveredTo = cx0 + w;
        p.push('<rect class="bar" data-state="' + esc(b.state) + '" data-b="' + j + '" x="' + r1(cx0) + '" y="4" width="' + r1(w) + '" height="16"/>');
        if (w > 64) {
          var visible0 = Math.max(cx0, 0), visibleW = Math.min(cx0 + w, W) - visible0;
          var room = Math.floor((visibleW - 10) / 6.2);
          var label = b.state === 'streaming' ? 'streaming · step ' + b.steps : b.state;
          if (label.length > room && b.state === 'streaming') label = 'step ' + b.steps;
          if (room >= 6) {
            if (label.length > room) label = label.slice(0, room - 1) + '…';
            p.push('<text class="blabel" x="' + r1(visible0 + 5) + '" y="16" fill="' + (isLight(b.state) ? '#334155' : '#ffffff') + '">' + esc(label) + '</text>');
          }
        }
      }
      if ((a.status === 'stopped' || a.status === 'error') && a.end >= v0 && a.end <= v1) {
        var ex = r1(xOf(a.end));
        p.push('<line class="endcap" x1="' + ex + '" x2="' + ex + '" y1="4" y2="20"/>');
      }
      for (var e = 0; e < a.events.length; e++) {
        var rec = records[a.events[e]];
        if (rec.t < v0 || rec.t > v1) continue;
        var evx = r1(xOf(rec.t));
        p.push('<path class="ev" data-kind="event" data-rec="' + a.events[e] + '" d="M' + (evx - 5) + ',0 L' + (evx + 5) + ',0 L' + evx + ',8 Z" fill="' + eventColor(rec.type) + '"/>');
      }
      p.push('</g>');
    }
    for (var k = 0; k < arrows.length; k++) {
      var ar = arrows[k];
      if (ar.t < v0 || ar.t > v1) continue;
      var x = r1(xOf(ar.t));
      var down = ar.to > ar.from;
      var y1 = ar.from * ROW + (down ? 19 : 5), y2 = ar.to * ROW + (down ? 3 : 21);
      var col = ar.kind === 'spawn' ? '#64748b' : outcomeColor(ar.outcome);
      var parent = ar.kind === 'spawn' ? ar.from : ar.to, child = ar.kind === 'spawn' ? ar.to : ar.from;
      p.push('<g class="arrow ' + ar.kind + '" data-kind="' + ar.kind + '" data-a="' + k + '" data-parent="' + esc(agents[parent].id) + '" data-child="' + esc(agents[child].id) + '">' +
        '<line class="hit" x1="' + x + '" x2="' + x + '" y1="' + y1 + '" y2="' + y2 + '"/>' +
        '<line class="vis" x1="' + x + '" x2="' + x + '" y1="' + y1 + '" y2="' + (down ? y2 - 1 : y2 + 1) + '" stroke="' + col + '" marker-end="' + marker(col) + '"/>' +
        '<circle class="dot" cx="' + x + '" cy="' + y1 + '" r="2.3" fill="' + col + '"/></g>');
    }
    var defs = ['<defs>'];
    for (var id in markerColors) {
      defs.push('<marker id="' + id + '" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="' + markerColors[id] + '"/></marker>');
    }
    defs.push('</defs>');
    lanesSvg.setAttribute('width', W);
    lanesSvg.setAttribute('height', H);
    lanesSvg.innerHTML = defs.join('') + '<g id="content">' + p.join('') + '</g>';
    drawn.t0 = view.t0;
    drawn.t1 = view.t1;
    renderAxis();
    markSelection();
    placeCursor();
    lastRenderMs = performance.now() - t0;
  }
  var lastRenderMs = 0;
  var pending = false;
  var settleTimer = 0;
  var drawn = { t0: view.t0, t1: view.t1 };
  function schedule() {
    clearTimeout(settleTimer);
    if (pending) return;
    pending = true;
    requestAnimationFrame(function () { pending = false; render(); });
  }
  /**
   * While the wheel turns, stretch what is drawn to the new window at once (one transform) and
   * draw it properly once the wheel rests.
   */
  function preview() {
    var content = $('content');
    if (content) {
      var span = view.t1 - view.t0;
      var k = (drawn.t1 - drawn.t0) / span;
      var dx = (drawn.t0 - view.t0) / span * W;
      content.setAttribute('transform', 'translate(' + r1(dx) + ',0) scale(' + k + ',1)');
    }
    renderAxis();
    placeCursor();
    clearTimeout(settleTimer);
    settleTimer = setTimeout(schedule, 140);
  }

  function placeCursor() {
    if (cursorT === null || cursorT < view.t0 || cursorT > view.t1) { cursorEl.style.display = 'none'; return; }
    cursorEl.style.display = 'block';
    cursorEl.style.left = r1(xOf(cursorT)) + 'px';
  }

  // ---- selection ---------------------------------------------------------------------------
  function barAt(lane, t) {
    var bars = agents[lane].bars, lo = 0, hi = bars.length - 1, found = -1;
    while (lo <= hi) {
      var mid = (lo + hi) >> 1;
      if (bars[mid].t0 <= t) { found = mid; lo = mid + 1; } else hi = mid - 1;
    }
    return found;
  }
  function selectedElement() {
    if (!sel) return null;
    if (sel.kind === 'bar') return lanesSvg.querySelector('.lane[data-lane="' + sel.lane + '"] [data-b="' + sel.bar + '"]');
    if (sel.kind === 'arrow') return lanesSvg.querySelector('[data-a="' + sel.arrow + '"]');
    if (sel.kind === 'event') return lanesSvg.querySelector('[data-rec="' + sel.rec + '"]');
    return null;
  }
  function markSelection() {
    var old = lanesSvg.querySelectorAll('.sel, .sel-lane');
    for (var i = 0; i < old.length; i++) old[i].classList.remove('sel', 'sel-lane');
    var el = selectedElement();
    if (el) el.classList.add('sel');
    if (selAgent >= 0) {
      var lane = lanesSvg.querySelector('.lane[data-lane="' + selAgent + '"]');
      if (lane) lane.classList.add('sel-lane');
    }
    var rows = tree.querySelectorAll('.row.sel');
    for (var r = 0; r < rows.length; r++) rows[r].classList.remove('sel');
    var row = tree.children[selAgent];
    if (row) row.classList.add('sel');
  }
  function select(next, lane, t, bar) {
    sel = next;
    selAgent = lane;
    cursorT = t;
    markSelection();
    placeCursor();
    renderAxis();
    highlightChart(lane, bar === undefined ? barAt(lane, t) : bar, t);
  }
  function selectBar(lane, j, t) {
    var b = agents[lane].bars[j];
    var at = b.final ? b.t0 : Math.min(Math.max(t, b.t0), b.t1);
    select({ kind: 'bar', lane: lane, bar: j }, lane, at, j);
    showBar(lane, j);
  }
  function selectArrow(k) {
    var ar = arrows[k];
    var lane = ar.kind === 'spawn' ? ar.from : ar.to;
    select({ kind: 'arrow', arrow: k }, lane, ar.t);
    showArrow(k);
  }
  function selectEvent(lane, rec) {
    select({ kind: 'event', rec: rec }, lane, records[rec].t);
    showEvent(lane, rec);
  }
  function selectAgent(lane, t) {
    select({ kind: 'agent', lane: lane }, lane, t);
    showAgent(lane, t);
  }

  // ---- statechart --------------------------------------------------------------------------
  function highlightChart(lane, j, t) {
    if (!chartSvg) return;
    var old = chartSvg.querySelectorAll('.active, .taken');
    for (var i = 0; i < old.length; i++) old[i].classList.remove('active', 'taken', 'light');
    caption.textContent = '';
    outgoing.textContent = '';
    var a = agents[lane];
    var who = document.createElement('b');
    who.textContent = a.id;
    caption.appendChild(who);
    if (j < 0) { caption.appendChild(document.createTextNode(' at ' + fmtT(t) + ': not started')); return; }
    var b = a.bars[j];
    var node = chartSvg.querySelector('[data-statechart-state="' + CSS.escape(b.state) + '"]');
    if (node) {
      node.classList.add('active');
      if (isLight(b.state)) node.classList.add('light');
    }
    var prev = j > 0 ? a.bars[j - 1].state : null;
    if (prev !== null) {
      var edge = chartSvg.querySelector('[data-from="' + CSS.escape(prev) + '"][data-to="' + CSS.escape(b.state) + '"]');
      if (edge) edge.classList.add('taken');
    }
    caption.appendChild(document.createTextNode(' at ' + fmtT(t) + ': '));
    var st = document.createElement('b');
    st.textContent = b.state;
    caption.appendChild(st);
    caption.appendChild(document.createTextNode((prev ? ' (from ' + prev + ')' : '') + ' · step ' + b.steps));
    if (!chart) return;
    if (b.final) {
      outgoing.appendChild(h('li', null, b.state + ' is final: the session ends here and its result goes to its parent.'));
      return;
    }
    // The state's own transitions, then those from any state for events it does not handle itself.
    var own = chart.transitions.filter(function (tr) { return tr.source === b.state; });
    var handled = own.map(function (tr) { return tr.event; });
    var outs = own.concat(chart.transitions.filter(function (tr) { return tr.source === '*' && handled.indexOf(tr.event) < 0; }));
    if (outs.length === 0) return;
    var head = document.createElement('li');
    head.appendChild(h('b', null, 'ways out of ' + b.state));
    outgoing.appendChild(head);
    outs.forEach(function (tr) {
      var li = document.createElement('li');
      li.appendChild(h('code', null, shortEvent(tr.event)));
      li.appendChild(document.createTextNode((tr.guard ? ' [' + tr.guard + ']' : '') + ' → ' + (tr.target === '*' || tr.target === tr.source ? '(stays)' : tr.target) + (tr.source === '*' ? ' · from any state' : '')));
      outgoing.appendChild(li);
    });
  }
  function shortEvent(ev) {
    var m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(ev);
    if (m) return m[2] === '*' ? 'child ' + m[1] : m[1] + ': ' + m[2];
    return ev;
  }

  // ---- details -----------------------------------------------------------------------------
  function h(tag, cls, text) {
    var n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text !== null && text !== undefined) n.textContent = text;
    return n;
  }
  function clip(tag, cls, text, limit) {
    var box = h('div');
    var long = text.length > limit;
    var n = h(tag, cls, long ? text.slice(0, limit) + '…' : text);
    box.appendChild(n);
    if (long) {
      var more = h('button', 'more', 'show all ' + text.length.toLocaleString('en') + ' characters');
      more.addEventListener('click', function () { n.textContent = text; more.remove(); });
      box.appendChild(more);
    }
    return box;
  }
  function badge(label, color, light) {
    var b = h('span', 'badge' + (light ? ' light' : ''), label);
    b.style.setProperty('--c', color);
    return b;
  }
  function stateBadge(state) { return badge(state, colorOf(state), isLight(state)); }
  function header(kind, title, badgeEl, sub) {
    details.textContent = '';
    details.scrollTop = 0;
    var h2 = h('h2');
    h2.appendChild(h('span', 'kind', kind));
    h2.appendChild(h('span', null, title));
    if (badgeEl) h2.appendChild(badgeEl);
    details.appendChild(h2);
    if (sub) details.appendChild(h('div', 'sub', sub));
  }
  function item(cls, who, what, t) {
    var it = h('div', 'item ' + cls);
    var head = h('div', 'head');
    head.appendChild(h('span', 'who', who));
    if (what) head.appendChild(h('span', null, what));
    if (t !== undefined) head.appendChild(h('span', 't', fmtT(t)));
    it.appendChild(head);
    return it;
  }
  function block(label, content) {
    var b = h('div', 'block');
    if (label) b.appendChild(label);
    if (content) b.appendChild(content);
    return b;
  }
  function label(parts) {
    var l = h('div', 'label');
    for (var i = 0; i < parts.length; i++) {
      var part = parts[i];
      l.appendChild(i % 2 === 1 ? h('b', null, part) : document.createTextNode(part));
    }
    return l;
  }
  function usageText(u) {
    if (!u) return '';
    var s = 'in ' + fmtN(u.inputTokens) + ' · out ' + fmtN(u.outputTokens);
    if (u.cacheReadInputTokens) s += ' · cache read ' + fmtN(u.cacheReadInputTokens);
    if (u.cacheCreationInputTokens) s += ' · cache write ' + fmtN(u.cacheCreationInputTokens);
    return s;
  }
  function toolName(id) {
    if (!toolNames) {
      toolNames = {};
      for (var i = 0; i < records.length; i++) {
        var r = records[i];
        if (r.kind === 'response') for (var c = 0; c < r.toolCalls.length; c++) toolNames[r.toolCalls[c].id] = r.toolCalls[c].name;
      }
    }
    return has.call(toolNames, id) ? toolNames[id] : 'tool';
  }

  function messageItem(r) {
    var m = r.message;
    var content = Array.isArray(m.content) ? m.content : [{ type: 'text', text: String(m.content) }];
    var tools = m.role === 'user' && content.some(function (b) { return b.type === 'tool_result'; });
    var first = content[0] && content[0].type === 'text' ? content[0].text : '';
    var inbox = m.role === 'user' && !tools && first.indexOf("[agent '") === 0;
    var cls = m.role === 'assistant' ? 'assistant' : tools ? 'tools' : inbox ? 'inbox' : 'user';
    var who = m.role === 'assistant' ? 'assistant' : tools ? 'tool results' : inbox ? 'user · inbox turn' : 'user';
    var it = item(cls, who, 'message #' + r.index, r.t);
    content.forEach(function (b) {
      if (b.type === 'text') it.appendChild(block(null, clip('div', 'text', b.text, 4000)));
      else if (b.type === 'tool_use') it.appendChild(block(label(['calls ', b.name, '  ' + b.id]), clip('pre', null, JSON.stringify(b.input, null, 2), 1500)));
      else if (b.type === 'tool_result') {
        var l = label(['result of ', toolName(b.tool_use_id), '  ' + b.tool_use_id]);
        if (b.is_error) l.appendChild(h('span', 'err', '  error'));
        it.appendChild(block(l, clip('pre', null, String(b.content), 2500)));
      } else it.appendChild(block(label([b.type]), clip('pre', null, JSON.stringify(b, null, 2), 1000)));
    });
    return it;
  }
  function recordItem(index) {
    var r = records[index];
    switch (r.kind) {
      case 'message': return messageItem(r);
      case 'response': {
        var calls = r.toolCalls.map(function (c) { return c.name + (c.complete ? '' : ' (cut off)'); });
        return item('summary' + (r.stopReason === 'refusal' || r.stopReason === 'max_tokens' ? ' bad' : ''), 'model response',
          'stop: ' + r.stopReason + ' · ' + plural(r.textChars, 'char') + ' of text' + (calls.length ? ' · calls ' + calls.join(', ') : '') + ' · ' + usageText(r.usage), r.t);
      }
      case 'tool.result':
        return item('summary' + (r.isError ? ' bad' : ''), 'tool result', toolName(r.toolUseId) + ' · ' + (r.isError ? 'error' : 'ok') + ' · ' + plural(r.chars, 'char'), r.t);
      case 'event':
        return item('summary' + (r.type === 'cancel' || r.type === 'model.error' ? ' bad' : ''), 'event', r.type + (r.detail ? ': ' + r.detail : ''), r.t);
      case 'agent.start': {
        var sp = item('inbox', 'spawned ' + r.name, plural(r.taskChars, 'character') + ' of task', r.t);
        sp.appendChild(block(null, clip('div', 'text', r.task, 600)));
        return sp;
      }
      case 'delivery': {
        var bad = r.outcome !== 'replied';
        var dv = item('delivery' + (bad ? ' bad' : ''), 'inbox ← ' + r.name, r.outcome + ' · ' + plural(r.text.length, 'char'), r.t);
        if (r.text) dv.appendChild(block(null, clip('pre', null, r.text, 1200)));
        else if (r.reason) dv.appendChild(block(null, h('div', 'text', r.reason)));
        return dv;
      }
      default:
        return item('summary', r.kind, null, r.t);
    }
  }

  function arrowFor(rec) {
    for (var k = 0; k < arrows.length; k++) if (arrows[k].rec === rec) return arrows[k];
    return null;
  }
  function appendReply(rec) {
    var r = records[rec], ar = arrowFor(rec);
    var bad = r.outcome !== 'replied';
    details.appendChild(h('div', 'tag' + (bad ? ' bad' : ''), ar ? ar.tag : "[agent '" + r.name + "' " + r.outcome + ']'));
    if (r.text) details.appendChild(h('pre', 'reply', r.text));
    else details.appendChild(h('p', 'empty', 'No reply text: the tag is all the parent receives.'));
  }

  function showBar(lane, j) {
    var a = agents[lane], b = a.bars[j];
    header('state', a.id, stateBadge(b.state),
      fmtT(b.t0) + ' → ' + fmtT(b.t1) + ' · ' + fmtT(b.t1 - b.t0) + ' · step ' + b.steps + ' · ' + plural(b.items.length, 'record'));
    if (b.final) {
      var dl = h('dl');
      dl.appendChild(h('dt', null, 'outcome'));
      dl.appendChild(h('dd', null, a.outcome || b.state));
      if (a.reason) { dl.appendChild(h('dt', null, 'reason')); dl.appendChild(h('dd', null, a.reason)); }
      details.appendChild(dl);
      if (a.delivery >= 0) {
        var r = records[a.delivery];
        details.appendChild(label(['delivered to ', agents[a.parent] ? agents[a.parent].id : 'parent', ' at ' + fmtT(r.t)]));
        appendReply(a.delivery);
      }
    }
    if (b.items.length === 0 && !b.final) details.appendChild(h('p', 'empty', 'Nothing was committed in this interval.'));
    for (var i = 0; i < b.items.length; i++) details.appendChild(recordItem(b.items[i]));
  }

  function showArrow(k) {
    var ar = arrows[k], r = records[ar.rec];
    if (ar.kind === 'delivery') {
      header('delivery', r.name + ' → ' + agents[ar.to].id, badge(r.outcome, outcomeColor(r.outcome)),
        'at ' + fmtT(r.t) + ' · ' + plural(r.text.length, 'character') + ' · what ' + agents[ar.to].id + ' receives in its inbox');
      appendReply(ar.rec);
    } else {
      var child = agents[ar.to];
      header('spawn', agents[ar.from].id + ' → ' + r.name, child.outcome ? badge(child.outcome, outcomeColor(child.outcome)) : stateBadge(child.lastState),
        'at ' + fmtT(r.t) + ' · depth ' + r.depth + ' · ' + child.id);
      details.appendChild(label(['task', r.taskChars > r.task.length ? ' (the first ' + r.task.length + ' of ' + r.taskChars + ' characters)' : ' (' + plural(r.taskChars, 'character') + ')']));
      details.appendChild(h('div', 'text', r.task));
    }
  }

  function showEvent(lane, rec) {
    var r = records[rec];
    header('event', agents[lane].id, null, 'at ' + fmtT(r.t));
    details.appendChild(recordItem(rec));
  }

  function showAgent(lane, t) {
    var a = agents[lane];
    header('agent', a.id, a.outcome ? badge(a.outcome, outcomeColor(a.outcome)) : stateBadge(a.lastState),
      fmtT(a.start) + ' → ' + fmtT(a.end) + ' · ' + fmtT(a.end - a.start) + ' · ' + a.status);
    var dl = h('dl');
    function row(k, v) { dl.appendChild(h('dt', null, k)); dl.appendChild(h('dd', null, v)); }
    row('model requests', String(a.requests));
    row('tokens', usageText(a.usage));
    row('sub-agents', String(a.children.length));
    if (a.reason) row('reason', a.reason);
    var j = barAt(lane, t);
    if (j >= 0) row('at ' + fmtT(t), a.bars[j].state + ' · step ' + a.bars[j].steps);
    details.appendChild(dl);
    if (j >= 0) {
      var open = h('button', 'more', 'show the ' + a.bars[j].state + ' interval at ' + fmtT(t));
      open.addEventListener('click', function () { selectBar(lane, j, t); });
      details.appendChild(open);
    }
    if (a.startRec >= 0) {
      var s = records[a.startRec];
      details.appendChild(label(['task', ' (' + plural(s.taskChars, 'character') + ')']));
      details.appendChild(clip('div', 'text', s.task, 1200));
    }
    if (a.delivery >= 0) {
      var r = records[a.delivery];
      details.appendChild(label(['delivered to ', agents[a.parent] ? agents[a.parent].id : 'parent', ' at ' + fmtT(r.t)]));
      appendReply(a.delivery);
    }
    var hist = h('button', 'more', 'show its whole history');
    hist.addEventListener('click', function () {
      hist.remove();
      var latest = {};
      for (var i = 0; i < records.length; i++) {
        var m = records[i];
        if (m.kind === 'message' && m.agent === a.id) latest[m.index] = i;
      }
      var keys = Object.keys(latest).map(Number).sort(function (x, y) { return x - y; });
      if (keys.length === 0) details.appendChild(h('p', 'empty', 'No messages.'));
      keys.forEach(function (key) { details.appendChild(recordItem(latest[key])); });
    });
    details.appendChild(h('div'));
    details.appendChild(hist);
  }

  // ---- events ------------------------------------------------------------------------------
  function laneOf(node) {
    var g = node.closest('.lane');
    return g ? Number(g.getAttribute('data-lane')) : -1;
  }
  function localX(e) { return e.clientX - lanesSvg.getBoundingClientRect().left; }
  lanesSvg.addEventListener('click', function (e) {
    var target = e.target;
    if (!(target instanceof Element)) return;
    var arrowEl = target.closest('[data-a]');
    if (arrowEl) { selectArrow(Number(arrowEl.getAttribute('data-a'))); return; }
    var evEl = target.closest('[data-rec]');
    if (evEl) { selectEvent(laneOf(evEl), Number(evEl.getAttribute('data-rec'))); return; }
    var lane = laneOf(target);
    if (lane < 0) return;
    var t = tOf(localX(e));
    var barEl = target.closest('[data-b]');
    if (barEl) { selectBar(lane, Number(barEl.getAttribute('data-b')), t); return; }
    selectAgent(lane, t);
  });
  lanesSvg.addEventListener('dblclick', function (e) {
    var target = e.target;
    if (!(target instanceof Element)) return;
    var barEl = target.closest('[data-b]');
    var lane = laneOf(target);
    if (!barEl || lane < 0) return;
    var b = agents[lane].bars[Number(barEl.getAttribute('data-b'))];
    var pad = Math.max((b.t1 - b.t0) * 0.15, fullSpan / 1e5);
    setView(b.t0 - pad, b.t1 + pad);
  });
  tree.addEventListener('click', function (e) {
    var target = e.target;
    if (!(target instanceof Element)) return;
    var row = target.closest('[data-lane]');
    if (!row) return;
    var lane = Number(row.getAttribute('data-lane'));
    var a = agents[lane];
    var t = cursorT !== null && cursorT >= a.start && cursorT <= a.end ? cursorT : a.end;
    selectAgent(lane, t);
  });

  function tipFor(target) {
    if (!(target instanceof Element)) return '';
    var arrowEl = target.closest('[data-a]');
    if (arrowEl) {
      var ar = arrows[Number(arrowEl.getAttribute('data-a'))];
      return ar.kind === 'spawn'
        ? 'spawn: ' + agents[ar.from].id + ' → ' + agents[ar.to].name + '\nat ' + fmtT(ar.t)
        : 'delivery: ' + agents[ar.from].name + ' → ' + agents[ar.to].id + '\n' + ar.tag + '\nat ' + fmtT(ar.t);
    }
    var evEl = target.closest('[data-rec]');
    if (evEl) {
      var r = records[Number(evEl.getAttribute('data-rec'))];
      return r.type + (r.detail ? ': ' + r.detail : '') + '\nat ' + fmtT(r.t);
    }
    var barEl = target.closest('[data-b]');
    var lane = laneOf(target);
    if (barEl && lane >= 0) {
      var a = agents[lane], b = a.bars[Number(barEl.getAttribute('data-b'))];
      return a.id + '\n' + b.state + ' · step ' + b.steps + '\n' + fmtT(b.t0) + ' → ' + fmtT(b.t1) + ' (' + fmtT(b.t1 - b.t0) + ')';
    }
    return '';
  }
  lanesSvg.addEventListener('mousemove', function (e) {
    var text = tipFor(e.target);
    if (!text) { tip.style.display = 'none'; return; }
    tip.textContent = text;
    tip.style.display = 'block';
    var x = e.clientX + 14, y = e.clientY + 14;
    if (x + tip.offsetWidth > window.innerWidth - 8) x = e.clientX - tip.offsetWidth - 10;
    if (y + tip.offsetHeight > window.innerHeight - 8) y = e.clientY - tip.offsetHeight - 10;
    tip.style.left = x + 'px';
    tip.style.top = y + 'px';
  });
  lanesSvg.addEventListener('mouseleave', function () { tip.style.display = 'none'; });

  // ---- zoom and pan ------------------------------------------------------------------------
  function setView(t0, t1, smooth) {
    var min = Math.max(fullSpan / 1e6, 0.001);
    var span = Math.min(Math.max(t1 - t0, min), fullSpan);
    if (t0 < model.t0) t0 = model.t0;
    if (t0 + span > model.t0 + fullSpan) t0 = model.t0 + fullSpan - span;
    view.t0 = t0;
    view.t1 = t0 + span;
    if (smooth) preview(); else schedule();
  }
  function zoomAt(factor, t, smooth) {
    var frac = (t - view.t0) / (view.t1 - view.t0);
    var span = (view.t1 - view.t0) * factor;
    setView(t - frac * span, t - frac * span + span, smooth);
  }
  function centre() { return cursorT !== null && cursorT >= view.t0 && cursorT <= view.t1 ? cursorT : (view.t0 + view.t1) / 2; }
  $('zoom-in').addEventListener('click', function () { zoomAt(0.5, centre()); });
  $('zoom-out').addEventListener('click', function () { zoomAt(2, centre()); });
  $('zoom-fit').addEventListener('click', function () { setView(model.t0, model.t0 + fullSpan); });
  function onWheel(e) {
    if (e.ctrlKey || e.metaKey) {
      e.preventDefault();
      zoomAt(Math.exp(e.deltaY * 0.0025), tOf(e.clientX - lanesWrap.getBoundingClientRect().left), true);
    } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
      e.preventDefault();
      var d = (e.deltaX || e.deltaY) / W * (view.t1 - view.t0);
      setView(view.t0 + d, view.t1 + d, true);
    }
  }
  lanesWrap.addEventListener('wheel', onWheel, { passive: false });
  $('axis-wrap').addEventListener('wheel', onWheel, { passive: false });
  var drag = null;
  $('axis-wrap').addEventListener('mousedown', function (e) { drag = { x: e.clientX, t0: view.t0, t1: view.t1 }; e.preventDefault(); });
  window.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var d = (drag.x - e.clientX) / W * (drag.t1 - drag.t0);
    setView(drag.t0 + d, drag.t1 + d, true);
  });
  window.addEventListener('mouseup', function () { drag = null; });
  window.addEventListener('resize', schedule);

  render();
  var renderedAt = performance.now();
  window.exarchViewer = {
    parseMs: parsedAt - scriptStart,
    renderMs: renderedAt - parsedAt,
    readyAt: renderedAt,
    lastRenderMs: function () { return lastRenderMs; },
    agents: agents.length,
    records: records.length
  };
  document.body.setAttribute('data-ready', 'true');
})();
`;
