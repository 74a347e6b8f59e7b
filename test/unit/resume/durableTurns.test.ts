import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { startRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { ScriptedProvider, type ScriptedStep } from '../../../src/testing/scriptedProvider.js';
import { defineTool } from '../../../src/tools/defineTool.js';

const STEPS = 40;

/** A read: it may run before the response that asked for it is stored. */
const echo = defineTool({
  name: 'echo',
  description: 'Returns its text.',
  input: z.object({ text: z.string() }),
  readOnly: true,
  run: ({ text }) => text,
});

/** `STEPS` steps of one echo call each, then a final text. */
function echoes(index: number): ScriptedStep {
  return index < STEPS ? { calls: [{ name: 'echo', input: { text: `step ${index}` } }] } : { text: 'done' };
}

/**
 * How many times the event loop turned while `run` ran: a chain of immediates, one per turn.
 * (A journal written at the end of each turn costs every step a turn, and the timers and I/O
 * checks that come with it.)
 */
async function turnsDuring(run: () => Promise<unknown>): Promise<number> {
  let turns = 0;
  let counting = true;
  const tick = (): void => {
    turns++;
    if (counting) setImmediate(tick);
  };
  setImmediate(tick);
  try {
    await run();
  } finally {
    counting = false;
  }
  return turns;
}

describe('durable runs: when the journal is written', () => {
  it('a lone agent steps without waiting for the event loop to turn: each burst is written as its step waits', async () => {
    const store = new MemoryRunStore();
    const provider = new ScriptedProvider({ agents: { root: (_request, index) => echoes(index) } });
    const turns = await turnsDuring(async () => {
      const run = await startRun('task', { provider, tools: [echo], maxSteps: STEPS + 5 }, { store });
      expect((await run.result).status).toBe('done');
    });
    expect(turns).toBeLessThan(STEPS / 4);
    // Every step's records are in the journal, in order: the early writes lost nothing.
    const run = store.listRuns()[0];
    const journal = store.journal(run?.id ?? '');
    expect(journal.filter((row) => row.record.type === 'tool')).toHaveLength(STEPS);
    expect(journal.map((row) => row.seq)).toEqual(journal.map((_, i) => i + 1));
  });

  it('once its sub-agent has stopped, the root steps without waiting for the event loop again', async () => {
    const store = new MemoryRunStore();
    const provider = new ScriptedProvider({
      agents: {
        root: (_request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'scout', task: 'look' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : echoes(index - 1),
        scout: [{ calls: [{ name: 'reply', input: { result: 'seen' } }] }],
      },
    });
    const turns = await turnsDuring(async () => {
      const run = await startRun('task', { provider, tools: [echo], maxSteps: STEPS + 5 }, { store });
      expect((await run.result).status).toBe('done');
    });
    expect(turns).toBeLessThan(STEPS / 4);
  });
});
