import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, runAgent, type AgentIdentity } from '../../../src/index.js';
import { scriptedProvider } from '../../../src/testing/index.js';
import { runTraced, toolResults, until } from '../../support/helpers.js';

/** CONTRACT §5: stop reasons and provider faults the scripted provider can produce. */

const fastRetry = { maxRetries: 3, baseDelayMs: 1, maxDelayMs: 4 };

describe('stop reasons', () => {
  it('end_turn ends the root turn in readyForUser', async () => {
    const { snapshot } = await runTraced({ root: [{ text: 'done', stopReason: 'end_turn' }] }, { task: 't' });
    expect(snapshot.value).toBe('readyForUser');
  });

  it('stop_sequence ends the turn like end_turn', async () => {
    const { snapshot } = await runTraced({ root: [{ text: 'done', stopReason: 'stop_sequence' }] }, { task: 't' });
    expect(snapshot.value).toBe('readyForUser');
  });

  it('max_tokens: a call cut off mid-input is not executed and gets an error saying so; complete calls run', async () => {
    const ran: string[] = [];
    const write = defineTool({ name: 'write', description: 'w', input: z.object({ path: z.string() }), run: ({ path }) => void ran.push(path) });
    const { snapshot, provider } = await runTraced(
      {
        root: [
          {
            text: 'Writing two files.',
            calls: [
              { name: 'write', input: { path: 'a' } },
              { name: 'write', input: { path: 'b' }, cutOff: true },
            ],
          },
          { text: 'continuing' },
        ],
      },
      { task: 't', tools: [write] },
    );
    expect(ran).toEqual(['a']);
    const results = toolResults(snapshot.context.messages);
    expect(results[0]).toMatchObject({ content: '(no output)' });
    expect(results[1]).toMatchObject({ is_error: true, content: expect.stringMatching(/cut off at max_tokens.*not executed/) });
    // The assistant message is kept, and the reminder rides in the same user message as the results.
    expect(snapshot.context.messages[1]?.content[0]).toEqual({ type: 'text', text: 'Writing two files.' });
    expect(snapshot.context.messages[2]?.content.at(-1)).toMatchObject({ type: 'text', text: expect.stringMatching(/cut off/) });
    expect(provider.pairingViolations).toEqual([]);
  });

  it('max_tokens: the truncation budget is per turn', async () => {
    const cut = { text: 'cut', stopReason: 'max_tokens' as const };
    const { actor, snapshot } = await runTraced({ root: [cut, { text: 'turn one done' }, cut, { text: 'turn two done' }] }, { task: 't', truncationBudget: 1 });
    expect(snapshot.value).toBe('readyForUser');
    actor.send({ type: 'user.message', text: 'again' });
    await until(actor, (s) => s.value === 'readyForUser' && s.context.messages.length === 8);
    expect(actor.getSnapshot().context.messages.at(-1)?.content).toEqual([{ type: 'text', text: 'turn two done' }]);
  });
});

describe('provider faults', () => {
  it('an SSE error mid-stream discards the partial message and retries the step; retries are not steps', async () => {
    const deltas: string[] = [];
    const retries: number[] = [];
    const listener = {
      onTextDelta: (_a: AgentIdentity, d: string) => void deltas.push(d),
      onRetry: (_a: AgentIdentity, info: { attempt: number }) => void retries.push(info.attempt),
    };
    const { snapshot, logs } = await runTraced(
      {
        root: [{ text: 'partial text that is lost', chunkSize: 5, fault: { after: 2, message: 'overloaded_error: Overloaded' } }, { text: 'complete answer' }],
      },
      { task: 't', retry: fastRetry, listener },
    );
    expect(snapshot.value).toBe('readyForUser');
    expect(snapshot.context.messages.map((m) => m.content)).toEqual([[{ type: 'text', text: 't' }], [{ type: 'text', text: 'complete answer' }]]);
    expect(snapshot.context.steps).toBe(1);
    expect(deltas.slice(0, 2)).toEqual(['parti', 'al te']);
    expect(retries).toEqual([1]);
    expect(logs.records('root').filter((r) => r.type === 'retry')).toEqual([expect.objectContaining({ attempt: 1, reason: 'overloaded_error: Overloaded' })]);
  });

  it('HTTP 429/529 before the stream is retried with backoff', async () => {
    const { snapshot, provider } = await runTraced(
      { root: [{ fault: { status: 429, message: 'rate_limit_error' } }, { fault: { status: 529, message: 'overloaded' } }, { text: 'ok' }] },
      { task: 't', retry: fastRetry },
    );
    expect(snapshot.value).toBe('readyForUser');
    expect(provider.requests).toHaveLength(3);
  });

  it('retries are bounded: when they run out the session fails with a one-line reason', async () => {
    const overloaded = { fault: { message: 'overloaded_error' } };
    const { snapshot, provider } = await runTraced({ root: [overloaded, overloaded, overloaded] }, { task: 't', retry: { ...fastRetry, maxRetries: 2 } });
    expect(snapshot.value).toBe('failed');
    expect(snapshot.output?.reason).toBe('overloaded_error (gave up after 3 attempts)');
    expect(provider.requests).toHaveLength(3);
  });

  it('a stream that stalls is aborted and retried', async () => {
    const { snapshot, provider } = await runTraced(
      { root: [{ text: 'abc', chunkSize: 1, stallAfter: 1 }, { text: 'recovered' }] },
      { task: 't', stallTimeoutMs: 30, retry: fastRetry },
    );
    expect(snapshot.value).toBe('readyForUser');
    expect(snapshot.context.messages.at(-1)?.content).toEqual([{ type: 'text', text: 'recovered' }]);
    expect(provider.requests).toHaveLength(2);
  });

  it('401 fails the session at once, without retries', async () => {
    const { snapshot, provider } = await runTraced(
      { root: [{ fault: { retryable: false, status: 401, message: 'authentication_error: invalid x-api-key' } }, { text: 'never' }] },
      { task: 't', retry: fastRetry },
    );
    expect(snapshot.output).toMatchObject({ outcome: 'failed', reason: 'authentication_error: invalid x-api-key' });
    expect(provider.requests).toHaveLength(1);
  });

  it('a provider that throws a plain error fails the session, and the history stays valid', async () => {
    const { snapshot } = await runTraced({ root: [{ crash: 'TypeError: cannot read x of undefined' }] }, { task: 't' });
    expect(snapshot.output).toMatchObject({ outcome: 'failed', reason: 'TypeError: cannot read x of undefined' });
  });

  it('a failed sub-agent delivers its failure tag with a one-line reason to the parent', async () => {
    const { snapshot } = await runTraced(
      {
        root: [{ calls: [{ name: 'agent', input: { name: 'c', task: 't' } }] }, { text: 'wait' }, { text: 'done' }],
        c: [{ fault: { retryable: false, status: 400, message: 'invalid_request_error:\n  messages: bad' } }],
      },
      { task: 'go' },
    );
    expect(snapshot.context.messages[4]?.content).toEqual([{ type: 'text', text: "[agent 'c' failed: invalid_request_error: messages: bad]" }]);
  });

  it('text deltas reach the listener as they stream, before anything is committed', async () => {
    const seen: { delta: string; committed: number }[] = [];
    let actorRef: { getSnapshot(): { context: { messages: unknown[] } } } | undefined;
    const provider = scriptedProvider({ agents: { root: [{ text: 'abcdef', chunkSize: 2 }] } });
    const listener = {
      onTextDelta: (_a: AgentIdentity, delta: string) => void seen.push({ delta, committed: actorRef?.getSnapshot().context.messages.length ?? -1 }),
    };
    const { createSessionActor, waitForSettled } = await import('../../../src/index.js');
    const actor = createSessionActor({ provider, listener, task: 't' });
    actorRef = actor;
    actor.start();
    await waitForSettled(actor);
    expect(seen).toEqual([
      { delta: 'ab', committed: 1 },
      { delta: 'cd', committed: 1 },
      { delta: 'ef', committed: 1 },
    ]);
    expect(actor.getSnapshot().context.messages).toHaveLength(2);
  });

  it('runAgent returns the failure reason of a failed root', async () => {
    const provider = scriptedProvider({ agents: { root: [{ text: 'no', stopReason: 'refusal' }] } });
    const result = await runAgent('t', { provider });
    expect(result.state).toBe('failed');
    expect(result.reason).toMatch(/refus/);
  });
});
