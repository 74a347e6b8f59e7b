import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionActor, defineTool, waitForSettled, type Tool } from '../../../src/index.js';
import { AnthropicProvider } from '../../../src/providers/anthropic.js';
import { scriptedProvider, type ScriptedProviderOptions } from '../../../src/testing/index.js';
import type { TraceRecord } from '../../../src/watch/trace/format.js';
import { parseTrace } from '../../../src/watch/trace/readTrace.js';
import { TraceRecorder } from '../../../src/watch/trace/recorder.js';
import { buildViewerModel } from '../../../src/watch/viewer/buildModel.js';
import { responseEvents, scriptedHandler, startAnthropicServer } from '../../support/anthropicServer.js';

/** Trace recording from XState's inspect option (issue: visual debugging of turn flow). */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function traceFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-trace-'));
  dirs.push(dir);
  return join(dir, 'trace.jsonl');
}

async function record(agents: ScriptedProviderOptions['agents'], task = 'go', tools: readonly Tool[] = []): Promise<TraceRecord[]> {
  const file = traceFile();
  const recorder = new TraceRecorder({ file, title: 'test' });
  const actor = createSessionActor({ provider: scriptedProvider({ agents }), task, tools }, { inspect: recorder.inspect });
  actor.start();
  await waitForSettled(actor);
  actor.stop();
  recorder.close();
  return parseTrace(readFileSync(file, 'utf8'));
}

const of = <K extends TraceRecord['kind']>(records: TraceRecord[], kind: K) => records.filter((r): r is Extract<TraceRecord, { kind: K }> => r.kind === kind);

describe('trace recording', () => {
  it('records each agent’s lifecycle, every state change with a time, and the parent/child tree', async () => {
    const records = await record({
      root: [{ calls: [{ name: 'agent', input: { name: 'explorer', task: 'Map the tests.' } }] }, { text: 'wait' }, { text: 'done' }],
      explorer: [{ calls: [{ name: 'reply', input: { result: '# Map\n- a' } }] }],
    });
    expect(records[0]).toMatchObject({ kind: 'trace.start', version: 1, title: 'test', statechart: { initial: 'starting' } });
    expect(records.at(-1)?.kind).toBe('trace.end');
    expect(of(records, 'agent.start')).toEqual([
      expect.objectContaining({ agent: 'root', parent: null, depth: 0, task: 'go' }),
      expect.objectContaining({ agent: 'root/explorer', parent: 'root', depth: 1, name: 'explorer', task: 'Map the tests.', taskChars: 14 }),
    ]);
    expect(
      of(records, 'state')
        .filter((r) => r.agent === 'root/explorer')
        .map((r) => r.state),
    ).toEqual(['starting', 'streaming', 'dispatchingBatch', 'replied']);
    expect(
      of(records, 'state')
        .filter((r) => r.agent === 'root')
        .map((r) => r.state),
    ).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'readyForUser', 'streaming', 'readyForUser']);
    const times = records.map((r) => r.t);
    expect([...times].sort((a, b) => a - b)).toEqual(times);
    expect(of(records, 'agent.end')).toEqual([
      expect.objectContaining({ agent: 'root/explorer', status: 'done', outcome: 'replied' }),
      expect.objectContaining({ agent: 'root', status: 'stopped' }),
    ]);
  });

  it('the viewer shows a new sub-agent starting at step 0, then streaming step 1: never readyForUser (turn over) before its first turn', async () => {
    const records = await record({
      root: [{ calls: [{ name: 'agent', input: { name: 'explorer', task: 'Map the tests.' } }] }, { text: 'wait' }, { text: 'done' }],
      explorer: [{ calls: [{ name: 'reply', input: { result: 'mapped' } }] }],
    });
    const model = buildViewerModel(records);
    for (const id of ['root', 'root/explorer']) {
      const bars = model.agents.find((agent) => agent.id === id)?.bars ?? [];
      expect(bars.slice(0, 2).map((bar) => `${bar.state} step ${bar.requests}`)).toEqual(['starting step 0', 'streaming step 1']);
    }
  });

  it('summarises events: responses with tool names and ids, tool results, and the delivered reply', async () => {
    const echo = defineTool({ name: 'echo', description: 'e', input: z.object({ text: z.string() }), run: ({ text }) => text });
    const records = await record(
      {
        root: [
          {
            text: 'Delegating.',
            calls: [
              { name: 'agent', input: { name: 'c', task: 't' } },
              { name: 'echo', input: { text: 'hello' } },
            ],
          },
          { text: 'wait' },
          { text: 'done' },
        ],
        c: [{ calls: [{ name: 'reply', input: { result: { ok: true } } }] }],
      },
      'go',
      [echo],
    );
    const first = of(records, 'response')[0];
    expect(first).toMatchObject({
      agent: 'root',
      stopReason: 'tool_use',
      textChars: 11,
      toolCalls: [
        { name: 'agent', complete: true, id: expect.stringMatching(/^toolu_/) },
        { name: 'echo', complete: true, id: expect.stringMatching(/^toolu_/) },
      ],
    });
    // agent and reply are answered by the machine; only the tool batch reports results.
    expect(of(records, 'tool.result')).toEqual([expect.objectContaining({ agent: 'root', toolUseId: first?.toolCalls[1]?.id, isError: false, chars: 5 })]);
    expect(of(records, 'delivery')).toEqual([
      expect.objectContaining({ parent: 'root', child: 'root/c', name: 'c', outcome: 'replied', text: '{\n  "ok": true\n}' }),
    ]);
  });

  it('writes each message once (or again when a later append merged into it), not the transcript per event', async () => {
    const steps = 40;
    const loop = await record({ root: (_req, i) => (i < steps ? { calls: [{ name: 'reply', input: {} }] } : { text: 'done' }) });
    const messages = of(loop, 'message').filter((r) => r.agent === 'root');
    const final = new Map(messages.map((r) => [r.index, r.message]));
    // 1 task + 40 × (assistant + results) + 1 final answer, each written once.
    expect(final.size).toBe(2 * steps + 2);
    expect(messages.length).toBe(final.size);
  });

  it('rewrites a message merged into by a later append (an inbox turn joining the tool results)', async () => {
    const records = await record({
      // The root's second response is empty, so nothing follows the tool results when the inbox arrives.
      root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 't' } }] }, { text: '' }, { text: 'done' }],
      c: [{ calls: [{ name: 'reply', input: { result: 'x' } }], delayMs: 10 }],
    });
    const atTwo = of(records, 'message').filter((r) => r.agent === 'root' && r.index === 2);
    expect(atTwo.length).toBe(2);
    expect(atTwo[0]?.message.content.map((b) => b.type)).toEqual(['tool_result']);
    expect(atTwo[1]?.message.content.map((b) => b.type)).toEqual(['tool_result', 'text']);
  });

  it('never writes the API key', async () => {
    const server = await startAnthropicServer(scriptedHandler({ root: [{ kind: 'stream', events: responseEvents({ text: 'hi' }) }] }));
    try {
      const file = traceFile();
      const recorder = new TraceRecorder({ file });
      const secret = 'sk-ant-api03-SECRET-do-not-log';
      const actor = createSessionActor(
        { provider: new AnthropicProvider({ apiKey: secret, baseURL: server.url }), task: 'hello' },
        { inspect: recorder.inspect },
      );
      actor.start();
      await waitForSettled(actor);
      actor.stop();
      recorder.close();
      const text = readFileSync(file, 'utf8');
      expect(text).toContain('"kind":"agent.start"');
      expect(text).not.toContain(secret);
    } finally {
      await server.close();
    }
  });

  it('parseTrace refuses files that are not traces with one line', () => {
    expect(() => parseTrace('{"kind":"message"}\n')).toThrow('not an exarch trace: the first record is not trace.start');
    expect(() => parseTrace('not json\n')).toThrow(/^trace line 1 is not JSON/);
  });
});
