import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { RunEvent } from '../../src/watch/observe/events.js';
import { EventQueue } from '../../src/watch/observe/eventQueue.js';

/**
 * An iterator's queue (src/watch/observe/eventQueue.ts) against a model written from its contract
 * alone: every event arrives once and in order; a text delta pushed while the last waiting event is
 * a delta of the same agent joins it. Long runs of pushes and takes cross the queue's drains and
 * compactions (it reuses its array and keeps its ends by count, issue 40.5).
 */

type Op =
  | { readonly push: { readonly delta: boolean; readonly agent: 'a' | 'b'; readonly text: string } }
  | { readonly take: number }
  | { readonly burst: true };

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 3,
    arbitrary: fc.record({
      push: fc.record({ delta: fc.boolean(), agent: fc.constantFrom('a' as const, 'b' as const), text: fc.string({ minLength: 1, maxLength: 3 }) }),
    }),
  },
  { weight: 1, arbitrary: fc.record({ take: fc.nat(1500) }) },
  { weight: 1, arbitrary: fc.constant({ burst: true as const }) },
);

function eventOf(push: { delta: boolean; agent: string; text: string }, seq: number): RunEvent {
  return push.delta
    ? ({ type: 'text.delta', agent: push.agent, path: [push.agent], time: seq, text: push.text } as RunEvent)
    : ({ type: 'agent.state', agent: push.agent, path: [push.agent], time: seq, state: `s${seq}` } as unknown as RunEvent);
}

/** What a consumer sees of an event: its kind, agent, and text or state. */
const seen = (e: RunEvent): string => {
  const fields = e as unknown as { type: string; agent: string; text?: string; state?: string };
  return `${fields.type}:${fields.agent}:${fields.text ?? fields.state}`;
};

describe('EventQueue against a model of its contract', () => {
  it('gives every event once, in order, deltas of one agent joined only while they wait', async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(op, { maxLength: 60 }), fc.integer({ min: 1, max: 3000 }), async (ops, burst) => {
        const queue = new EventQueue();
        const model: string[][] = [];
        const taken: string[] = [];
        const expected: string[] = [];
        let seq = 0;
        const push = (p: { delta: boolean; agent: string; text: string }): void => {
          const event = eventOf(p, seq++);
          queue.push(event);
          const last = model[model.length - 1];
          if (p.delta && last !== undefined && last[0] === 'text.delta' && last[1] === p.agent) last[2] += p.text;
          else model.push(p.delta ? ['text.delta', p.agent, p.text] : ['agent.state', p.agent, (event as unknown as { state: string }).state]);
        };
        const take = async (count: number): Promise<void> => {
          for (let i = 0; i < count && model.length > 0; i++) {
            const next = await queue.next();
            taken.push(seen(next.value as RunEvent));
            expected.push((model.shift() as string[]).join(':'));
          }
        };
        for (const o of ops) {
          if ('take' in o) await take(o.take);
          // A burst of distinct events (alternating agents) makes the queue long enough to compact.
          else if ('burst' in o) for (let i = 0; i < burst; i++) push({ delta: true, agent: i % 2 === 0 ? 'a' : 'b', text: String(i % 10) });
          else push(o.push);
          expect(queue.size).toBe(model.length);
        }
        await take(model.length);
        expect(taken).toEqual(expected);
        expect(queue.size).toBe(0);
      }),
      { numRuns: 200 },
    );
  });
});
