import { describe, expect, it } from 'vitest';
import { ROOT_AGENT } from '../../../src/engine/identity.js';
import type { ModelRequest, StreamSink } from '../../../src/engine/types.js';
import { scriptedProvider } from '../../../src/testing/index.js';
import { sleep, startTraced, until } from '../../support/helpers.js';

/** A sink that keeps every text delta, so a test can tell whether the response began at all. */
function textSink(): StreamSink & { texts: string[] } {
  const texts: string[] = [];
  return { texts, text: (delta) => texts.push(delta), toolUseStart: () => undefined, toolInputDelta: () => undefined, heartbeat: () => undefined };
}

function requestWith(signal: AbortSignal): ModelRequest {
  return { agent: ROOT_AGENT, system: '', messages: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }], tools: [], signal };
}

const never = new Promise<never>(() => undefined);

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

  it('stops waiting when its request is aborted, with the abort reason, and sends nothing', async () => {
    const provider = scriptedProvider({ agents: { root: [{ text: 'hi', after: never }] } });
    const controller = new AbortController();
    const sink = textSink();
    const pending = provider.stream(requestWith(controller.signal), sink);
    await sleep(20);
    const reason = new Error('cancelled by the test');
    controller.abort(reason);
    // A provider that kept waiting resolves the race with 'still waiting': the assertion says so at once.
    await expect(Promise.race([pending, sleep(1000).then(() => 'still waiting')])).rejects.toBe(reason);
    expect(sink.texts).toEqual([]);
  });

  it('refuses at once a request whose signal was aborted before it was played', async () => {
    const provider = scriptedProvider({ agents: { root: [{ text: 'hi', after: never }] } });
    const reason = new Error('aborted already');
    const pending = provider.stream(requestWith(AbortSignal.abort(reason)), textSink());
    await expect(Promise.race([pending, sleep(1000).then(() => 'still waiting')])).rejects.toBe(reason);
  });

  it('fails the request with the error of a promise that rejects', async () => {
    const failure = new Error('the gate broke');
    const provider = scriptedProvider({ agents: { root: [{ text: 'hi', after: Promise.reject(failure) }] } });
    const sink = textSink();
    await expect(provider.stream(requestWith(new AbortController().signal), sink)).rejects.toBe(failure);
    expect(sink.texts).toEqual([]);
  });
});
