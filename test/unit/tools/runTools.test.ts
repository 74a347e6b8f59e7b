import { describe, expect, it } from 'vitest';
import type { AgentIdentity } from '../../../src/engine/types.js';
import type { ToolContext } from '../../../src/tools/defineTool.js';
import { type RunnableCall, startToolBatch, type ToolBatch, type ToolBatchEvent } from '../../../src/tools/runTools.js';
import { ToolErrorResult } from '../../../src/tools/toolErrorResult.js';

/**
 * A tool batch as the session sees it (CONTRACT §2: every call of a response runs concurrently and
 * each gets exactly one result): the events it sends as calls settle, what an abandon reports, and
 * the `AbortSignal` a tool reads. Calls here are driven by hand (a promise the test resolves), so
 * the order of events is the test's, not a race; a batch that fails to drain fails at once with a
 * message, not at the test timeout.
 */

const agent: AgentIdentity = { name: 'root', path: ['root'], depth: 0, id: 'root' };

function runnable(id: string, run: (context: ToolContext) => Promise<unknown>, options: { timeoutMs?: number; name?: string } = {}): RunnableCall {
  return { id, name: options.name ?? 'probe', run, timeoutMs: options.timeoutMs ?? 60_000, readOnly: false };
}

/** A promise the test settles. */
function gate<T = string>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => (open = resolve));
  return { promise, open };
}

interface Recorded {
  readonly batch: ToolBatch;
  readonly events: ToolBatchEvent[];
  /** Each `onAbandon` call's pending ids. */
  readonly abandons: string[][];
  /** Resolves with the events once `batch.drained` was sent; rejects after `ms` with what was sent so far. */
  drained(ms?: number): Promise<ToolBatchEvent[]>;
}

function start(calls: RunnableCall[], outputCap = 1000): Recorded {
  const events: ToolBatchEvent[] = [];
  const abandons: string[][] = [];
  const waiters: (() => void)[] = [];
  const batch = startToolBatch({ agent, calls, outputCap, onAbandon: (ids) => abandons.push([...ids]) }, (event) => {
    events.push(event);
    if (event.type === 'batch.drained') for (const wake of waiters) wake();
  });
  const drained = (ms = 2000): Promise<ToolBatchEvent[]> =>
    new Promise((resolve, reject) => {
      if (events.some((e) => e.type === 'batch.drained')) return resolve(events);
      const timer = setTimeout(() => reject(new Error(`the batch did not drain within ${ms} ms; events so far: ${JSON.stringify(events)}`)), ms);
      waiters.push(() => {
        clearTimeout(timer);
        resolve(events);
      });
    });
  return { batch, events, abandons, drained };
}

/** Lets every pending promise callback and immediate run. */
const settle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 5));

describe('a tool batch', () => {
  it('reports each result as its call settles, the last one together with the drain', async () => {
    const slow = gate();
    const fast = gate();
    const { events, drained } = start([runnable('a', () => slow.promise), runnable('b', () => fast.promise)]);
    fast.open('b done');
    await settle();
    expect(events).toEqual([{ type: 'tool.settled', result: { type: 'tool_result', tool_use_id: 'b', content: 'b done' } }]);
    slow.open('a done');
    expect(await drained()).toEqual([
      { type: 'tool.settled', result: { type: 'tool_result', tool_use_id: 'b', content: 'b done' } },
      { type: 'batch.drained', result: { type: 'tool_result', tool_use_id: 'a', content: 'a done' } },
    ]);
  });

  it('with nothing to run drains on its own, after start returned, with no result', async () => {
    const { events, drained } = start([]);
    expect(events, 'the drain must not be sent before start returns').toEqual([]);
    expect(await drained()).toEqual([{ type: 'batch.drained' }]);
  });

  it('abandoned before it drained reports its pending ids once, and sends nothing afterwards', async () => {
    const first = gate();
    const second = gate();
    const { batch, events, abandons } = start([runnable('a', () => first.promise), runnable('b', () => second.promise)]);
    first.open('a done');
    await settle();
    batch.abandon(new Error('session stopped'));
    batch.abandon(new Error('session stopped again'));
    expect(abandons, 'onAbandon: once, with the call still running').toEqual([['b']]);
    second.open('b done');
    await settle();
    expect(events).toEqual([{ type: 'tool.settled', result: { type: 'tool_result', tool_use_id: 'a', content: 'a done' } }]);
  });

  it('with nothing to run, abandoned before its drain: reported with no pending ids, and never drains', async () => {
    const { batch, events, abandons } = start([]);
    batch.abandon(new Error('cancelled'));
    await settle();
    expect(abandons).toEqual([[]]);
    expect(events, 'an abandoned batch sends no drain').toEqual([]);
  });

  it('abandoned after it drained reports nothing', async () => {
    const empty = start([]);
    await empty.drained();
    empty.batch.abandon(new Error('late'));
    expect(empty.abandons, 'an empty batch that drained has nothing to abandon').toEqual([]);

    const one = start([runnable('a', async () => 'done')]);
    await one.drained();
    one.batch.abandon(new Error('late'));
    expect(one.abandons, 'a batch whose calls all settled has nothing to abandon').toEqual([]);
  });

  it("abandoning aborts the signal of a tool that reads it, with the abandon's reason", async () => {
    let signal: AbortSignal | undefined;
    const { batch } = start([
      runnable('a', (context) => {
        signal = context.signal;
        return new Promise(() => undefined);
      }),
    ]);
    await settle();
    expect(signal?.aborted, 'not aborted while the batch runs').toBe(false);
    batch.abandon(new Error('session stopped'));
    expect(signal?.aborted, 'aborted by the abandon').toBe(true);
    expect((signal?.reason as Error | undefined)?.message).toBe('session stopped');
  });

  it('a tool that first reads its signal after the batch was abandoned finds it already aborted', async () => {
    const later = gate();
    let seen: { aborted: boolean; reason: string } | undefined;
    const { batch } = start([
      runnable('a', async (context) => {
        await later.promise;
        seen = { aborted: context.signal.aborted, reason: (context.signal.reason as Error).message };
        return 'done';
      }),
    ]);
    batch.abandon(new Error('session stopped'));
    later.open('go');
    await settle();
    expect(seen).toEqual({ aborted: true, reason: 'tool batch cancelled' });
  });

  it('a call has one signal however often it is read, and its timeout aborts it', async () => {
    const reads: AbortSignal[] = [];
    const { drained } = start([
      runnable(
        'a',
        (context) => {
          reads.push(context.signal, context.signal);
          return new Promise(() => undefined);
        },
        { timeoutMs: 10, name: 'hang' },
      ),
    ]);
    expect(await drained()).toEqual([
      { type: 'batch.drained', result: { type: 'tool_result', tool_use_id: 'a', content: "tool 'hang' timed out after 10 ms", is_error: true } },
    ]);
    expect(reads[0], 'both reads give the same signal').toBe(reads[1]);
    expect(reads[0]?.aborted, 'the timeout aborts the signal the tool holds').toBe(true);
    expect((reads[0]?.reason as Error | undefined)?.message).toBe("tool 'hang' timed out after 10 ms");
  });

  it('a call that finished in time is not aborted later by its time limit', async () => {
    let signal: AbortSignal | undefined;
    const { drained } = start([
      runnable(
        'a',
        async (context) => {
          signal = context.signal;
          return 'quick';
        },
        { timeoutMs: 5 },
      ),
    ]);
    await drained();
    // Well past the 5 ms limit: a deadline left armed would have fired by now.
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(signal?.aborted, 'the finished call’s signal must stay unaborted').toBe(false);
  });

  it('a call that throws before returning a promise gets an error result', async () => {
    const { drained } = start([
      runnable('a', () => {
        throw new Error('bad state');
      }),
    ]);
    expect(await drained()).toEqual([
      { type: 'batch.drained', result: { type: 'tool_result', tool_use_id: 'a', content: "tool 'probe' failed: bad state", is_error: true } },
    ]);
  });

  it('an error that already names the tool is the result as it is; any other is prefixed with the tool', async () => {
    const { drained } = start([
      runnable('a', async () => {
        throw new Error("tool 'probe' could not reach its server");
      }),
      runnable('b', async () => {
        throw new Error("tool 'other' is not me");
      }),
    ]);
    const results = (await drained()).map((e) => e.result);
    expect(results).toEqual([
      { type: 'tool_result', tool_use_id: 'a', content: "tool 'probe' could not reach its server", is_error: true },
      { type: 'tool_result', tool_use_id: 'b', content: "tool 'probe' failed: tool 'other' is not me", is_error: true },
    ]);
  });

  it("a tool's own error report (ToolErrorResult) is the result's text, lines kept, clipped like any output", async () => {
    const { drained } = start(
      [
        runnable('a', async () => {
          throw new ToolErrorResult('line one\nline two');
        }),
        runnable('b', async () => {
          throw new ToolErrorResult('');
        }),
        runnable('c', async () => {
          throw new ToolErrorResult('x'.repeat(500));
        }),
      ],
      200,
    );
    const [a, b, c] = (await drained()).map((e) => e.result);
    expect(a).toEqual({ type: 'tool_result', tool_use_id: 'a', content: 'line one\nline two', is_error: true });
    expect(b).toEqual({ type: 'tool_result', tool_use_id: 'b', content: '(no output)', is_error: true });
    expect(c?.is_error).toBe(true);
    expect(c?.content.length, 'clipped to the output cap').toBeLessThanOrEqual(200);
    expect(c?.content).toMatch(/^x+.*characters elided by exarch/s);
  });

  it("ToolErrorResult is an exarch error of kind 'tool-error' whose content is its message", () => {
    const error = new ToolErrorResult('quota exceeded');
    expect([error instanceof Error, error.kind, error.message, error.content]).toEqual([true, 'tool-error', 'quota exceeded', 'quota exceeded']);
  });

  it('a call that returns nothing is answered "(no output)"', async () => {
    const { drained } = start([runnable('a', async () => ''), runnable('b', async () => undefined)]);
    const results = (await drained()).map((e) => e.result);
    expect(results).toEqual([
      { type: 'tool_result', tool_use_id: 'a', content: '(no output)' },
      { type: 'tool_result', tool_use_id: 'b', content: '(no output)' },
    ]);
  });
});
