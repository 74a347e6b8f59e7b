import { describe, expect, it } from 'vitest';
import { ProgressBoard } from '../src/cli/progress.js';
import { createSessionActor, waitForSettled } from '../src/index.js';
import { scriptedProvider } from '../src/testing/index.js';

/** The progress display of exarch run: a tree redrawn in place on a terminal, plain lines elsewhere. */

function collect() {
  let text = '';
  return { out: { write: (s: string) => ((text += s), true) } as unknown as NodeJS.WritableStream, text: () => text };
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

describe('progress display', () => {
  it('plain mode writes one line per state change with steps, tokens and time', async () => {
    const sink = collect();
    await runWith(new ProgressBoard({ out: sink.out, live: false, color: false }));
    const lines = sink.text().trim().split('\n');
    expect(lines.some((l) => /^\+\d+\.\ds root\/explorer\s+replied\s+step 1\s+1\.6k tok\s+\d+\.\ds$/.test(l))).toBe(true);
    expect(lines.filter((l) => /root\s+streaming/.test(l)).length).toBeGreaterThanOrEqual(2);
    expect(sink.text()).not.toContain('\u001b[');
  });

  it('live mode redraws the whole tree in place, indenting sub-agents', async () => {
    const sink = collect();
    const board = new ProgressBoard({ out: sink.out, live: true, color: true });
    // The explorer takes long enough for a redraw while it works.
    await runWith(board, 250);
    const frames = sink.text().split('\u001b[0J');
    const last = frames.at(-1) ?? '';
    // The final frame moves up over the previous one and lists every agent once.
    expect(sink.text()).toMatch(/\u001b\[2F/);
    expect(last.replace(/\u001b\[[0-9;]*m/g, '')).toMatch(/^root\s+readyForUser\s+step 3 .*\n  explorer\s+replied\s+step 1\s+1\.6k tok/);
    expect(board.totals()).toMatchObject({ agents: 2, steps: 4, outcomes: { replied: 1 } });
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
