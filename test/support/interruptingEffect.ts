import { z } from 'zod';
import { sleep } from '../../src/engine/model/streamModel.js';
import type { DurableRun } from '../../src/run/durableRun.js';
import { defineTool, type Tool } from '../../src/tools/defineTool.js';

export interface InterruptingEffectOptions {
  /** The call (1 for the first) that presses Ctrl-C on the run while it runs. */
  readonly at: number;
  /** The run to interrupt (read when that call comes: a test starts the run after making the tool). */
  readonly run: () => DurableRun | undefined;
  /** Sees each call's number before it runs (e.g. to steer the tree from inside a batch). */
  readonly onCall?: (call: number) => void;
  /** How long each call runs, in ms (5 unless given). */
  readonly ms?: number;
  readonly idempotent?: boolean;
}

/**
 * A side-effecting tool `effect` that answers "done", whose `at`-th call presses Ctrl-C on the run
 * (`interrupt()`) while it runs: a crash point inside a batch, for the resume tests. `calls()`
 * counts its calls over the run and its resume.
 */
export function interruptingEffect(options: InterruptingEffectOptions): { readonly tool: Tool; readonly calls: () => number } {
  let calls = 0;
  const tool = defineTool({
    name: 'effect',
    description: 'Changes the world.',
    input: z.object({}),
    ...(options.idempotent === undefined ? {} : { idempotent: options.idempotent }),
    run: async (_input, { signal }) => {
      calls += 1;
      options.onCall?.(calls);
      if (calls === options.at) queueMicrotask(() => options.run()?.interrupt());
      await sleep(options.ms ?? 5, signal);
      return 'done';
    },
  });
  return { tool, calls: () => calls };
}
