/**
 * The page `startLiveInspector` serves. It reads the event stream from the WebSocket on its own
 * host and hands every message to the embedded Stately inspector with `postMessage`, as the bridge
 * page of `@statelyai/inspect/server` does (buffered until the inspector posts
 * `@statelyai.connected`). The hosted inspector needs internet; when it does not answer, the page
 * switches to a local view built from the same stream: every session with its state, steps, tokens
 * and last event, as a tree, and the latest events.
 */
export function bridgePage(options: { inspectorUrl: string }): string {
  const inspectorUrl = JSON.stringify(options.inspectorUrl).replace(/</g, '\\u003c');
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>exarch · live inspector</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
  * { box-sizing: border-box; }
  html, body { height: 100%; margin: 0; }
  body { display: flex; flex-direction: column; font: 13px/1.4 -apple-system, BlinkMacSystemFont, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2430; background: #f7f8fa; }
  header { display: flex; align-items: center; gap: 14px; padding: 8px 14px; background: #1f2430; color: #e8eaf0; }
  header h1 { font-size: 14px; margin: 0; font-weight: 650; }
  header .spacer { flex: 1; }
  header button { font: inherit; color: #e8eaf0; background: transparent; border: 1px solid #4a5060; border-radius: 6px; padding: 3px 10px; cursor: pointer; }
  header button[aria-pressed="true"] { background: #4f5fd6; border-color: #4f5fd6; }
  .dot { display: inline-block; width: 8px; height: 8px; border-radius: 50%; background: #b04040; margin-right: 6px; vertical-align: middle; }
  .dot.on { background: #3fb950; }
  #notice { display: none; padding: 7px 14px; background: #fff6d6; border-bottom: 1px solid #efd98a; }
  main { flex: 1; position: relative; min-height: 0; }
  #stately { position: absolute; inset: 0; width: 100%; height: 100%; border: 0; background: #fff; }
  #local { position: absolute; inset: 0; display: none; grid-template-columns: minmax(0, 3fr) minmax(260px, 2fr); gap: 14px; padding: 14px; overflow: hidden; }
  section { background: #fff; border: 1px solid #e3e5ea; border-radius: 8px; overflow: auto; min-height: 0; }
  section h2 { position: sticky; top: 0; margin: 0; padding: 8px 12px; font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: #5b6270; background: #fff; border-bottom: 1px solid #eef0f3; display: flex; gap: 10px; align-items: center; }
  section h2 label { text-transform: none; letter-spacing: 0; font-weight: 400; margin-left: auto; }
  table { width: 100%; border-collapse: collapse; }
  th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid #f0f1f4; white-space: nowrap; }
  th { font-weight: 600; color: #5b6270; font-size: 12px; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; }
  .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12px; }
  .state { display: inline-block; padding: 1px 8px; border-radius: 10px; background: #eef2ff; color: #3443b8; font-weight: 600; }
  .state.final { background: #f0f0f2; color: #3f4450; }
  .muted { color: #8a8f98; }
  .empty { padding: 14px; color: #8a8f98; }
  ol { list-style: none; margin: 0; padding: 0; }
  li { padding: 3px 12px; border-bottom: 1px solid #f3f4f6; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
</style>
</head>
<body>
<header>
  <h1>exarch · live inspector</h1>
  <span><span id="ws-dot" class="dot"></span><span id="ws-status">connecting…</span></span>
  <span id="counts" class="muted"></span>
  <span class="spacer"></span>
  <button id="show-stately" aria-pressed="true">Stately inspector</button>
  <button id="show-local" aria-pressed="false">Local view</button>
</header>
<div id="notice"></div>
<main>
  <iframe id="stately" title="Stately inspector"></iframe>
  <div id="local">
    <section>
      <h2>Sessions <label><input type="checkbox" id="all-actors"> all actors</label></h2>
      <table><thead><tr><th>agent</th><th>state</th><th>status</th><th class="num">steps</th><th class="num">tokens in / out</th><th>last event</th></tr></thead><tbody id="rows"></tbody></table>
      <div id="no-sessions" class="empty">No session yet.</div>
    </section>
    <section>
      <h2>Events</h2>
      <ol id="events" class="mono"></ol>
    </section>
  </div>
</main>
<script>
(() => {
  const INSPECTOR_URL = ${inspectorUrl};
  const inspectorOrigin = new URL(INSPECTOR_URL).origin;
  const frame = document.getElementById('stately');
  const $ = (id) => document.getElementById(id);
  let statelyConnected = false;
  const pending = [];

  // --- the hosted Stately inspector, fed with postMessage ---
  window.addEventListener('message', (e) => {
    if (e.source === frame.contentWindow && e.data && e.data.type === '@statelyai.connected') {
      statelyConnected = true;
      $('notice').style.display = 'none';
      for (const m of pending.splice(0)) frame.contentWindow.postMessage(m, inspectorOrigin);
    }
  });
  function toStately(message) {
    if (statelyConnected) frame.contentWindow.postMessage(message, inspectorOrigin);
    else { pending.push(message); if (pending.length > 5000) pending.shift(); }
  }
  frame.src = INSPECTOR_URL;
  setTimeout(() => {
    if (statelyConnected) return;
    const notice = $('notice');
    notice.textContent = 'The Stately inspector (' + INSPECTOR_URL + ') has not answered: it needs internet. Showing the local view; events keep flowing to both.';
    notice.style.display = 'block';
    show('local');
  }, 8000);

  function show(which) {
    const local = which === 'local';
    $('local').style.display = local ? 'grid' : 'none';
    frame.style.visibility = local ? 'hidden' : 'visible';
    $('show-local').setAttribute('aria-pressed', String(local));
    $('show-stately').setAttribute('aria-pressed', String(!local));
  }
  $('show-local').onclick = () => show('local');
  $('show-stately').onclick = () => show('stately');
  $('all-actors').onchange = () => schedule();

  // --- the local view ---
  const actors = new Map();
  const events = [];
  let total = 0;
  const actor = (id) => { let a = actors.get(id); if (!a) { a = { id, name: id, parentId: undefined, snapshot: {}, lastEvent: '' }; actors.set(id, a); } return a; };
  const agentOf = (a) => a.snapshot && a.snapshot.context && a.snapshot.context.agent;
  function apply(m) {
    if (!m || typeof m.type !== 'string' || typeof m.sessionId !== 'string') return;
    total++;
    const a = actor(m.sessionId);
    if (m.type === '@xstate.actor') { a.name = m.name || a.name; a.parentId = m.parentId; if (m.snapshot) a.snapshot = m.snapshot; }
    else if (m.type === '@xstate.snapshot') { a.snapshot = m.snapshot || {}; }
    else if (m.type === '@xstate.event') {
      const type = m.event && m.event.type || '?';
      a.lastEvent = type;
      const source = m.sourceId && actors.get(m.sourceId);
      events.push({ t: Number(m.createdAt) || Date.now(), to: a.name, from: source ? source.name : '', type });
      if (events.length > 300) events.shift();
    }
    schedule();
  }
  let scheduled = false;
  function schedule() { if (!scheduled) { scheduled = true; requestAnimationFrame(render); } }
  const fmt = (n) => typeof n === 'number' ? n.toLocaleString('en-US') : '';
  const value = (v) => v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v);
  function cell(row, text, cls) { const td = document.createElement('td'); td.textContent = text; if (cls) td.className = cls; row.appendChild(td); return td; }
  function render() {
    scheduled = false;
    const all = $('all-actors').checked;
    const list = [...actors.values()].filter((a) => all || agentOf(a));
    // Sessions as a tree: a child's parent is its nearest ancestor that is a session.
    const sessionParent = (a) => { let p = actors.get(a.parentId); while (p && !agentOf(p)) p = actors.get(p.parentId); return p; };
    const children = new Map();
    for (const a of list) { const p = all ? actors.get(a.parentId) : sessionParent(a); const key = p && list.includes(p) ? p.id : ''; if (!children.has(key)) children.set(key, []); children.get(key).push(a); }
    const rows = $('rows');
    rows.textContent = '';
    const walk = (key, depth) => {
      for (const a of children.get(key) || []) {
        const tr = document.createElement('tr');
        const agent = agentOf(a);
        const ctx = a.snapshot.context || {};
        cell(tr, (depth ? '\\u00a0\\u00a0'.repeat(depth) + '\\u2514 ' : '') + (agent ? agent.id : a.name), 'mono');
        const st = cell(tr, '');
        const span = document.createElement('span');
        span.className = 'state' + (a.snapshot.status && a.snapshot.status !== 'active' ? ' final' : '');
        span.textContent = value(a.snapshot.value) || '\\u2014';
        st.appendChild(span);
        cell(tr, a.snapshot.status || '', 'muted');
        cell(tr, ctx.steps === undefined ? '' : ctx.steps + (ctx.maxSteps ? ' / ' + ctx.maxSteps : ''), 'num');
        cell(tr, ctx.usage ? fmt(ctx.usage.inputTokens) + ' / ' + fmt(ctx.usage.outputTokens) : '', 'num');
        cell(tr, a.lastEvent, 'mono muted');
        rows.appendChild(tr);
        walk(a.id, depth + 1);
      }
    };
    walk('', 0);
    $('no-sessions').style.display = rows.children.length ? 'none' : 'block';
    const ol = $('events');
    ol.textContent = '';
    for (const e of events.slice(-150).reverse()) {
      const li = document.createElement('li');
      li.textContent = new Date(e.t).toLocaleTimeString() + '  ' + e.to + ' \\u2190 ' + e.type + (e.from ? '  (from ' + e.from + ')' : '');
      ol.appendChild(li);
    }
    $('counts').textContent = actors.size + ' actors · ' + total + ' messages';
  }

  // --- the event stream ---
  let delay = 500;
  function connect() {
    const ws = new WebSocket((location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + '/');
    ws.onopen = () => { delay = 500; $('ws-dot').className = 'dot on'; $('ws-status').textContent = 'live'; };
    ws.onmessage = (e) => {
      let m;
      try { m = JSON.parse(e.data); } catch { return; }
      toStately(m);
      apply(m);
    };
    ws.onclose = () => {
      $('ws-dot').className = 'dot';
      $('ws-status').textContent = 'run ended (reconnecting…)';
      setTimeout(connect, delay);
      delay = Math.min(delay * 2, 5000);
    };
  }
  connect();
  render();
})();
</script>
</body>
</html>
`;
}
