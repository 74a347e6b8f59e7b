/**
 * The details panel (what a selection holds: the messages of a state, the text a delivery carried,
 * a spawn's task, an agent's summary) and the statechart beside it (where the agent was, and the
 * way it came in). Built only when something is selected.
 */
class Details {
  private readonly panel = byId('details');
  private readonly caption = byId('chart-caption');
  private readonly outgoing = byId('outgoing');
  private readonly chartSvg = document.querySelector('#chart-panel svg');

  constructor(
    private readonly run: RunData,
    private readonly palette: Palette,
    private readonly select: (selection: Picked, t: number) => void,
  ) {}

  /** The first view: how to read the page. */
  intro(): void {
    const panel = this.panel;
    panel.textContent = '';
    if (this.run.model.agents.length === 0) {
      panel.appendChild(h('p', 'empty', 'This trace has no agents.'));
      return;
    }
    const head = h('h2');
    head.appendChild(h('span', 'kind', 'turn flow'));
    head.appendChild(h('span', null, 'click a bar, an arrow or a marker'));
    panel.appendChild(head);
    panel.appendChild(
      h(
        'p',
        'hint',
        'Each lane is one agent; its bars are the states of its session machine over time. ' +
          'Dashed arrows are spawns, solid ones the results children delivered to their parents; diamonds mark reminders and waits for approval. ' +
          'Click a state bar for the messages committed in it, a delivery for the text the parent received, a tree row for the agent. ' +
          'Zoom with the buttons or ctrl + wheel; shift + wheel or dragging the time axis pans; double-click a bar to zoom to it; the filter box keeps the agents whose names, tools or text match.',
      ),
    );
  }

  show(selection: Picked, t: number): void {
    const { agents } = this.run.model;
    switch (selection.kind) {
      case 'bar': {
        const lane = agents.findIndex((a) => a.id === selection.agent);
        if (lane >= 0) this.showBar(lane, selection.bar);
        this.highlightChart(lane, selection.bar, t);
        return;
      }
      case 'arrow': {
        const arrow = this.run.model.arrows.find((a) => a.rec === selection.rec);
        if (!arrow) return;
        this.showArrow(arrow);
        const lane = arrow.kind === 'spawn' ? arrow.from : arrow.to;
        this.highlightChart(lane, barAt(agents[lane], t), t);
        return;
      }
      case 'event': {
        const lane = agents.findIndex((a) => a.id === selection.agent);
        this.header('event', selection.agent, null, `at ${fmtT(t)}`);
        this.panel.appendChild(this.recordItem(selection.rec));
        this.highlightChart(lane, barAt(agents[lane], t), t);
        return;
      }
      case 'agent': {
        const lane = agents.findIndex((a) => a.id === selection.agent);
        if (lane >= 0) this.showAgent(lane, t);
        this.highlightChart(lane, barAt(agents[lane], t), t);
        return;
      }
    }
  }

  // ---- statechart --------------------------------------------------------------------------
  private highlightChart(lane: number, j: number, t: number): void {
    const { chartSvg, caption, outgoing } = this;
    const a = this.run.model.agents[lane];
    if (!chartSvg || !a) return;
    for (const old of Array.from(chartSvg.querySelectorAll('.active, .taken'))) old.classList.remove('active', 'taken', 'light');
    caption.textContent = '';
    outgoing.textContent = '';
    caption.appendChild(h('b', null, a.id));
    const b = a.bars[j];
    if (!b) {
      caption.appendChild(document.createTextNode(` at ${fmtT(t)}: not started`));
      return;
    }
    const node = chartSvg.querySelector(`[data-statechart-state="${CSS.escape(b.state)}"]`);
    if (node) {
      node.classList.add('active');
      if (this.palette.light(b.state)) node.classList.add('light');
    }
    const prev = a.bars[j - 1]?.state ?? null;
    if (prev !== null) chartSvg.querySelector(`[data-from="${CSS.escape(prev)}"][data-to="${CSS.escape(b.state)}"]`)?.classList.add('taken');
    caption.appendChild(document.createTextNode(` at ${fmtT(t)}: `));
    caption.appendChild(h('b', null, b.state));
    caption.appendChild(document.createTextNode(`${prev ? ` (from ${prev})` : ''} · step ${b.requests}`));
    const chart = this.run.model.statechart;
    if (!chart) return;
    if (b.final) {
      outgoing.appendChild(h('li', null, `${b.state} is final: the session ends here and its result goes to its parent.`));
      return;
    }
    // The state's own transitions, then those from any state for events it does not handle itself.
    const own = chart.transitions.filter((tr) => tr.source === b.state);
    const handled = own.map((tr) => tr.event);
    const outs = [...own, ...chart.transitions.filter((tr) => tr.source === '*' && !handled.includes(tr.event))];
    if (outs.length === 0) return;
    const head = h('li');
    head.appendChild(h('b', null, `ways out of ${b.state}`));
    outgoing.appendChild(head);
    for (const tr of outs) {
      const li = h('li');
      li.appendChild(h('code', null, shortEvent(tr.event)));
      li.appendChild(
        document.createTextNode(
          `${tr.guard ? ` [${tr.guard}]` : ''} → ${tr.target === '*' || tr.target === tr.source ? '(stays)' : tr.target}${tr.source === '*' ? ' · from any state' : ''}`,
        ),
      );
      outgoing.appendChild(li);
    }
  }

  // ---- building blocks ---------------------------------------------------------------------
  private badge(label: string, color: string, light = false): HTMLSpanElement {
    const b = h('span', `badge${light ? ' light' : ''}`, label);
    b.style.setProperty('--c', color);
    return b;
  }

  private stateBadge(state: string): HTMLSpanElement {
    return this.badge(state, this.palette.state(state), this.palette.light(state));
  }

  private header(kind: string, title: string, badge: HTMLElement | null, sub: string): void {
    const panel = this.panel;
    panel.textContent = '';
    panel.scrollTop = 0;
    const h2 = h('h2');
    h2.appendChild(h('span', 'kind', kind));
    h2.appendChild(h('span', null, title));
    if (badge) h2.appendChild(badge);
    panel.appendChild(h2);
    if (sub) panel.appendChild(h('div', 'sub', sub));
  }

  private item(cls: string, who: string, what: string | null, t?: number): HTMLDivElement {
    const it = h('div', `item ${cls}`);
    const head = h('div', 'head');
    head.appendChild(h('span', 'who', who));
    if (what) head.appendChild(h('span', null, what));
    if (t !== undefined) head.appendChild(h('span', 't', fmtT(t)));
    it.appendChild(head);
    return it;
  }

  private block(label: HTMLElement | null, content: HTMLElement | null): HTMLDivElement {
    const b = h('div', 'block');
    if (label) b.appendChild(label);
    if (content) b.appendChild(content);
    return b;
  }

  /** A label whose odd parts are bold: `['calls ', 'list_files', '  toolu_1']`. */
  private label(parts: readonly string[]): HTMLDivElement {
    const l = h('div', 'label');
    parts.forEach((part, i) => {
      l.appendChild(i % 2 === 1 ? h('b', null, part) : document.createTextNode(part));
    });
    return l;
  }

  private json(value: unknown, limit: number): HTMLDivElement {
    return clip('pre', null, value === undefined ? '(not recorded)' : JSON.stringify(value, null, 2), limit);
  }

  /** A call's input and its result, together: what was asked and what came back. */
  private callBlock(id: string, name: string, from: 'call' | 'result'): HTMLDivElement {
    const call = this.run.call(id);
    const box = h('div', 'call');
    const head = this.label([from === 'call' ? 'calls ' : 'result of ', call?.name ?? name, `  ${id}`]);
    if (call?.result?.isError) head.appendChild(h('span', 'err', '  error'));
    box.appendChild(head);
    box.appendChild(h('div', 'sub-label', 'input'));
    box.appendChild(this.json(call?.input, 1500));
    box.appendChild(h('div', 'sub-label', 'result'));
    box.appendChild(call?.result ? clip('pre', call.result.isError ? 'error' : null, call.result.content, 2500) : h('div', 'empty', 'not back yet'));
    return box;
  }

  private messageItem(r: RecordOf<'message'>): HTMLDivElement {
    const m = r.message;
    const content = m.content;
    const tools = m.role === 'user' && content.some((b) => b.type === 'tool_result');
    const first = content[0]?.type === 'text' ? content[0].text : '';
    const inbox = m.role === 'user' && !tools && first.startsWith("[agent '");
    const cls = m.role === 'assistant' ? 'assistant' : tools ? 'tools' : inbox ? 'inbox' : 'user';
    const who = m.role === 'assistant' ? 'assistant' : tools ? 'tool results' : inbox ? 'user · inbox turn' : 'user';
    const it = this.item(cls, who, `message #${r.index}`, r.t);
    for (const b of content) {
      if (b.type === 'text') it.appendChild(this.block(null, m.role === 'assistant' ? rendered(b.text, 4000) : clip('div', 'text', b.text, 4000)));
      else if (b.type === 'tool_use') it.appendChild(this.block(null, this.callBlock(b.id, b.name, 'call')));
      else it.appendChild(this.block(null, this.callBlock(b.tool_use_id, 'tool', 'result')));
    }
    return it;
  }

  recordItem(index: number): HTMLDivElement {
    const r = this.run.records[index];
    if (!r) return this.item('summary', 'record', null);
    switch (r.kind) {
      case 'message':
        return this.messageItem(r);
      case 'response': {
        const calls = r.toolCalls.map((c) => c.name + (c.complete ? '' : ' (cut off)'));
        return this.item(
          `summary${r.stopReason === 'refusal' || r.stopReason === 'max_tokens' ? ' bad' : ''}`,
          'model response',
          `stop: ${r.stopReason} · ${plural(r.textChars, 'char')} of text${calls.length ? ` · calls ${calls.join(', ')}` : ''} · ${usageText(r.usage)}`,
          r.t,
        );
      }
      case 'tool.result':
        return this.item(
          `summary${r.isError ? ' bad' : ''}`,
          'tool result',
          `${this.run.call(r.toolUseId)?.name ?? 'tool'} · ${r.isError ? 'error' : 'ok'} · ${plural(r.chars, 'char')}`,
          r.t,
        );
      case 'event':
        return this.item(`summary${r.type === 'cancel' || r.type === 'model.error' ? ' bad' : ''}`, 'event', r.type + (r.detail ? `: ${r.detail}` : ''), r.t);
      case 'agent.start': {
        const sp = this.item('inbox', `spawned ${r.name}`, `${plural(r.taskChars, 'character')} of task`, r.t);
        sp.appendChild(this.block(null, clip('div', 'text', r.task, 600)));
        return sp;
      }
      case 'delivery': {
        const bad = r.outcome !== 'replied';
        const dv = this.item(`delivery${bad ? ' bad' : ''}`, `inbox ← ${r.name}`, `${r.outcome} · ${plural(r.text.length, 'char')}`, r.t);
        if (r.text) dv.appendChild(this.block(null, rendered(r.text, 1200)));
        else if (r.reason) dv.appendChild(this.block(null, h('div', 'text', r.reason)));
        return dv;
      }
      default:
        return this.item('summary', r.kind, null, r.t);
    }
  }

  private appendReply(rec: number): void {
    const r = this.run.records[rec];
    if (r?.kind !== 'delivery') return;
    const arrow = this.run.model.arrows.find((a) => a.rec === rec);
    const bad = r.outcome !== 'replied';
    this.panel.appendChild(h('div', `tag${bad ? ' bad' : ''}`, arrow?.tag ?? `[agent '${r.name}' ${r.outcome}]`));
    if (r.text) this.panel.appendChild(replyView(r.text));
    else this.panel.appendChild(h('p', 'empty', 'No reply text: the tag is all the parent receives.'));
  }

  private appendDelivery(a: ViewerAgent): void {
    const r = this.run.records[a.delivery];
    if (!r) return;
    const parent = this.run.model.agents[a.parent];
    this.panel.appendChild(this.label(['delivered to ', parent ? parent.id : 'parent', ` at ${fmtT(r.t)}`]));
    this.appendReply(a.delivery);
  }

  private showBar(lane: number, j: number): void {
    const a = this.run.model.agents[lane];
    const b = a?.bars[j];
    if (!a || !b) return;
    const cost = b.cost === undefined ? '' : ` · ${fmtCost(b.cost)}`;
    this.header(
      'state',
      a.id,
      this.stateBadge(b.state),
      `${fmtT(b.t0)} → ${fmtT(b.t1)} · ${fmtT(b.t1 - b.t0)} · step ${b.requests}${cost} · ${plural(b.items.length, 'record')}`,
    );
    if (b.final) {
      const dl = h('dl');
      dl.appendChild(h('dt', null, 'outcome'));
      dl.appendChild(h('dd', null, a.outcome ?? b.state));
      if (a.reason) {
        dl.appendChild(h('dt', null, 'reason'));
        dl.appendChild(h('dd', null, a.reason));
      }
      this.panel.appendChild(dl);
      if (a.delivery >= 0) this.appendDelivery(a);
    }
    if (b.items.length === 0 && !b.final) this.panel.appendChild(h('p', 'empty', 'Nothing was committed in this interval.'));
    for (const index of b.items) this.panel.appendChild(this.recordItem(index));
  }

  private showArrow(ar: ViewerArrow): void {
    const { agents } = this.run.model;
    const r = this.run.records[ar.rec];
    const to = agents[ar.to];
    const from = agents[ar.from];
    if (!r || !to || !from) return;
    if (ar.kind === 'delivery' && r.kind === 'delivery') {
      this.header(
        'delivery',
        `${r.name} → ${to.id}`,
        this.badge(r.outcome, this.palette.outcome(r.outcome)),
        `at ${fmtT(r.t)} · ${plural(r.text.length, 'character')} · what ${to.id} receives in its inbox`,
      );
      this.appendReply(ar.rec);
    } else if (r.kind === 'agent.start') {
      this.header(
        'spawn',
        `${from.id} → ${r.name}`,
        to.outcome ? this.badge(to.outcome, this.palette.outcome(to.outcome)) : this.stateBadge(to.lastState),
        `at ${fmtT(r.t)} · depth ${r.depth} · ${to.id}`,
      );
      this.panel.appendChild(
        this.label([
          'task',
          r.taskChars > r.task.length ? ` (the first ${r.task.length} of ${r.taskChars} characters)` : ` (${plural(r.taskChars, 'character')})`,
        ]),
      );
      this.panel.appendChild(h('div', 'text', r.task));
    }
  }

  private showAgent(lane: number, t: number): void {
    const a = this.run.model.agents[lane];
    if (!a) return;
    this.header(
      'agent',
      a.id,
      a.outcome ? this.badge(a.outcome, this.palette.outcome(a.outcome)) : this.stateBadge(a.lastState),
      `${fmtT(a.start)} → ${fmtT(a.end)} · ${fmtT(a.end - a.start)} · ${a.status}`,
    );
    const dl = h('dl');
    const row = (k: string, v: string): void => {
      dl.appendChild(h('dt', null, k));
      dl.appendChild(h('dd', null, v));
    };
    row('model requests', String(a.requests));
    row('tokens', usageText(a.usage));
    if (a.model !== undefined) row('model', a.model);
    if (a.cost !== undefined) row('cost', `${fmtCost(a.cost)} (list prices)`);
    row('sub-agents', String(a.children.length));
    if (a.reason) row('reason', a.reason);
    const j = barAt(a, t);
    const bar = a.bars[j];
    if (bar) row(`at ${fmtT(t)}`, `${bar.state} · step ${bar.requests}`);
    this.panel.appendChild(dl);
    if (bar) {
      const open = h('button', 'more', `show the ${bar.state} interval at ${fmtT(t)}`);
      open.addEventListener('click', () => this.select({ kind: 'bar', agent: a.id, bar: j }, t));
      this.panel.appendChild(open);
    }
    const start = this.run.records[a.startRec];
    if (start?.kind === 'agent.start') {
      this.panel.appendChild(this.label(['task', ` (${plural(start.taskChars, 'character')})`]));
      this.panel.appendChild(clip('div', 'text', start.task, 1200));
    }
    if (a.delivery >= 0) this.appendDelivery(a);
    const hist = h('button', 'more', 'show its whole history');
    hist.addEventListener('click', () => {
      hist.remove();
      const latest = new Map<number, number>();
      this.run.records.forEach((m, i) => {
        if (m.kind === 'message' && m.agent === a.id) latest.set(m.index, i);
      });
      if (latest.size === 0) this.panel.appendChild(h('p', 'empty', 'No messages.'));
      for (const key of [...latest.keys()].sort((x, y) => x - y)) this.panel.appendChild(this.recordItem(latest.get(key) ?? -1));
    });
    this.panel.appendChild(h('div'));
    this.panel.appendChild(hist);
  }
}

/** The agent's bar at time `t` (the last that started by then), or -1. */
function barAt(agent: ViewerAgent | undefined, t: number): number {
  if (!agent) return -1;
  const bars = agent.bars;
  let lo = 0;
  let hi = bars.length - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((bars[mid] as ViewerBar).t0 <= t) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/** An event name as the diagram spells it: `xstate.done.actor.*` → `child done`. */
function shortEvent(event: string): string {
  const m = /^xstate\.(done|error)\.actor\.(.+)$/.exec(event);
  if (m) return m[2] === '*' ? `child ${m[1]}` : `${m[1]}: ${m[2]}`;
  return event;
}
