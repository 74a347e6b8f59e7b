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

function tickLabel(t: number, step: number): string {
  if (step < 1000) return `${step < 1 ? t.toFixed(2) : step < 10 ? t.toFixed(1) : String(Math.round(t))} ms`;
  if (step < 60000) return `${(t / 1000).toFixed(step % 1000 === 0 ? 0 : 1)} s`;
  const m = Math.floor(t / 60000);
  const s = Math.round((t - m * 60000) / 1000);
  return `${m}:${s < 10 ? '0' : ''}${s}`;
}
