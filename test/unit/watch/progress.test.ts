import { describe, expect, it, vi } from 'vitest';
import type { InspectionEvent } from 'xstate';
import { ProgressBoard } from '../../../src/cli/progress.js';
import { createSessionActor, waitForSettled } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';

/** The progress display of exarch run: a tree redrawn in place on a terminal, plain lines elsewhere. */

function collect() {
  let text = '';
  // As wide as a terminal that fits every line (log-update wraps at the stream's columns).
  return {
    out: {
      write: (s: string) => {
        text += s;
        return true;
      },
      columns: 200,
    } as unknown as NodeJS.WritableStream,
    text: () => text,
  };
}

async function runWith(board: ProgressBoard, explorerDelayMs = 0) {
  const provider = scriptedProvider({
    agents: {
      root: [{ calls: [{ name: 'agent', input: { name: 'explorer', task: 'x' } }] }, { text: 'wait' }, { text: 'done' }],
      explorer: [{ calls: [{ name: 'reply', input: { result: 'r' } }], usage: { inputTokens: 1500, outputTokens: 100 }, delayMs: explorerDelayMs }],
    },
  });
  const actor = createSessionActor({ provider, task: 'go' }, { inspect: board.inspect });
  actor.start();
  await waitForSettled(actor);
  board.stop();
  actor.stop();
}

const plain = (text: string): string => text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '');
/** What a terminal shows after the last redraw: the text after log-update's last erase. */
const lastFrame = (text: string): string => plain(text.split('\u001b[G').at(-1) ?? '');

const AGENT = { id: 'root', name: 'root', path: ['root'], depth: 0 } as const;
const ZERO = { inputTokens: 0, outputTokens: 0, cacheReadInputTokens: 0, cacheCreationInputTokens: 0 };
/** A session snapshot as XState's inspection delivers it, with only what the board reads. */
function snapshotEvent(value: string, context: Record<string, unknown>): InspectionEvent {
  return {
    type: '@xstate.snapshot',
    snapshot: { value, status: 'active', context: { agent: AGENT, steps: 1, usage: ZERO, ...context } },
  } as unknown as InspectionEvent;
}

describe('progress display', () => {
  it('plain mode writes one line per state change with steps, tokens and time', async () => {
    const sink = collect();
    await runWith(new ProgressBoard({ out: sink.out, live: false, color: false }));
    const lines = sink.text().trim().split('\n');
    expect(lines.some((l) => /^\+\d+\.\ds root\/explorer\s+replied\s+step 1\s+1\.6k tok\s+\d+\.\ds$/.test(l))).toBe(true);
    expect(lines.filter((l) => /root\s+streaming/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect(sink.text()).not.toContain('\u001b[');
  });

  it('live mode redraws the whole tree in place, indenting sub-agents, and leaves it for the summary', async () => {
    const sink = collect();
    const board = new ProgressBoard({ out: sink.out, live: true, color: true });
    // The explorer takes long enough for a redraw while it works.
    await runWith(board, 250);
    // Each redraw erases the lines of the one before (log-update: erase line, up, …, column 1).
    const frames = sink.text().split('\u001b[G');
    expect(frames.length).toBeGreaterThan(1);
    const last = plain(frames.at(-1) ?? '');
    expect(last).toMatch(/^root\s+readyForUser\s+step 3 .*\n {2}explorer\s+replied\s+step 1\s+1\.6k tok\s+\d+s\n$/);
    expect(board.totals()).toMatchObject({ agents: 2, steps: 4, outcomes: { replied: 1 } });
    // The summary printed after the last drawing stays: stopping again draws nothing over it.
    sink.out.write('summary\n');
    board.stop();
    expect(plain(sink.text()).endsWith('summary\n')).toBe(true);
  });

  it('elapsed times tick every second while nothing else changes', () => {
    vi.useFakeTimers();
    try {
      const sink = collect();
      let now = 0;
      const board = new ProgressBoard({ out: sink.out, live: true, color: false, now: () => now });
      board.inspect(snapshotEvent('streaming', {}));
      for (let s = 1; s <= 3; s++) {
        now = s * 1000;
        vi.advanceTimersByTime(1000);
        expect(lastFrame(sink.text())).toMatch(new RegExp(`^root\\s+streaming\\s+step 1\\s+0 tok\\s+${s}s  waiting for the model\\n$`));
      }
      board.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('each line says what the agent is doing: streaming, which tool on what, waiting for sub-agents', () => {
    vi.useFakeTimers();
    try {
      const sink = collect();
      const board = new ProgressBoard({ out: sink.out, live: true, color: false, now: () => 0 });
      board.inspect(snapshotEvent('streaming', {}));
      board.onTextDelta(AGENT, 'x'.repeat(1200));
      vi.advanceTimersByTime(100);
      expect(lastFrame(sink.text())).toContain('streaming, 1.2k chars');
      const messages = [
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 't1', name: 'read_file', input: { path: 'src/x.ts' } },
            { type: 'tool_use', id: 't2', name: 'list_dir', input: {} },
          ],
        },
      ];
      const plan = [
        { kind: 'run', id: 't1', name: 'read_file' },
        { kind: 'run', id: 't2', name: 'list_dir' },
      ];
      board.inspect(snapshotEvent('dispatchingBatch', { messages, batch: { plan, results: new Map() } }));
      vi.advanceTimersByTime(100);
      expect(lastFrame(sink.text())).toContain('running read_file src/x.ts (+1 more)');
      board.inspect(snapshotEvent('dispatchingBatch', { messages, batch: { plan, results: new Map([['t1', {}]]) } }));
      vi.advanceTimersByTime(100);
      expect(lastFrame(sink.text())).toMatch(/running list_dir\n$/);
      board.inspect(snapshotEvent('readyForUser', { children: { size: 3 } }));
      vi.advanceTimersByTime(100);
      expect(lastFrame(sink.text())).toMatch(/readyForUser\s+step 1\s+0 tok\s+0s {2}waiting for 3 sub-agents\n$/);
      board.stop();
    } finally {
      vi.useRealTimers();
    }
  });

  it('counts model requests across turns', async () => {
    const sink = collect();
    const board = new ProgressBoard({ out: sink.out, live: false, color: false });
    const provider = scriptedProvider({ agents: { root: [{ text: 'one' }, { text: 'two' }] } });
    const actor = createSessionActor({ provider, task: 'first' }, { inspect: board.inspect });
    actor.start();
    await waitForSettled(actor);
    actor.send({ type: 'user.message', text: 'second' });
    await new Promise((r) => setTimeout(r, 20));
    await waitForSettled(actor);
    actor.stop();
    expect(board.totals().steps).toBe(2);
  });
});
