import { describe, expect, it } from 'vitest';
import { Admission } from '../../../src/engine/admission.js';
import { BudgetMeter } from '../../../src/engine/budgetMeter.js';
import { RequestAdmitter } from '../../../src/engine/requestAdmitter.js';
import type { AgentIdentity, AgentResult, Message } from '../../../src/engine/types.js';

/**
 * A session's way to its budgets (issue 37): asking for room, waiting for it, leaving the queue,
 * and the size of the root's next request that the tree keeps room for. Driven against a real
 * meter; what is observed is what the meter then admits for others.
 */

const sub = (name: string): AgentIdentity => ({ name, path: ['root', name], depth: 1, id: `root/${name}` });
const noMessages: Message[] = [];
// Before any response, a request is estimated at half a token a byte plus 512: an empty system
// prompt, no tools ('[]': 2 bytes) and no messages make 513 tokens.
const ONE = 513;

function admitterIn(meter: BudgetMeter, name: string): RequestAdmitter {
  return new RequestAdmitter(meter, sub(name), undefined, undefined, '', []);
}

describe('RequestAdmitter', () => {
  it('asks once: room granted is kept for the request that takes it, and asking again does not take more', () => {
    const meter = new BudgetMeter({ maxTokens: 2 * ONE });
    const a = admitterIn(meter, 'a');
    expect(a.ask(noMessages)).toBe('admitted');
    expect(a.ask(noMessages)).toBe('admitted');
    // One request's room is held, not two: a second session still fits beside it.
    expect(admitterIn(meter, 'b').ask(noMessages)).toBe('admitted');
    expect(a.take()).toBeInstanceOf(Admission);
    expect(a.take()).toBeUndefined();
  });

  it('a waiter that leaves before its room comes gives it back at once, and is never told', async () => {
    const meter = new BudgetMeter({ maxTokens: ONE + 100 });
    const running = admitterIn(meter, 'running');
    expect(running.ask(noMessages)).toBe('admitted');
    const held = running.take();
    const queued = admitterIn(meter, 'queued');
    expect(queued.ask(noMessages)).toBe('wait');
    const told: string[] = [];
    queued.wait(
      noMessages,
      () => told.push('room'),
      () => told.push('refused'),
    );
    // The running request ends: the meter takes room for the waiter and tells it after this turn.
    held?.release();
    // It leaves first (cancelled in the same cascade).
    queued.leave();
    await Promise.resolve();
    expect(told).toEqual([]);
    // The room came back: a newcomer fits (on its own: nothing else runs).
    expect(admitterIn(meter, 'newcomer').ask(noMessages)).toBe('admitted');
  });

  it('leaving with the room kept leaves it for the request it makes; leaving without gives it back', async () => {
    const meter = new BudgetMeter({ maxTokens: 2 * ONE });
    const blocker = admitterIn(meter, 'blocker');
    expect(blocker.ask(noMessages)).toBe('admitted');
    const blocking = blocker.take();
    const second = admitterIn(meter, 'second');
    expect(second.ask(noMessages)).toBe('admitted');
    const third = admitterIn(meter, 'third');
    expect(third.ask(noMessages)).toBe('wait');
    let roomed = false;
    third.wait(
      noMessages,
      () => (roomed = true),
      () => undefined,
    );
    blocking?.release();
    await Promise.resolve();
    expect(roomed).toBe(true);
    // As the queued state is left for streaming: the room stays for the request.
    third.leave(true);
    expect(third.ask(noMessages)).toBe('admitted');
    expect(admitterIn(meter, 'fourth').ask(noMessages)).toBe('wait');
    // Left without it (cancelled before the request): given back, and the next one fits.
    third.leave();
    expect(admitterIn(meter, 'fifth').ask(noMessages)).toBe('admitted');
  });

  it('a waiting root that no room will ever come for is told so, once its running request ends', async () => {
    const meter = new BudgetMeter({ maxTokens: 600 });
    const root: AgentIdentity = { name: 'root', path: ['root'], depth: 0, id: 'root' };
    const first = new RequestAdmitter(meter, root, undefined, undefined, '', []);
    expect(first.ask(noMessages)).toBe('admitted');
    const held = first.take();
    // Its response takes the spend to the budget: nothing after it can be admitted.
    meter.charge(root, undefined, undefined, { inputTokens: 600, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 });
    const again = new RequestAdmitter(meter, root, undefined, undefined, '', []);
    expect(again.ask(noMessages)).toBe('wait');
    const told: string[] = [];
    again.wait(
      noMessages,
      () => told.push('room'),
      () => told.push('refused'),
    );
    held?.release();
    await Promise.resolve();
    expect(told).toEqual(['refused']);
  });

  it('a refusal for a waiter that has left is not passed on', async () => {
    const meter = new BudgetMeter({ maxTokens: 600 });
    const root: AgentIdentity = { name: 'root', path: ['root'], depth: 0, id: 'root' };
    const first = new RequestAdmitter(meter, root, undefined, undefined, '', []);
    expect(first.ask(noMessages)).toBe('admitted');
    const held = first.take();
    meter.charge(root, undefined, undefined, { inputTokens: 600, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 });
    const again = new RequestAdmitter(meter, root, undefined, undefined, '', []);
    expect(again.ask(noMessages)).toBe('wait');
    const told: string[] = [];
    again.wait(
      noMessages,
      () => told.push('room'),
      () => told.push('refused'),
    );
    held?.release();
    again.leave();
    await Promise.resolve();
    expect(told).toEqual([]);
  });

  it("sizes the root's next request: its history, each waiting result with its tags, and each waiting message", () => {
    const meter = new BudgetMeter(undefined);
    const admitter = new RequestAdmitter(meter, { name: 'root', path: ['root'], depth: 0, id: 'root' }, undefined, undefined, 'sys', []);
    const messages: Message[] = [{ role: 'user', content: [{ type: 'text', text: 'go' }] }];
    const base = Buffer.byteLength('sys') + Buffer.byteLength('[]') + Buffer.byteLength(JSON.stringify(messages[0]));
    const inbox: AgentResult[] = [];
    expect(admitter.nextRequestBytes(messages, inbox, [])).toBe(base);
    const result = (name: string, text: string, reason?: string): AgentResult => ({
      name,
      outcome: 'replied',
      text,
      usage: { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
      ...(reason === undefined ? {} : { reason }),
    });
    const each = (r: AgentResult): number => Buffer.byteLength(r.text) + Buffer.byteLength(r.name) + Buffer.byteLength(r.reason ?? '') + 64;
    // Appended in place, as the session's inbox is.
    const first = result('w1', 'héllo');
    inbox.push(first);
    expect(admitter.nextRequestBytes(messages, inbox, [])).toBe(base + each(first));
    const second = result('w2', 'x'.repeat(100), 'ended early');
    inbox.push(second);
    expect(admitter.nextRequestBytes(messages, inbox, ['a message ✓'])).toBe(base + each(first) + each(second) + Buffer.byteLength('a message ✓'));
    // Delivered: the inbox is a new, empty array, and what it held is no longer counted.
    expect(admitter.nextRequestBytes(messages, [], [])).toBe(base);
    // A shorter list in its place (another array) is measured afresh.
    expect(admitter.nextRequestBytes(messages, [second], [])).toBe(base + each(second));
  });
});
