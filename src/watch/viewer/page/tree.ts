/**
 * The agent tree beside the lanes (one row per shown lane: name, state or outcome, requests,
 * tokens, cost) and the header's run summary, redrawn from the model whenever it changes.
 */
class Tree {
  private readonly tree = byId('tree');
  private readonly corner = byId('corner');
  private readonly stats = byId('stats');

  constructor(
    private readonly run: RunData,
    private readonly palette: Palette,
  ) {}

  render(rows: readonly number[], selectedLane: number, filtered: boolean): void {
    const { agents } = this.run.model;
    this.tree.innerHTML = rows.map((lane) => this.row(agents[lane], lane, lane === selectedLane)).join('');
    this.fitWidth();
    const n = agents.length;
    this.corner.textContent = filtered ? `${rows.length} of ${plural(n, 'agent')}` : plural(n, 'agent');
    this.renderStats();
  }

  /**
   * The tree column as wide as its widest row wants, so that no name, state or count is cut while
   * the window has room: never under 300 px, never over 40% of the window (then the counts give
   * way first, as the stylesheet says). Set before the lanes are laid out, which take the rest.
   */
  private fitWidth(): void {
    const rows = Array.from(this.tree.children);
    const first = rows[0];
    if (!first) return;
    const style = getComputedStyle(first);
    const gap = Number.parseFloat(style.columnGap) || 0;
    const right = Number.parseFloat(style.paddingRight) || 0;
    let widest = 0;
    for (const row of rows) {
      const cells = Array.from(row.children);
      // Each cell's scrollWidth is its whole text, even where it is cut; the first starts after the row's indent.
      const start = cells[0] ? (cells[0] as HTMLElement).offsetLeft - (row as HTMLElement).offsetLeft : 0;
      let width = start + right + gap * Math.max(0, cells.length - 1);
      for (const cell of cells) width += cell.scrollWidth;
      widest = Math.max(widest, width);
    }
    // The tree's right border.
    const wanted = Math.ceil(widest) + 1;
    const width = Math.max(300, Math.min(wanted, Math.floor(window.innerWidth * 0.4)));
    document.documentElement.style.setProperty('--tree-w', `${width}px`);
  }

  private row(agent: ViewerAgent | undefined, lane: number, selected: boolean): string {
    if (!agent) return '';
    const { palette } = this;
    const label = agent.outcome ?? (agent.status === 'running' ? agent.lastState || 'running' : `${agent.lastState || agent.status} · ${agent.status}`);
    const color = agent.outcome ? palette.outcome(agent.outcome) : palette.state(agent.lastState);
    const light = !agent.outcome && palette.light(agent.lastState);
    const meta = `${agent.requests} req · ${fmtN(tokensOf(agent.usage))} tok${agent.cost === undefined ? '' : ` · ${fmtCost(agent.cost)}`}`;
    return (
      `<div class="row${selected ? ' sel' : ''}" role="treeitem" aria-level="${agent.depth + 1}" data-agent="${esc(agent.id)}" data-lane="${lane}" style="--depth:${agent.depth}" title="${esc(agent.id)}">` +
      (agent.depth > 0 ? '<span class="twig">└</span>' : '') +
      `<span class="name">${esc(agent.name)}</span>` +
      `<span class="chip${light ? ' light' : ''}" style="--c:${color}">${esc(label)}</span>` +
      `<span class="meta">${meta}</span>` +
      '</div>'
    );
  }

  private renderStats(): void {
    const model = this.run.model;
    const n = model.agents.length;
    const parts = [
      `<b>${n}</b> agent${n === 1 ? '' : 's'}`,
      `<b>${this.run.records.length.toLocaleString('en')}</b> records`,
      `<b>${fmtDuration(model.t1 - model.t0)}</b>`,
    ];
    const outcomes = Object.entries(model.outcomes).map(([outcome, count]) => `${count} ${outcome}`);
    if (outcomes.length > 0) parts.push(esc(outcomes.join(', ')));
    if (model.cost !== undefined) parts.push(`<b>${fmtCost(model.cost)}</b> at list prices`);
    if (model.startedAt) parts.push(`started ${esc(model.startedAt.replace('T', ' ').replace(/\.\d+Z$/, 'Z'))}`);
    this.stats.innerHTML = parts.join(' · ');
  }
}
