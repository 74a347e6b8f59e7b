/**
 * The page: reads the embedded records, builds the model, draws the tree, the lanes and the
 * statechart, and wires selection, the filter box and, on a live page, the stream of the rest of
 * the run. Everything after the first draw is redrawn at most once a frame.
 */
function startViewer(): void {
  const scriptStart = performance.now();
  const data = JSON.parse(byId('exarch-trace').textContent ?? '{}') as PageData;
  const run = new RunData(data.title);
  for (const record of data.records) run.add(record);
  if (data.live) {
    // A run still going: what is open lasts until now (the trace's clock is this machine's).
    const first = run.records[0];
    const startedAt = first?.kind === 'trace.start' ? Date.parse(first.startedAt) : NaN;
    run.following(Number.isFinite(startedAt) ? startedAt : null);
  }
  const parsedAt = performance.now();

  const palette = new Palette(data);
  const tree = new Tree(run, palette);
  let query = '';
  let filtered = false;
  let rows: number[] = [];

  const select = (selection: Picked, t: number): void => {
    timeline.select(selection, t);
    details.show(selection, t);
    markRow();
  };
  const timeline = new Timeline(run, palette, { select, viewChanged: () => undefined });
  const details = new Details(run, palette, select);

  const markRow = (): void => {
    const lane = timeline.selectedLane();
    for (const row of Array.from(document.querySelectorAll('#tree .row.sel'))) row.classList.remove('sel');
    document.querySelector(`#tree .row[data-lane="${lane}"]`)?.classList.add('sel');
  };

  /** The shown lanes, from the filter; then the tree and the lanes. */
  const layOut = (): void => {
    const { agents } = run.model;
    if (query.trim() === '') {
      filtered = false;
      rows = agents.map((_, lane) => lane);
      timeline.setRows(rows, null);
    } else {
      const found = search(run, query);
      filtered = true;
      rows = found.rows;
      timeline.setRows(rows, found.hits);
    }
    tree.render(rows, timeline.selectedLane(), filtered);
    timeline.render();
  };

  byId('tree').addEventListener('click', (e) => {
    const row = e.target instanceof Element ? e.target.closest('[data-lane]') : null;
    const agent = run.model.agents[Number(row?.getAttribute('data-lane'))];
    if (!agent) return;
    const c = timeline.cursorT;
    select({ kind: 'agent', agent: agent.id }, c !== null && c >= agent.start && c <= agent.end ? c : agent.end);
  });

  const box = byId('search') as HTMLInputElement;
  let searchTimer = 0;
  box.addEventListener('input', () => {
    clearTimeout(searchTimer);
    searchTimer = window.setTimeout(() => {
      query = box.value;
      layOut();
    }, 120);
  });

  details.intro();
  layOut();
  const renderedAt = performance.now();

  let liveStatus: string | null = data.live ? 'connecting' : null;
  window.exarchViewer = {
    parseMs: parsedAt - scriptStart,
    renderMs: renderedAt - parsedAt,
    readyAt: renderedAt,
    lastRenderMs: () => timeline.lastRenderMs,
    get agents() {
      return run.model.agents.length;
    },
    get records() {
      return run.records.length;
    },
    get live() {
      return liveStatus;
    },
  };

  if (data.live) {
    const badge = byId('live');
    let frame = false;
    let drawnAt = 0;
    let hadAgents = run.model.agents.length > 0;
    // Bars of what still runs grow with the clock, redrawn each second between records.
    const ticker = window.setInterval(() => schedule(), 1000);
    const schedule = (): void => {
      if (frame) return;
      frame = true;
      // At most ten draws a second, and never more than a fifth of the time: a big run draws slowly.
      const wait = Math.max(0, drawnAt + Math.max(100, 5 * timeline.lastRenderMs) - performance.now());
      window.setTimeout(() => requestAnimationFrame(redraw), wait);
    };
    const redraw = (): void => {
      frame = false;
      drawnAt = performance.now();
      run.refresh();
      timeline.grew();
      if (!hadAgents && run.model.agents.length > 0) {
        hadAgents = true;
        details.intro();
      }
      layOut();
      document.body.setAttribute('data-records', String(run.records.length));
    };
    const setStatus = (status: 'open' | 'ended' | 'retrying'): void => {
      liveStatus = status;
      badge.textContent = status === 'ended' ? 'run ended' : status === 'open' ? 'live' : 'reconnecting…';
      badge.className = `live ${status}`;
      if (status === 'ended') {
        // The run is over: it ends at its last record, as the page of its trace does. The last
        // records may have come in this very task: draw them before saying so.
        window.clearInterval(ticker);
        run.following(null);
        redraw();
        document.body.setAttribute('data-live', 'ended');
      } else document.body.setAttribute('data-live', status);
    };
    followLive(
      data.live.events,
      run.records.length,
      (record) => {
        run.add(record);
        schedule();
      },
      setStatus,
    );
    document.body.setAttribute('data-live', 'connecting');
    document.body.setAttribute('data-records', String(run.records.length));
  }
  document.body.setAttribute('data-ready', 'true');
}

startViewer();
