/** What is picked (selected): a state bar, a spawn or delivery arrow, an event marker, or an agent (its lane or tree row). */
type Picked =
  | { readonly kind: 'bar'; readonly agent: string; readonly bar: number }
  | { readonly kind: 'arrow'; readonly rec: number }
  | { readonly kind: 'event'; readonly agent: string; readonly rec: number }
  | { readonly kind: 'agent'; readonly agent: string };

/**
 * States that last a moment but matter (a reminder, a wait for a person): each gets a marker of a
 * fixed size at its start, so it shows at any zoom even when its bar is far narrower than a pixel.
 */
const POINT_STATES: Readonly<Record<string, string>> = { nudged: 'nudge', awaitingApproval: 'approval' };

const FINAL_W = 9;

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
