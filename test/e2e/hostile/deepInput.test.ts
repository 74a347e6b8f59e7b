import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { JsonlLogSink, renderValue, type Message, type ModelResponse, type Provider, type ToolResultBlock } from '../../../src/index.js';
import { startRun } from '../../../src/run/durableRun.js';
import { writeViewerForRun } from '../../../src/watch/trace/fromJournal.js';
import { openSqliteStore } from '../../../src/store/sqliteStore.js';
import type { TraceRecord } from '../../../src/watch/trace/format.js';
import { parseTrace } from '../../../src/watch/trace/readTrace.js';
import { TraceRecorder } from '../../../src/watch/trace/recorder.js';
import { renderViewerHtml } from '../../../src/watch/viewer/html.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { call, exarch, serve, stream, workdir } from '../../support/cliHarness.js';
import { jsonLines, jsonlDir, nestedArrays, rawToolCall, toolResultsOf } from '../../support/hostileInput.js';

/**
 * Issue 13, hole 4: a tool input nested 20,000 deep (40 KB of `[[[…]]]`) overflowed the stack in
 * every writer that serialised it (the JSONL log first: the root exited 1 with "Maximum call stack
 * size exceeded"). Now the session answers such a call with an error and goes on, and no writer
 * (log, trace, viewer, store, rendering) can be made to overflow by what it is handed.
 */

const DEEP = 20_000;

/** An array nested `n` deep, built without recursion. */
function deepValue(n: number): unknown {
  let value: unknown = [];
  for (let i = 1; i < n; i++) value = [value];
  return value;
}

/** How deep a parsed JSON value nests (iterative: the oracle must not overflow either). */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 1]];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [node, depth] = top;
    if (typeof node !== 'object' || node === null) continue;
    max = Math.max(max, depth);
    for (const child of Object.values(node)) stack.push([child, depth + 1]);
  }
  return max;
}

/** The JSON a viewer page embeds for its script, parsed. */
function viewerData(html: string): unknown {
  const data = /<script type="application\/json" id="exarch-trace">([\s\S]*?)<\/script>/.exec(html)?.[1];
  expect(data, 'the page embeds its trace').toBeDefined();
  return JSON.parse(data ?? '');
}

const STACK_TRACE = /Maximum call stack|RangeError|\n\s+at /;

describe('exarch run: a model sends a tool input nested 20,000 deep', () => {
  it('the root answers it with an error and finishes; every log and trace line is JSON; the store, runs and view all work', async () => {
    const cwd = workdir();
    const logDir = join(cwd, 'logs');
    const trace = join(cwd, 'trace.jsonl');
    const server = await serve({
      root: [{ kind: 'stream', events: rawToolCall('read_file', `{"path": ${nestedArrays(DEEP)}}`) }, stream({ text: 'understood' })],
    });
    const run = await exarch(['run', '--log-dir', logDir, '--trace', trace, 'go'], { server, cwd });
    expect(run.stderr).not.toMatch(STACK_TRACE);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('understood\n');

    // What the model was told: one error result for its call, naming the problem.
    const told = toolResultsOf(server.requests[1]);
    expect(told).toEqual([{ id: 'toolu_raw', isError: true, content: expect.stringMatching(/read_file.*nested more than \d+ levels deep/) }]);

    const logs = jsonlDir(logDir);
    expect([...logs.keys()]).toEqual(['root.jsonl']);
    expect(logs.get('root.jsonl')?.at(-1)).toMatchObject({ type: 'stopped' });
    const records = jsonLines(trace);
    expect(records.at(-1)).toMatchObject({ kind: 'trace.end' });

    const id = /exarch: run (\S+) started/.exec(run.stderr)?.[1] ?? '';
    const runs = await exarch(['runs'], { cwd });
    expect(runs.code).toBe(0);
    expect(runs.stdout).toMatch(new RegExp(`${id}.*done`));
    for (const target of [trace, id]) {
      const view = await exarch(['view', target, '--out', join(cwd, 'view.html')], { cwd });
      expect(view.stderr).not.toMatch(STACK_TRACE);
      expect(view.code).toBe(0);
      viewerData(readFileSync(join(cwd, 'view.html'), 'utf8'));
    }
  });

  it('a child sending one does not crash the tree: it is told, and its reply still reaches the root', async () => {
    const cwd = workdir();
    const logDir = join(cwd, 'logs');
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'deep', task: 'x' })] }), stream({ text: 'Waiting.' }), stream({ text: 'done' })],
      // The reply tool takes any JSON value as its result: the deepest place an input can go.
      deep: [
        { kind: 'stream', events: rawToolCall('reply', `{"result": ${nestedArrays(DEEP)}}`) },
        stream({ toolCalls: [call('reply', { result: 'still here' })] }),
      ],
    });
    const run = await exarch(['run', '--log-dir', logDir, '--trace', join(cwd, 'trace.jsonl'), 'go'], { server, cwd });
    expect(run.stderr).not.toMatch(STACK_TRACE);
    expect(run.code).toBe(0);
    const deep = server.requests.filter((r) => r.agent === 'deep');
    expect(toolResultsOf(deep[1])).toEqual([{ id: 'toolu_raw', isError: true, content: expect.stringMatching(/nested more than \d+ levels deep/) }]);
    const rootLast = server.requests.filter((r) => r.agent === 'root').at(-1);
    expect(JSON.stringify(rootLast?.body.messages.at(-1))).toContain("[agent 'deep' replied]\\nstill here");
    const logs = jsonlDir(logDir);
    expect([...logs.keys()].sort()).toEqual(['root.deep.jsonl', 'root.jsonl']);
    expect(logs.get('root.deep.jsonl')?.at(-1)).toMatchObject({ type: 'outcome', outcome: 'replied' });
    jsonLines(join(cwd, 'trace.jsonl'));
  });
});

describe('a host’s own provider sends one (not the Anthropic one, which parses the wire itself)', () => {
  it('the session refuses it the same way, and the log, trace, store and viewer of the run are all JSON', async () => {
    const dir = workdir();
    const requests: Message[][] = [];
    const provider: Provider = {
      name: 'host',
      async stream(request): Promise<ModelResponse> {
        requests.push(structuredClone(request.messages) as Message[]);
        const usage = { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
        if (requests.length === 1) {
          return {
            content: [{ type: 'tool_use', id: 'toolu_deep', name: 'read_file', input: { path: deepValue(DEEP) } }],
            stopReason: 'tool_use',
            usage,
            incompleteToolUseIds: [],
          };
        }
        return { content: [{ type: 'text', text: 'understood' }], stopReason: 'end_turn', usage, incompleteToolUseIds: [] };
      },
    };
    const store = openSqliteStore(join(dir, 'exarch.db'));
    const recorder = new TraceRecorder({ file: join(dir, 'trace.jsonl') });
    try {
      const run = await startRun(
        'go',
        { provider, tools: workspaceTools({ root: dir }), logs: new JsonlLogSink(join(dir, 'logs')) },
        { store, cwd: dir, actor: { inspect: recorder.inspect } },
      );
      const result = await run.result;
      expect(result.text).toBe('understood');
      const answer = requests[1]?.at(-1)?.content[0] as ToolResultBlock | undefined;
      expect(answer).toMatchObject({
        type: 'tool_result',
        tool_use_id: 'toolu_deep',
        is_error: true,
        content: expect.stringMatching(/nested more than \d+ levels deep/),
      });
      // The call stays in the history the model sees again, with an input it can take.
      expect(requests[1]?.[1]?.content[0]).toMatchObject({ type: 'tool_use', id: 'toolu_deep', input: {} });
      recorder.close();
      jsonlDir(join(dir, 'logs'));
      parseTrace(readFileSync(join(dir, 'trace.jsonl'), 'utf8'));
      expect((await store.journal(run.id)).length).toBeGreaterThan(0);
      viewerData(readFileSync((await writeViewerForRun(store, run.id, join(dir, 'view.html'))).outFile, 'utf8'));
    } finally {
      recorder.close();
      store.close();
    }
  });
});

describe('every writer takes a value of any depth (defence behind the session’s own refusal)', () => {
  const agent = { name: 'root', path: ['root'], depth: 0, id: 'root' };
  const deepMessage = (): Message => ({ role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_deep', name: 'x', input: { path: deepValue(DEEP) } }] });

  it('the JSONL log writes one JSON line, the deep part elided', () => {
    const dir = workdir();
    const log = new JsonlLogSink(dir).open(agent);
    log.append({ type: 'message', role: 'assistant', content: deepMessage().content });
    log.append({ type: 'nudge', latch: 'after', text: 'still writing' });
    log.close();
    const lines = jsonLines(join(dir, 'root.jsonl'));
    expect(lines).toHaveLength(2);
    expect(depthOf(lines[0])).toBeLessThan(200);
    expect(JSON.stringify(lines[0])).toMatch(/nested too deep/);
    expect(lines[1]).toMatchObject({ type: 'nudge', text: 'still writing' });
  });

  it('the trace recorder writes the message as one JSON line', () => {
    const file = join(workdir(), 'trace.jsonl');
    const recorder = new TraceRecorder({ file });
    const snapshot = {
      value: 'dispatchingBatch',
      status: 'active',
      context: {
        agent,
        steps: 1,
        usage: { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
        messages: [deepMessage()],
        pendingUser: [],
      },
    };
    const actorRef = { sessionId: 'x:0', id: 'root', getSnapshot: () => snapshot };
    recorder.inspect({ type: '@xstate.snapshot', actorRef, snapshot, event: { type: 'x' }, rootId: 'x:0' } as unknown as InspectionEvent);
    recorder.close();
    const records = parseTrace(readFileSync(file, 'utf8'));
    expect(records.find((r) => r.kind === 'message')).toMatchObject({ kind: 'message', agent: 'root', index: 0 });
  });

  it('the store journals it and reads it back', () => {
    const store = openSqliteStore(join(workdir(), 'exarch.db'));
    try {
      const owner = { host: 'h', pid: process.pid, token: 't' };
      store.createRun({ id: 'r1', task: 'go', cwd: '/', options: { tools: [], deep: deepValue(DEEP) }, startedAt: 0, owner, leaseMs: 1000 });
      store.append([{ runId: 'r1', seq: 1, session: 'root', ts: 0, record: { type: 'message', role: 'assistant', content: deepMessage().content } }]);
      const [row] = store.journal('r1');
      expect(row?.record).toMatchObject({ type: 'message', role: 'assistant' });
      expect(store.getRun('r1')?.options.tools).toEqual([]);
    } finally {
      store.close();
    }
  });

  it('the viewer renders a trace that holds it', () => {
    const records: TraceRecord[] = [
      {
        t: 0,
        kind: 'trace.start',
        version: 1,
        startedAt: new Date(0).toISOString(),
        title: 't',
        statechart: { initial: 'readyForUser', states: [], transitions: [] },
      },
      { t: 1, kind: 'agent.start', agent: 'root', name: 'root', depth: 0, parent: null, task: 'go', taskChars: 2 },
      { t: 2, kind: 'message', agent: 'root', index: 0, message: deepMessage() },
      { t: 3, kind: 'trace.end' },
    ];
    expect(JSON.stringify(viewerData(renderViewerHtml(records)))).toMatch(/nested too deep/);
  });

  it('rendering it as text for a model elides the deep part', () => {
    const text = renderValue({ result: deepValue(DEEP) });
    expect(text).toMatch(/nested too deep/);
    expect(text.length).toBeLessThan(100_000);
  });
});
