import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { sessionStatechart } from '../../../src/watch/statechart/extract.js';
import { displayGuards, transitionLabel } from '../../../src/watch/statechart/labels.js';
import { ANY_STATE_ID, mermaidId, mermaidText, toMermaid } from '../../../src/watch/statechart/mermaid.js';
import { toSvg } from '../../../src/watch/statechart/svg.js';
import { visualizationFiles } from '../../../src/watch/statechart/visualize.js';
import type { TraceStatechart } from '../../../src/watch/trace/format.js';

const dir = fileURLToPath(new URL('../../../visualizations/', import.meta.url));
const chart = sessionStatechart();

describe('the committed statecharts in visualizations/', () => {
  for (const [name, text] of Object.entries(visualizationFiles(chart))) {
    it(`${name} matches the session machine`, () => {
      let committed: string | undefined;
      try {
        committed = readFileSync(`${dir}${name}`, 'utf8');
      } catch {
        committed = undefined;
      }
      const stale = committed !== text;
      expect(
        stale,
        `visualizations/${name} is ${committed === undefined ? 'missing' : 'out of date'}: the session machine changed. Run \`npm run visualize\` and commit the result.`,
      ).toBe(false);
    });
  }
});

describe('toMermaid', () => {
  const mermaid = toMermaid(chart);
  const lines = mermaid.split('\n');

  it('is a stateDiagram-v2 that starts in the initial state', () => {
    expect(lines).toContain('stateDiagram-v2');
    expect(lines).toContain(`  [*] --> ${chart.initial}`);
  });

  it('declares every state, and every final state leads to [*]', () => {
    expect(chart.states.length).toBeGreaterThan(5);
    for (const state of chart.states) {
      expect(lines).toContain(`  state ${mermaidId(state.id)}`);
      if (state.final) expect(lines).toContain(`  ${mermaidId(state.id)} --> [*]`);
      else expect(lines).not.toContain(`  ${mermaidId(state.id)} --> [*]`);
    }
  });

  it('has every transition, with its event, guard and actions', () => {
    const guards = displayGuards(chart.transitions);
    const note = mermaid.slice(mermaid.indexOf(`note right of ${ANY_STATE_ID}`), mermaid.indexOf('end note'));
    chart.transitions.forEach((t, i) => {
      const label = mermaidText(transitionLabel(t, guards[i]));
      expect(label).toContain(t.event);
      if (t.guard) for (const part of t.guard.split('&&')) expect(label).toContain(part.trim());
      for (const action of t.actions) expect(label).toContain(action);
      if (t.source === '*' && t.target === '*') expect(note.split('\n').map((l) => l.trim())).toContain(label);
      else expect(lines).toContain(`  ${mermaidId(t.source)} --> ${mermaidId(t.target)} : ${label}`);
    });
    // Nothing else: one arrow per transition, plus the initial and final markers.
    const arrows = lines.filter((l) => l.includes(' --> '));
    const rootStays = chart.transitions.filter((t) => t.source === '*' && t.target === '*').length;
    expect(arrows).toHaveLength(chart.transitions.length - rootStays + 1 + chart.states.filter((s) => s.final).length);
  });

  it('shows an unguarded transition after guarded ones on its event as [else]', () => {
    expect(mermaid).toContain('streaming --> readyForUser : model.done [else] / commitResponse');
    expect(mermaid).toContain('nudged --> streaming : tick\n');
  });

  it('writes labels Mermaid can lex: no `;`, no `:`, no `&&`', () => {
    const labels = lines.filter((l) => l.includes(' --> ') && l.includes(' : ')).map((l) => l.slice(l.indexOf(' : ') + 3));
    expect(labels.length).toBeGreaterThan(10);
    for (const label of labels) expect(label).not.toMatch(/[;:&<>#]/);
    expect(mermaidText('a && b || c; d: <e> #1')).toBe('a and b or c, d∶ ‹e› ♯1');
  });

  it('draws a chart without root transitions without the "any state" box', () => {
    const small: TraceStatechart = {
      initial: 'idle',
      states: [
        { id: 'idle', final: false },
        { id: 'done', final: true },
      ],
      transitions: [{ source: 'idle', target: 'done', event: 'go', actions: [] }],
    };
    expect(toMermaid(small)).not.toContain(ANY_STATE_ID);
    expect(toMermaid(small)).toContain('  idle --> done : go\n');
  });
});

describe('toSvg', () => {
  const svg = toSvg(chart);

  it('is a standalone SVG document', () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg).not.toMatch(/NaN|undefined|Infinity/);
    expect(svg).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
  });

  it('has one node per state, final states with a double border', () => {
    const nodes = [...svg.matchAll(/<g class="state[^"]*" data-state="([^"]+)">(.*)<\/g>/g)];
    expect(nodes.map((m) => m[1]).sort()).toEqual(chart.states.map((s) => s.id).sort());
    for (const [, id, body] of nodes) {
      const final = chart.states.find((s) => s.id === id)?.final;
      expect(body?.match(/<rect /g)?.length, id).toBe(final ? 2 : 1);
      expect(body).toContain(`>${id}</text>`);
    }
    expect(svg).toContain(`data-initial="${chart.initial}"`);
    expect(svg).toContain('data-pseudo="*"');
  });

  it('labels its arrows with every event and guard, and lists the actions in tooltips', () => {
    for (const t of chart.transitions) {
      expect(svg).toContain(`>${t.event}</tspan>`);
      if (t.guard) for (const part of t.guard.split('&&')) expect(svg).toContain(part.trim());
      for (const action of t.actions) expect(svg).toContain(action);
    }
    // Transitions between the same pair share one arrow.
    const pairs = new Set(chart.transitions.map((t) => `${t.source}>${t.target === '*' ? t.source : t.target}`));
    expect(svg.match(/<g class="edge" data-source/g)).toHaveLength(pairs.size);
    expect(svg.match(/marker-end="url\(#arrow\)"/g)).toHaveLength(pairs.size + 1);
  });

  it('is the same every time', () => {
    expect(toSvg(sessionStatechart())).toBe(svg);
  });
});
