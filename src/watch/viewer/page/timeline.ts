/** What is picked (selected): a state bar, a spawn or delivery arrow, an event marker, or an agent (its lane or tree row). */
type Picked =
  | { readonly kind: 'bar'; readonly agent: string; readonly bar: number }
  | { readonly kind: 'arrow'; readonly rec: number }
  | { readonly kind: 'event'; readonly agent: string; readonly rec: number }
  | { readonly kind: 'agent'; readonly agent: string };

/** The page's colours, from the embedded data (src/watch/viewer/colors.ts). */
class Palette {
  constructor(private readonly data: PageData) {}

  state(state: string): string {
    return Object.hasOwn(this.data.colors, state) ? (this.data.colors[state] as string) : this.data.unknownColor;
  }

  outcome(outcome: string | undefined): string {
    return outcome !== undefined && Object.hasOwn(this.data.outcomeColors, outcome) ? (this.data.outcomeColors[outcome] as string) : this.data.unknownColor;
  }

  light(state: string): boolean {
    return this.data.lightStates.includes(state);
  }

  meaning(state: string): string {
    return this.data.meanings[state] ?? state;
  }

  event(type: string): string {
    if (type === 'cancel' || type === 'model.error') return '#dc2626';
    if (type === 'user.message') return '#0d9488';
    return '#475569';
  }
}

/**
 * States that last a moment but matter (a reminder, a wait for a person): each gets a marker of a
 * fixed size at its start, so it shows at any zoom even when its bar is far narrower than a pixel.
 */
const POINT_STATES: Readonly<Record<string, string>> = { nudged: 'nudge', awaitingApproval: 'approval' };

const FINAL_W = 9;

/** What the timeline tells the rest of the page. */
interface TimelineEvents {
  select(selection: Picked, t: number): void;
  /** The visible window changed (the axis label shows it). */
  viewChanged(): void;
}

/**
 * The timeline's window of time: what part of the run is in view, its axis and time cursor, and the
 * zoom and pan that move it (buttons, wheel, dragging the axis). `Timeline` draws the lanes in it.
 */
abstract class TimelineWindow {
  protected readonly lanesWrap = byId('lanes-wrap');
  private readonly axisSvg = byId('axis') as unknown as SVGSVGElement;
  private readonly cursorEl = byId('cursor');
  private readonly rangeEl = byId('range');
  protected view = { t0: 0, t1: 1 };
  protected drawn = { t0: 0, t1: 1 };
  protected width = 0;
  /** Follows the whole run (and a live one as it grows) until the user zooms or pans. */
  private follow = true;
  private pending = false;
  private settleTimer = 0;
  private drag: { x: number; t0: number; t1: number } | null = null;
  cursorT: number | null = null;

  constructor(
    protected readonly run: RunData,
    protected readonly events: TimelineEvents,
  ) {
    const model = run.model;
    this.view = { t0: model.t0, t1: model.t0 + this.fullSpan() };
    this.drawn = { ...this.view };
  }

  /** Draws what is in view. */
  abstract render(): void;

  /** The model grew (a live run): the window follows the run's end unless the user moved it. */
  grew(): void {
    if (this.follow) {
      const model = this.run.model;
      this.view = { t0: model.t0, t1: model.t0 + this.fullSpan() };
    }
  }

  protected fullSpan(): number {
    const model = this.run.model;
    return Math.max(model.t1 - model.t0, 1);
  }

  protected x(t: number): number {
    return ((t - this.view.t0) / (this.view.t1 - this.view.t0)) * this.width;
  }

  protected t(x: number): number {
    return this.view.t0 + (x / this.width) * (this.view.t1 - this.view.t0);
  }

  protected clampX(x: number): number {
    return x < -20 ? -20 : Math.min(x, this.width + 20);
  }

  // ---- time axis ---------------------------------------------------------------------------
  protected ticks(): { step: number; list: number[] } {
    const span = this.view.t1 - this.view.t0;
    const raw = span / Math.max(1, this.width / 110);
    const p10 = 10 ** Math.floor(Math.log10(raw));
    const m = raw / p10;
    const step = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p10;
    const list: number[] = [];
    for (let i = Math.ceil(this.view.t0 / step); i * step <= this.view.t1 && list.length < 200; i++) list.push(i * step);
    return { step, list };
  }

  protected renderAxis(): void {
    const { step, list } = this.ticks();
    const p: string[] = [];
    for (const t of list) {
      const x = r1(this.x(t));
      p.push(`<line x1="${x}" x2="${x}" y1="19" y2="28"/>`, `<text x="${x + 4}" y="17">${tickLabel(t, step)}</text>`);
    }
    const c = this.cursorT;
    if (c !== null && c >= this.view.t0 && c <= this.view.t1) {
      const cx = this.x(c);
      const label = fmtT(c);
      const lw = label.length * 6.4 + 12;
      const lx = Math.min(Math.max(cx - lw / 2, 0), this.width - lw);
      p.push(`<g class="cursor-label"><rect x="${r1(lx)}" y="3" width="${r1(lw)}" height="19" rx="4"/><text x="${r1(lx + 6)}" y="17">${label}</text></g>`);
    }
    this.axisSvg.setAttribute('width', String(this.width));
    this.axisSvg.setAttribute('height', '28');
    this.axisSvg.innerHTML = p.join('');
    this.rangeEl.textContent = `${fmtT(this.view.t0)} – ${fmtT(this.view.t1)}`;
  }

  /** Draws on the next frame (once, however many ask). */
  schedule(): void {
    clearTimeout(this.settleTimer);
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => {
      this.pending = false;
      this.render();
    });
  }

  /**
   * While the wheel turns, stretch what is drawn to the new window at once (one transform) and
   * draw it properly once the wheel rests.
   */
  private preview(): void {
    const content = document.getElementById('content');
    if (content) {
      const span = this.view.t1 - this.view.t0;
      const k = (this.drawn.t1 - this.drawn.t0) / span;
      const dx = ((this.drawn.t0 - this.view.t0) / span) * this.width;
      content.setAttribute('transform', `translate(${r1(dx)},0) scale(${k},1)`);
    }
    this.renderAxis();
    this.placeCursor();
    clearTimeout(this.settleTimer);
    this.settleTimer = window.setTimeout(() => this.schedule(), 140);
  }

  protected placeCursor(): void {
    const c = this.cursorT;
    if (c === null || c < this.view.t0 || c > this.view.t1) {
      this.cursorEl.style.display = 'none';
      return;
    }
    this.cursorEl.style.display = 'block';
    this.cursorEl.style.left = `${r1(this.x(c))}px`;
  }

  // ---- zoom and pan ------------------------------------------------------------------------
  setView(t0: number, t1: number, smooth = false): void {
    const model = this.run.model;
    const fullSpan = this.fullSpan();
    const min = Math.max(fullSpan / 1e6, 0.001);
    const span = Math.min(Math.max(t1 - t0, min), fullSpan);
    let start = Math.max(t0, model.t0);
    if (start + span > model.t0 + fullSpan) start = model.t0 + fullSpan - span;
    this.view = { t0: start, t1: start + span };
    this.follow = span >= fullSpan;
    if (smooth) this.preview();
    else this.schedule();
    this.events.viewChanged();
  }

  fit(): void {
    const model = this.run.model;
    this.setView(model.t0, model.t0 + this.fullSpan());
  }

  private zoomAt(factor: number, t: number, smooth = false): void {
    const frac = (t - this.view.t0) / (this.view.t1 - this.view.t0);
    const span = (this.view.t1 - this.view.t0) * factor;
    this.setView(t - frac * span, t - frac * span + span, smooth);
  }

  private centre(): number {
    const c = this.cursorT;
    return c !== null && c >= this.view.t0 && c <= this.view.t1 ? c : (this.view.t0 + this.view.t1) / 2;
  }

  /** Zooms and pans on the buttons, the wheel (over the lanes or the axis) and a drag of the axis. */
  protected listenWindow(): void {
    const { lanesWrap } = this;
    byId('zoom-in').addEventListener('click', () => this.zoomAt(0.5, this.centre()));
    byId('zoom-out').addEventListener('click', () => this.zoomAt(2, this.centre()));
    byId('zoom-fit').addEventListener('click', () => this.fit());
    const onWheel = (e: WheelEvent): void => {
      if (e.ctrlKey || e.metaKey) {
        e.preventDefault();
        this.zoomAt(Math.exp(e.deltaY * 0.0025), this.t(e.clientX - lanesWrap.getBoundingClientRect().left), true);
      } else if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) {
        e.preventDefault();
        const d = ((e.deltaX || e.deltaY) / this.width) * (this.view.t1 - this.view.t0);
        this.setView(this.view.t0 + d, this.view.t1 + d, true);
      }
    };
    lanesWrap.addEventListener('wheel', onWheel, { passive: false });
    const axisWrap = byId('axis-wrap');
    axisWrap.addEventListener('wheel', onWheel, { passive: false });
    axisWrap.addEventListener('mousedown', (e) => {
      this.drag = { x: e.clientX, t0: this.view.t0, t1: this.view.t1 };
      e.preventDefault();
    });
    window.addEventListener('mousemove', (e) => {
      const drag = this.drag;
      if (!drag) return;
      const d = ((drag.x - e.clientX) / this.width) * (drag.t1 - drag.t0);
      this.setView(drag.t0 + d, drag.t1 + d, true);
    });
    window.addEventListener('mouseup', () => {
      this.drag = null;
    });
    window.addEventListener('resize', () => this.schedule());
  }
}

/**
 * The swimlanes: one SVG of plain rects, lines and paths, one lane per shown agent, built as one
 * string per render and culled to the visible time window (`TimelineWindow`: its axis, zoom and
 * pan), with tooltips and the selection's marks. While a live run grows it follows the end unless
 * the user has zoomed or panned away.
 */
class Timeline extends TimelineWindow {
  private readonly lanesSvg = byId('lanes') as unknown as SVGSVGElement;
  private readonly tip = byId('tip');
  private readonly row: number;
  private readonly mid: number;
  private lastMs = 0;
  private markerColors: Record<string, string> = {};
  /** The lanes shown (indices into the model's agents), in order, and the row of each. */
  private rows: number[] = [];
  private rowOf = new Map<number, number>();
  /** Bars that hold a search hit, by lane. */
  private hits: ReadonlyMap<number, ReadonlySet<number>> | null = null;
  selection: Picked | null = null;

  constructor(
    run: RunData,
    private readonly palette: Palette,
    events: TimelineEvents,
  ) {
    super(run, events);
    this.row = parseFloat(getComputedStyle(document.documentElement).getPropertyValue('--row')) || 24;
    this.mid = this.row / 2;
    this.showAll();
    this.listen();
    this.listenWindow();
  }

  get lastRenderMs(): number {
    return this.lastMs;
  }

  /** Shows every lane. */
  showAll(): void {
    this.setRows(
      this.run.model.agents.map((_, lane) => lane),
      null,
    );
  }

  /** Shows these lanes only, marking the bars that hold a search hit. */
  setRows(rows: number[], hits: ReadonlyMap<number, ReadonlySet<number>> | null): void {
    this.rows = rows;
    this.rowOf = new Map(rows.map((lane, row) => [lane, row]));
    this.hits = hits;
  }

  // ---- lanes -------------------------------------------------------------------------------
  private marker(color: string): string {
    const id = `ah${color.replace('#', '')}`;
    this.markerColors[id] = color;
    return `url(#${id})`;
  }

  render(): void {
    const started = performance.now();
    const model = this.run.model;
    const { agents, arrows } = model;
    const { row: ROW, mid: MID, palette } = this;
    const W = (this.width = Math.max(200, this.lanesWrap.clientWidth));
    const H = Math.max(this.rows.length * ROW, ROW);
    const v0 = this.view.t0;
    const v1 = this.view.t1;
    const p: string[] = [];
    this.markerColors = {};
    for (const t of this.ticks().list) {
      const gx = r1(this.x(t));
      p.push(`<line class="grid" x1="${gx}" x2="${gx}" y1="0" y2="${H}" stroke="#eef2f7"/>`);
    }
    const selLane = this.selectedLane();
    const points: string[] = [];
    this.rows.forEach((lane, rowIndex) => {
      const a = agents[lane];
      if (!a) return;
      const hits = this.hits?.get(lane);
      p.push(`<g class="lane${lane === selLane ? ' sel-lane' : ''}" data-agent="${esc(a.id)}" data-lane="${lane}" transform="translate(0,${rowIndex * ROW})">`);
      p.push(`<rect class="lane-bg" width="${W}" height="${ROW}"/>`);
      if (a.end >= v0 && a.start <= v1) {
        p.push(`<line class="life" x1="${r1(this.clampX(this.x(a.start)))}" x2="${r1(this.clampX(this.x(a.end)))}" y1="${MID}" y2="${MID}"/>`);
      }
      // Bars narrower than a pixel that the last drawn rect already covers are not drawn.
      let coveredTo = -Infinity;
      a.bars.forEach((b, j) => {
        if (b.t1 < v0 || b.t0 > v1) return;
        const x0 = this.x(b.t0);
        const hit = hits?.has(j) ? ' hit' : '';
        const point = POINT_STATES[b.state];
        if (point !== undefined) {
          const px = r1(x0);
          points.push(
            `<path class="point${hit}" data-kind="${point}" data-b="${j}" d="M${px},${MID - 8} L${r1(px + 6)},${MID} L${px},${MID + 8} L${r1(px - 6)},${MID} Z" fill="${palette.state(b.state)}"/>`,
          );
        }
        if (b.final) {
          p.push(`<rect class="bar final${hit}" data-state="${esc(b.state)}" data-b="${j}" x="${r1(x0)}" y="2" width="${FINAL_W}" height="20"/>`);
          return;
        }
        const cx0 = this.clampX(x0);
        const cx1 = this.clampX(this.x(b.t1));
        if (cx1 <= coveredTo && !hit) return;
        let w = cx1 - cx0;
        if (w > 3) w -= 1;
        if (w < 1) w = 1;
        coveredTo = cx0 + w;
        p.push(`<rect class="bar${hit}" data-state="${esc(b.state)}" data-b="${j}" x="${r1(cx0)}" y="4" width="${r1(w)}" height="16"/>`);
        if (w > 64) {
          const visible0 = Math.max(cx0, 0);
          const visibleW = Math.min(cx0 + w, W) - visible0;
          const room = Math.floor((visibleW - 10) / 6.2);
          let label = b.state === 'streaming' ? `streaming · step ${b.requests}` : b.state;
          if (label.length > room && b.state === 'streaming') label = `step ${b.requests}`;
          if (room >= 6) {
            if (label.length > room) label = `${label.slice(0, room - 1)}…`;
            p.push(`<text class="blabel" x="${r1(visible0 + 5)}" y="16" fill="${palette.light(b.state) ? '#334155' : '#ffffff'}">${esc(label)}</text>`);
          }
        }
      });
      if ((a.status === 'stopped' || a.status === 'error') && a.end >= v0 && a.end <= v1) {
        const ex = r1(this.x(a.end));
        p.push(`<line class="endcap" x1="${ex}" x2="${ex}" y1="4" y2="20"/>`);
      }
      for (const rec of a.events) {
        const r = this.run.records[rec];
        if (r?.kind !== 'event' || r.t < v0 || r.t > v1) continue;
        const evx = r1(this.x(r.t));
        p.push(`<path class="ev" data-kind="event" data-rec="${rec}" d="M${evx - 5},0 L${evx + 5},0 L${evx},8 Z" fill="${palette.event(r.type)}"/>`);
      }
      // Point markers above the bars, so a bar drawn later never hides one.
      p.push(...points.splice(0));
      p.push('</g>');
    });
    arrows.forEach((ar, k) => {
      if (ar.t < v0 || ar.t > v1) return;
      const fromRow = this.rowOf.get(ar.from);
      const toRow = this.rowOf.get(ar.to);
      if (fromRow === undefined || toRow === undefined) return;
      const x = r1(this.x(ar.t));
      const down = toRow > fromRow;
      const y1 = fromRow * ROW + (down ? 19 : 5);
      const y2 = toRow * ROW + (down ? 3 : 21);
      const col = ar.kind === 'spawn' ? '#64748b' : palette.outcome(ar.outcome);
      const parent = agents[ar.kind === 'spawn' ? ar.from : ar.to];
      const child = agents[ar.kind === 'spawn' ? ar.to : ar.from];
      p.push(
        `<g class="arrow ${ar.kind}" data-kind="${ar.kind}" data-a="${k}" data-rec="${ar.rec}" data-parent="${esc(parent?.id ?? '')}" data-child="${esc(child?.id ?? '')}">` +
          `<line class="hit" x1="${x}" x2="${x}" y1="${y1}" y2="${y2}"/>` +
          `<line class="vis" x1="${x}" x2="${x}" y1="${y1}" y2="${down ? y2 - 1 : y2 + 1}" stroke="${col}" marker-end="${this.marker(col)}"/>` +
          `<circle class="dot" cx="${x}" cy="${y1}" r="3" fill="${col}"/></g>`,
      );
    });
    const defs = ['<defs>'];
    for (const [id, color] of Object.entries(this.markerColors)) {
      defs.push(
        `<marker id="${id}" viewBox="0 0 10 10" refX="9" refY="5" markerUnits="userSpaceOnUse" markerWidth="9" markerHeight="9" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="${color}"/></marker>`,
      );
    }
    defs.push('</defs>');
    this.lanesSvg.setAttribute('width', String(W));
    this.lanesSvg.setAttribute('height', String(H));
    this.lanesSvg.innerHTML = `${defs.join('')}<g id="content">${p.join('')}</g>`;
    this.drawn = { ...this.view };
    this.renderAxis();
    this.markSelection();
    this.placeCursor();
    this.lastMs = performance.now() - started;
  }

  // ---- selection ---------------------------------------------------------------------------
  /** The lane of the selected agent, or -1. */
  selectedLane(): number {
    const s = this.selection;
    if (!s) return -1;
    const agents = this.run.model.agents;
    if (s.kind === 'arrow') {
      const arrow = this.arrowOf(s.rec);
      return arrow ? (arrow.kind === 'spawn' ? arrow.from : arrow.to) : -1;
    }
    return agents.findIndex((a) => a.id === s.agent);
  }

  arrowOf(rec: number): ViewerArrow | undefined {
    return this.run.model.arrows.find((a) => a.rec === rec);
  }

  private selectedElement(): Element | null {
    const s = this.selection;
    if (!s) return null;
    if (s.kind === 'bar') return this.lanesSvg.querySelector(`.lane[data-lane="${this.selectedLane()}"] [data-b="${s.bar}"]:not(.point)`);
    if (s.kind === 'arrow') return this.lanesSvg.querySelector(`.arrow[data-rec="${s.rec}"]`);
    if (s.kind === 'event') return this.lanesSvg.querySelector(`.ev[data-rec="${s.rec}"]`);
    return null;
  }

  markSelection(): void {
    for (const old of Array.from(this.lanesSvg.querySelectorAll('.sel, .sel-lane'))) old.classList.remove('sel', 'sel-lane');
    this.selectedElement()?.classList.add('sel');
    const lane = this.selectedLane();
    if (lane >= 0) this.lanesSvg.querySelector(`.lane[data-lane="${lane}"]`)?.classList.add('sel-lane');
  }

  /** Marks `selection`, with the time cursor at `t`. */
  select(selection: Picked, t: number): void {
    this.selection = selection;
    this.cursorT = t;
    this.markSelection();
    this.placeCursor();
    this.renderAxis();
  }

  // ---- input -------------------------------------------------------------------------------
  private laneOf(node: Element): number {
    const g = node.closest('.lane');
    return g ? Number(g.getAttribute('data-lane')) : -1;
  }

  private localX(e: MouseEvent): number {
    return e.clientX - this.lanesSvg.getBoundingClientRect().left;
  }

  private listen(): void {
    const { lanesSvg, tip } = this;
    lanesSvg.addEventListener('click', (e) => {
      const target = e.target;
      if (!(target instanceof Element)) return;
      const agents = this.run.model.agents;
      const arrowEl = target.closest('.arrow');
      if (arrowEl) {
        const rec = Number(arrowEl.getAttribute('data-rec'));
        const arrow = this.arrowOf(rec);
        if (arrow) this.events.select({ kind: 'arrow', rec }, arrow.t);
        return;
      }
      const lane = this.laneOf(target);
      const agent = agents[lane];
      if (!agent) return;
      const evEl = target.closest('.ev');
      if (evEl) {
        const rec = Number(evEl.getAttribute('data-rec'));
        this.events.select({ kind: 'event', agent: agent.id, rec }, this.run.records[rec]?.t ?? 0);
        return;
      }
      const t = this.t(this.localX(e));
      const barEl = target.closest('[data-b]');
      if (barEl) {
        const j = Number(barEl.getAttribute('data-b'));
        const b = agent.bars[j];
        if (b)
          this.events.select({ kind: 'bar', agent: agent.id, bar: j }, b.final || barEl.classList.contains('point') ? b.t0 : Math.min(Math.max(t, b.t0), b.t1));
        return;
      }
      this.events.select({ kind: 'agent', agent: agent.id }, t);
    });
    lanesSvg.addEventListener('dblclick', (e) => {
      const target = e.target;
      if (!(target instanceof Element)) return;
      const barEl = target.closest('[data-b]');
      const b = this.run.model.agents[this.laneOf(target)]?.bars[Number(barEl?.getAttribute('data-b'))];
      if (!barEl || !b) return;
      const pad = Math.max((b.t1 - b.t0) * 0.15, this.fullSpan() / 1e5);
      this.setView(b.t0 - pad, b.t1 + pad);
    });
    lanesSvg.addEventListener('mousemove', (e) => {
      const text = this.tipFor(e.target);
      if (!text) {
        tip.style.display = 'none';
        return;
      }
      tip.textContent = text;
      tip.style.display = 'block';
      let x = e.clientX + 14;
      let y = e.clientY + 14;
      if (x + tip.offsetWidth > window.innerWidth - 8) x = e.clientX - tip.offsetWidth - 10;
      if (y + tip.offsetHeight > window.innerHeight - 8) y = e.clientY - tip.offsetHeight - 10;
      tip.style.left = `${x}px`;
      tip.style.top = `${y}px`;
    });
    lanesSvg.addEventListener('mouseleave', () => {
      tip.style.display = 'none';
    });
  }

  private tipFor(target: EventTarget | null): string {
    if (!(target instanceof Element)) return '';
    const { agents } = this.run.model;
    const arrowEl = target.closest('.arrow');
    if (arrowEl) {
      const ar = this.arrowOf(Number(arrowEl.getAttribute('data-rec')));
      if (!ar) return '';
      return ar.kind === 'spawn'
        ? `spawn: ${agents[ar.from]?.id} → ${agents[ar.to]?.name}\nat ${fmtT(ar.t)}`
        : `delivery: ${agents[ar.from]?.name} → ${agents[ar.to]?.id}\n${ar.tag}\nat ${fmtT(ar.t)}`;
    }
    const evEl = target.closest('.ev');
    if (evEl) {
      const r = this.run.records[Number(evEl.getAttribute('data-rec'))];
      return r?.kind === 'event' ? `${r.type}${r.detail ? `: ${r.detail}` : ''}\nat ${fmtT(r.t)}` : '';
    }
    const barEl = target.closest('[data-b]');
    const a = agents[this.laneOf(target)];
    const b = a?.bars[Number(barEl?.getAttribute('data-b'))];
    if (!barEl || !a || !b) return '';
    const cost = b.cost === undefined ? '' : ` · ${fmtCost(b.cost)}`;
    const point = barEl.classList.contains('point') ? `${this.palette.meaning(b.state)}\n` : '';
    return `${a.id}\n${point}${b.state} · step ${b.requests}${cost}\n${fmtT(b.t0)} → ${fmtT(b.t1)} (${fmtT(b.t1 - b.t0)})`;
  }
}

function byId(id: string): HTMLElement {
  const el = document.getElementById(id);
  if (!el) throw new Error(`the page has no #${id}`);
  return el;
}

function r1(n: number): number {
  return Math.round(n * 10) / 10;
}

function tickLabel(t: number, step: number): string {
  if (step < 1000) return `${step < 1 ? t.toFixed(2) : step < 10 ? t.toFixed(1) : String(Math.round(t))} ms`;
  if (step < 60000) return `${(t / 1000).toFixed(step % 1000 === 0 ? 0 : 1)} s`;
  const m = Math.floor(t / 60000);
  const s = Math.round((t - m * 60000) / 1000);
  return `${m}:${s < 10 ? '0' : ''}${s}`;
}
