import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { sessionStatechart } from '../../../src/watch/statechart/extract.js';
import { TRACE_VERSION, type TraceRecord } from '../../../src/watch/trace/format.js';
import { jsonForScript } from '../../../src/engine/escape.js';
import { renderViewerHtml, writeViewer } from '../../../src/watch/viewer/index.js';
import { inlineSafe, pageScripts } from '../../../src/watch/viewer/pageScript.js';
import { buildViewerModel, viewerModelBuilder } from '../../../src/watch/viewer/buildModel.js';
import type { ViewerModel } from '../../../src/watch/viewer/model.js';
import type { Message } from '../../../src/engine/types.js';
import fc from 'fast-check';
import { batchViewerModel, type ViewerModel as BatchModel } from '../../support/batchViewerModel.js';
import { drawStatechart } from '../../../src/watch/viewer/statechartSvg.js';
import { syntheticTrace, traceText } from '../../support/traceFactory.js';

const usage = { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };

/** A small hand-written trace: a root spawns `explorer`, which replies with text that tries to break out of the page. */
function tinyTrace(replyText: string): TraceRecord[] {
  return [
    { t: 0, kind: 'trace.start', version: TRACE_VERSION, startedAt: '2025-01-01T00:00:00.000Z', title: 'tiny', statechart: sessionStatechart() },
    { t: 1, kind: 'agent.start', agent: 'root', name: 'root', depth: 0, parent: null, task: 'look', taskChars: 4 },
    { t: 1, kind: 'state', agent: 'root', state: 'readyForUser', steps: 0, usage },
    { t: 2, kind: 'message', agent: 'root', index: 0, message: { role: 'user', content: [{ type: 'text', text: 'look' }] } },
    { t: 2, kind: 'state', agent: 'root', state: 'streaming', steps: 1, usage },
    { t: 5, kind: 'response', agent: 'root', stopReason: 'tool_use', textChars: 0, toolCalls: [{ id: 'tu1', name: 'agent', complete: true }], usage },
    { t: 6, kind: 'agent.start', agent: 'root/explorer', name: 'explorer', depth: 1, parent: 'root', task: 'explore', taskChars: 7 },
    { t: 6, kind: 'state', agent: 'root/explorer', state: 'readyForUser', steps: 0, usage },
    {
      t: 6.5,
      kind: 'message',
      agent: 'root',
      index: 1,
      message: { role: 'assistant', content: [{ type: 'tool_use', id: 'tu1', name: 'agent', input: { name: 'explorer', task: 'explore' } }] },
    },
    { t: 6.5, kind: 'state', agent: 'root', state: 'dispatchingBatch', steps: 1, usage },
    { t: 7, kind: 'message', agent: 'root/explorer', index: 0, message: { role: 'user', content: [{ type: 'text', text: 'explore' }] } },
    { t: 7, kind: 'state', agent: 'root/explorer', state: 'streaming', steps: 1, usage },
    { t: 8, kind: 'message', agent: 'root', index: 2, message: { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tu1', content: 'started' }] } },
    { t: 8, kind: 'state', agent: 'root', state: 'readyForUser', steps: 1, usage },
    { t: 9, kind: 'message', agent: 'root/explorer', index: 1, message: { role: 'assistant', content: [{ type: 'text', text: 'draft' }] } },
    // A later append merged into message 1: the newer record replaces the older.
    { t: 9.5, kind: 'message', agent: 'root/explorer', index: 1, message: { role: 'assistant', content: [{ type: 'text', text: 'final words' }] } },
    { t: 10, kind: 'delivery', parent: 'root', child: 'root/explorer', name: 'explorer', outcome: 'replied', text: replyText },
    { t: 10.2, kind: 'state', agent: 'root/explorer', state: 'replied', steps: 1, usage },
    { t: 10.2, kind: 'agent.end', agent: 'root/explorer', status: 'done', outcome: 'replied' },
    { t: 11, kind: 'agent.end', agent: 'root', status: 'stopped' },
    { t: 11, kind: 'trace.end' },
  ];
}

function embedded(html: string): unknown {
  const match = /<script type="application\/json" id="exarch-trace">([\s\S]*?)<\/script>/.exec(html);
  if (!match?.[1]) throw new Error('no embedded trace data');
  return JSON.parse(match[1]);
}

describe('renderViewerHtml', () => {
  const hostile = 'line one\n</script><script>alert(1)</script>\n<!-- comment --> & "quotes" \u2028 done';
  const records = tinyTrace(hostile);
  const html = renderViewerHtml(records);

  it('is one self-contained file: no external scripts, styles, fonts, or network calls', () => {
    expect(html).not.toMatch(/(?:src|href)\s*=\s*["']?\s*(?:https?:)?\/\//i);
    expect(html).not.toMatch(/<link\b/i);
    expect(html).not.toMatch(/@import|@font-face|url\(\s*["']?https?:/i);
    // The data block, markdown-it and the page's own module script, all inline.
    expect(html.match(/<script\b/g)).toHaveLength(3);
    expect(html).not.toMatch(/<script[^>]*\ssrc=/i);
    // The browser enforces it: nothing loads, and a page made from a trace connects nowhere.
    expect(/Content-Security-Policy" content="([^"]*)"/.exec(html)?.[1]).toBe(
      "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:",
    );
    // The page's own code calls out once: a live page reads its server's event stream.
    const { app } = pageScripts();
    expect(app).not.toMatch(/\bfetch\b|XMLHttpRequest|WebSocket|sendBeacon|importScripts/);
    expect(app.match(/new EventSource\(/g)).toHaveLength(1);
    expect(app).not.toMatch(/https?:\/\//);
  });

  it('embeds every record, and escapes </script> and <!-- in the data', () => {
    // Only the three real closing tags: the data cannot end its element early.
    expect(html.match(/<\/script>/gi)).toHaveLength(3);
    expect(html).not.toContain('alert(1)</script>');
    expect(html.indexOf('<!--')).toBe(-1);
    const data = embedded(html) as { records: TraceRecord[] };
    expect(data.records).toEqual(records);
    const delivery = data.records.find((r) => r.kind === 'delivery');
    expect(delivery && delivery.kind === 'delivery' ? delivery.text : '').toBe(hostile);
  });

  it('renders the legend, the title and the statechart on the server side, with stable attributes (the page draws the rest)', () => {
    for (const state of ['readyForUser', 'streaming', 'dispatchingBatch', 'nudged', 'replied', 'finishedWithoutReply', 'capped', 'failed', 'cancelled']) {
      expect(html).toContain(`data-statechart-state="${state}"`);
    }
    for (const id of ['details', 'tree', 'lanes', 'search', 'stats']) expect(html).toContain(`id="${id}"`);
    expect(html).toContain('<title>tiny · exarch turn flow</title>');
    expect(renderViewerHtml(records, { title: 'Other <b>' })).toContain('<title>Other &#60;b&#62; · exarch turn flow</title>');
  });

  it('inlines the built page script: the shared model and the page files, importing nothing at run time', () => {
    const { app, markdown } = pageScripts();
    expect(app).toContain('class ViewerModelBuilder');
    expect(app).toContain('function renderAgentResult');
    expect(app).toContain('function startViewer');
    expect(app).not.toMatch(/^\s*import[\s{*'"]/m);
    expect(markdown).toContain('markdownit');
    for (const text of [app, markdown]) expect(text).not.toMatch(/<\/script|<!--/i);
  });

  it('makes script text safe to inline without changing what it means', () => {
    const code = "[ '</script><!--x', /^<!--/.test('<!--y'), /<\\/script>/.test('</script>') ]";
    const safe = inlineSafe('test.js', code);
    expect(safe).not.toMatch(/<\/script|<!--/i);
    expect(new Function(`return ${safe}`)()).toEqual(new Function(`return ${code}`)());
  });

  it('escapes JSON for a script element losslessly', () => {
    const value = { s: '</script><!--&\u2028\u2029>' };
    const text = jsonForScript(value);
    expect(text).not.toMatch(/[<>&\u2028\u2029]/);
    expect(JSON.parse(text)).toEqual(value);
  });
});

describe('buildViewerModel', () => {
  it('lays the tree out depth first and closes bars at the next state, agent.end or trace end', () => {
    const model = buildViewerModel(tinyTrace('ok'));
    expect(model.agents.map((a) => [a.id, a.depth, a.parent])).toEqual([
      ['root', 0, -1],
      ['root/explorer', 1, 0],
    ]);
    const explorer = model.agents[1];
    expect(explorer?.bars.map((b) => [b.state, b.t0, b.t1, b.final])).toEqual(
      [
        ['readyForUser', 6, 7],
        ['streaming', 7, 10.2],
        ['replied', 10.2, 10.2],
      ].map(([s, a, b]) => [s, a, b, s === 'replied']),
    );
    expect(explorer?.outcome).toBe('replied');
    const root = model.agents[0];
    expect(root?.bars.at(-1)).toMatchObject({ state: 'readyForUser', t0: 8, t1: 11 });
    expect(root?.status).toBe('stopped');
    expect(model.arrows.map((a) => [a.kind, a.from, a.to, a.t])).toEqual([
      ['spawn', 0, 1, 6],
      ['delivery', 1, 0, 10],
    ]);
    expect(model.arrows[1]?.tag).toBe("[agent 'explorer' replied]");
  });

  it('puts the records of an interval in its bar: the opening user message with the state it opened, the latest version of a merged message', () => {
    const records = tinyTrace('ok');
    const model = buildViewerModel(records);
    const [ready, streaming] = model.agents[1]?.bars ?? [];
    const kinds = (items: readonly number[] | undefined): string[] =>
      (items ?? []).map((i) => {
        const r = records[i];
        return r?.kind === 'message' ? `message ${r.index} ${JSON.stringify(r.message.content[0])}` : (r?.kind ?? '?');
      });
    expect(kinds(ready?.items)).toEqual([]);
    expect(kinds(streaming?.items)).toEqual(['message 0 {"type":"text","text":"explore"}', 'message 1 {"type":"text","text":"final words"}']);
    const rootBars = model.agents[0]?.bars ?? [];
    // root: the task opens streaming; the response, the spawn and the assistant message belong to it; the tool results to the batch.
    expect(rootBars.map((b) => [b.state, b.items.map((i) => records[i]?.kind)])).toEqual([
      ['readyForUser', []],
      ['streaming', ['message', 'response', 'agent.start', 'message']],
      ['dispatchingBatch', ['message']],
      ['readyForUser', ['delivery']],
    ]);
  });

  it('handles a 200-agent synthetic trace', () => {
    const trace = syntheticTrace({ shape: [10, 19], steps: 12 });
    const model = buildViewerModel(trace.records);
    expect(model.agents).toHaveLength(201);
    expect(trace.records.length).toBeGreaterThan(15_000);
    // Every sub-agent has a spawn and a delivery arrow.
    expect(model.arrows.filter((a) => a.kind === 'spawn')).toHaveLength(200);
    expect(model.arrows.filter((a) => a.kind === 'delivery')).toHaveLength(200);
    for (const agent of model.agents.slice(1)) {
      expect(agent.bars.at(-1)?.final).toBe(true);
      expect(agent.outcome).toBe(trace.outcomes.get(agent.id));
    }
  });
});

/** The model in the batch oracle's shape: what both compute (costs, models and cumulative steps are the builder's own). */
function common(model: ViewerModel | BatchModel): unknown {
  return JSON.parse(
    JSON.stringify({
      ...model,
      cost: undefined,
      agents: model.agents.map((agent) => ({
        ...agent,
        model: undefined,
        cost: undefined,
        bars: agent.bars.map((bar) => ({ ...bar, requests: undefined, cost: undefined })),
      })),
    }),
  );
}

/** Feeds `records` one at a time and checks the model against the batch computation at each of `at`. */
function expectPrefixesMatch(records: readonly TraceRecord[], every = 1): void {
  const builder = viewerModelBuilder();
  records.forEach((record, i) => {
    builder.add(record);
    if (i % every === 0 || i === records.length - 1)
      expect(common(builder.model()), `after record ${i}`).toEqual(common(batchViewerModel(records.slice(0, i + 1))));
  });
}

describe('ViewerModelBuilder', () => {
  it('gives, after every record, the model the batch computation gives for that prefix of the trace', () => {
    expectPrefixesMatch(tinyTrace('ok'));
    expectPrefixesMatch(syntheticTrace({ shape: [3, 2], steps: 3 }).records);
    expectPrefixesMatch(syntheticTrace({ shape: [10, 19], steps: 12 }).records, 997);
  });

  it('puts a message merged into before a state change where the batch computation does', () => {
    const text = (t: string): Message => ({ role: 'user', content: [{ type: 'text', text: t }] });
    const records: TraceRecord[] = [
      { t: 0, kind: 'trace.start', version: TRACE_VERSION, startedAt: '', title: 'merge', statechart: sessionStatechart() },
      { t: 1, kind: 'agent.start', agent: 'root', name: 'root', depth: 0, parent: null, task: '', taskChars: 0 },
      { t: 1, kind: 'state', agent: 'root', state: 'readyForUser', steps: 0, usage },
      { t: 2, kind: 'message', agent: 'root', index: 0, message: text('first') },
      // The same message again (an append merged into it), then the state it opened.
      { t: 3, kind: 'message', agent: 'root', index: 0, message: text('first, then more') },
      { t: 4, kind: 'state', agent: 'root', state: 'streaming', steps: 1, usage },
      { t: 5, kind: 'event', agent: 'root', type: 'user.message', detail: '4 characters' },
      { t: 6, kind: 'message', agent: 'root', index: 1, message: text('late') },
      { t: 7, kind: 'agent.end', agent: 'root', status: 'stopped' },
    ];
    expectPrefixesMatch(records);
    const bars = buildViewerModel(records).agents[0]?.bars ?? [];
    expect(bars.map((bar) => bar.items)).toEqual([[3], [4, 6, 7]]);
  });

  it('matches the batch computation on random traces (every prefix)', () => {
    const agents = ['root', 'root/a', 'root/a/b'];
    const step = fc.oneof(
      fc.record({
        kind: fc.constant('state' as const),
        agent: fc.nat(2),
        state: fc.constantFrom('readyForUser', 'streaming', 'dispatchingBatch', 'nudged', 'replied'),
      }),
      fc.record({ kind: fc.constant('text' as const), agent: fc.nat(2), index: fc.nat(3) }),
      fc.record({ kind: fc.constant('assistant' as const), agent: fc.nat(2), index: fc.nat(3) }),
      fc.record({ kind: fc.constant('response' as const), agent: fc.nat(2) }),
      fc.record({ kind: fc.constant('event' as const), agent: fc.nat(2) }),
      fc.record({ kind: fc.constant('start' as const), agent: fc.nat(2) }),
      fc.record({ kind: fc.constant('end' as const), agent: fc.nat(2) }),
      fc.record({ kind: fc.constant('delivery' as const), agent: fc.integer({ min: 1, max: 2 }) }),
    );
    fc.assert(
      fc.property(fc.array(step, { maxLength: 40 }), (steps) => {
        const records: TraceRecord[] = [{ t: 0, kind: 'trace.start', version: TRACE_VERSION, startedAt: '', title: 'random', statechart: sessionStatechart() }];
        steps.forEach((s, i) => {
          const t = i + 1;
          const agent = agents[s.agent] ?? 'root';
          const parent = agent.slice(0, Math.max(0, agent.lastIndexOf('/'))) || null;
          if (s.kind === 'state') records.push({ t, kind: 'state', agent, state: s.state, steps: 1, usage });
          else if (s.kind === 'text')
            records.push({ t, kind: 'message', agent, index: s.index, message: { role: 'user', content: [{ type: 'text', text: `u${i}` }] } });
          else if (s.kind === 'assistant')
            records.push({ t, kind: 'message', agent, index: s.index, message: { role: 'assistant', content: [{ type: 'text', text: `a${i}` }] } });
          else if (s.kind === 'response') records.push({ t, kind: 'response', agent, stopReason: 'end_turn', textChars: 1, toolCalls: [], usage });
          else if (s.kind === 'event') records.push({ t, kind: 'event', agent, type: 'cancel' });
          else if (s.kind === 'start')
            records.push({
              t,
              kind: 'agent.start',
              agent,
              name: agent.split('/').pop() ?? agent,
              depth: agent.split('/').length - 1,
              parent,
              task: 'x',
              taskChars: 1,
            });
          else if (s.kind === 'end') records.push({ t, kind: 'agent.end', agent, status: 'done', outcome: 'replied' });
          else
            records.push({ t, kind: 'delivery', parent: parent ?? 'root', child: agent, name: agent.split('/').pop() ?? agent, outcome: 'replied', text: 'r' });
        });
        expectPrefixesMatch(records);
      }),
      { numRuns: 300 },
    );
  });

  it('prices each agent and each request at list prices when the trace names the model', () => {
    const records = tinyTrace('ok').map((record): TraceRecord => {
      if (record.kind === 'trace.start') return { ...record, model: 'claude-sonnet-4-5' };
      if (record.kind === 'response') return { ...record, usage: { ...usage, inputTokens: 1_000_000 } };
      if (record.kind === 'state' && record.agent === 'root' && record.t >= 5)
        return { ...record, usage: { ...usage, inputTokens: 1_000_000, outputTokens: 100_000 } };
      return record;
    });
    const model = buildViewerModel(records);
    const [root, explorer] = model.agents;
    // Sonnet: $3 per million input tokens, $15 per million output tokens.
    expect(root?.cost).toBeCloseTo(3 + 1.5, 10);
    expect(explorer?.cost).toBe(0);
    expect(model.cost).toBeCloseTo(4.5, 10);
    // The response arrived in the root's first streaming interval: that request's $3 is that bar's.
    expect(root?.bars.map((bar) => [bar.state, bar.cost])).toEqual([
      ['readyForUser', undefined],
      ['streaming', 3],
      ['dispatchingBatch', undefined],
      ['readyForUser', undefined],
    ]);
    expect(buildViewerModel(tinyTrace('ok')).cost).toBeUndefined();
  });

  it('lets what still runs last until now, for a page that follows a live run', () => {
    const records = tinyTrace('ok').filter((r) => r.kind !== 'trace.end' && !(r.kind === 'agent.end' && r.agent === 'root'));
    const builder = viewerModelBuilder();
    for (const record of records) builder.add(record);
    const model = builder.model(50);
    expect(model.t1).toBe(50);
    const [root, explorer] = model.agents;
    // The root still runs: its lane and its last bar reach now. The explorer ended at 10.2.
    expect([root?.end, root?.bars.at(-1)?.t1]).toEqual([50, 50]);
    expect([explorer?.end, explorer?.bars.at(-1)?.t1]).toEqual([10.2, 10.2]);
    // A now before the last record changes nothing.
    expect(builder.model(3).t1).toBe(10.2);
  });

  it("numbers steps over the agent's life, as the CLI does", () => {
    const records: TraceRecord[] = [
      { t: 0, kind: 'trace.start', version: TRACE_VERSION, startedAt: '', title: 'steps', statechart: sessionStatechart() },
      { t: 1, kind: 'state', agent: 'root', state: 'streaming', steps: 1, usage },
      { t: 2, kind: 'state', agent: 'root', state: 'readyForUser', steps: 1, usage },
      // A new turn: the turn's count starts again, the agent's goes on.
      { t: 3, kind: 'state', agent: 'root', state: 'streaming', steps: 1, usage },
      { t: 4, kind: 'state', agent: 'root', state: 'dispatchingBatch', steps: 1, usage },
      { t: 5, kind: 'state', agent: 'root', state: 'streaming', steps: 2, usage },
    ];
    expect(buildViewerModel(records).agents[0]?.bars.map((bar) => [bar.steps, bar.requests])).toEqual([
      [1, 1],
      [1, 1],
      [1, 2],
      [1, 2],
      [2, 3],
    ]);
    // A trace that records the count is read as it says.
    const counted = records.map((record, i): TraceRecord => (record.kind === 'state' ? { ...record, requests: 10 + i } : record));
    expect(buildViewerModel(counted).agents[0]?.bars.map((bar) => bar.requests)).toEqual([11, 12, 13, 14, 15]);
  });
});

describe('drawStatechart', () => {
  it('draws every state once, working states before the final column, and lists any-state transitions', () => {
    const chart = sessionStatechart();
    const drawing = drawStatechart(chart);
    for (const state of chart.states) expect(drawing.svg.match(new RegExp(`data-statechart-state="${state.id}"`, 'g'))).toHaveLength(1);
    expect(drawing.svg).toContain('data-from="streaming" data-to="dispatchingBatch"');
    expect(drawing.anyState.some((line) => line.includes('cancel') && line.includes('cancelled'))).toBe(true);
  });
});

describe('writeViewer', () => {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-viewer-'));

  it('writes the page for a trace file and counts agents and records', () => {
    const { records } = syntheticTrace({ shape: [3] });
    const file = join(dir, 'run.trace.jsonl');
    writeFileSync(file, traceText(records));
    const out = join(dir, 'nested', 'run.html');
    expect(writeViewer(file, out)).toEqual({ outFile: out, agents: 4, records: records.length, leftOut: [] });
    const html = readFileSync(out, 'utf8');
    expect(html).toContain('"agent":"root/worker3"');
    expect((embedded(html) as { records: unknown[] }).records).toHaveLength(records.length);
  });

  it('rejects a file that is not a trace with a one-line error naming it', () => {
    const cases: [string, RegExp][] = [
      ['{"hello": 1}\n', /not a trace record/],
      ['not json at all\n{}\n', /line 1 is not JSON/],
      [`{"t":0,"kind":"state"}\n`, /not an exarch trace/],
      ['', /not an exarch trace/],
    ];
    for (const [text, pattern] of cases) {
      const file = join(dir, 'bad.jsonl');
      writeFileSync(file, text);
      let message = '';
      try {
        writeViewer(file, join(dir, 'bad.html'));
      } catch (error) {
        message = error instanceof Error ? error.message : String(error);
      }
      expect(message).toMatch(pattern);
      expect(message).toContain(file);
      expect(message).not.toContain('\n');
    }
    let missing = '';
    try {
      writeViewer(join(dir, 'nope.jsonl'), join(dir, 'x.html'));
    } catch (error) {
      missing = error instanceof Error ? error.message : String(error);
    }
    expect(missing).toBe(`${join(dir, 'nope.jsonl')}: no such file`);
  });
});
