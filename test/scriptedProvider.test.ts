import { describe, expect, it } from 'vitest';
import { sleep, startTraced, until } from './helpers.js';

/** The scripted provider's own knobs, where a test relies on them to order events. */
describe('a scripted step held `after` a promise', () => {
  it('answers only once the promise settles', async () => {
    let open = (): void => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const { actor } = startTraced({ root: [{ text: 'hi', after: gate }] }, { task: 'go' });
    await until(actor, (s) => s.value === 'streaming');
    await sleep(50);
    expect(actor.getSnapshot().value).toBe('streaming');
    open();
    const done = await until(actor, (s) => s.value === 'readyForUser' && s.context.messages.length === 2);
    expect(done.context.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'hi' }] });
  });
});
