import { describe, expect, it } from 'vitest';
import { deadlines } from '../../../src/engine/deadlines.js';
import { ProviderError, StallError } from '../../../src/engine/model/errors.js';
import { runModelStep, sleep, StepCancellation, type StreamModelInput } from '../../../src/engine/model/streamModel.js';
import type { AgentIdentity, ModelRequest, ModelResponse, Provider, SessionListener, StreamSink, Usage } from '../../../src/engine/types.js';
import { ScriptedProvider, type ScriptedStep } from '../../../src/testing/scriptedProvider.js';

/**
 * One model step (`runModelStep`) as a provider and a host see it: what reaches the listener and the
 * usage callback, when the watchdog calls a stream stalled, what a step gives up with, what the
 * provider is handed, and how a response the session cannot take is refused or mended. Expected
 * values are literals and arithmetic; providers written here stand in for a host's own or for how
 * the SDK behaves on an abort.
 */

const ROOT: AgentIdentity = { name: 'root', path: ['root'], depth: 0, id: 'root' };
const NO_RETRY = { maxRetries: 0, baseDelayMs: 1, maxDelayMs: 1 };
const usage = (inputTokens: number, outputTokens: number, cacheCreationInputTokens: number, cacheReadInputTokens: number): Usage => ({
  inputTokens,
  outputTokens,
  cacheCreationInputTokens,
  cacheReadInputTokens,
});
const response = (content: ModelResponse['content'], extra: Partial<ModelResponse> = {}): ModelResponse => ({
  content,
  stopReason: 'end_turn',
  usage: usage(1, 1, 0, 0),
  incompleteToolUseIds: [],
  ...extra,
});

/** A provider of one fixed answer, written as a host's own provider would be. */
function answering(answer: ModelResponse | ((request: ModelRequest, sink: StreamSink) => Promise<ModelResponse>)): Provider {
  return { name: 'host', stream: async (request, sink) => (typeof answer === 'function' ? answer(request, sink) : answer) };
}

function step(provider: Provider, extra: Partial<StreamModelInput> = {}, cancellation = new StepCancellation()): Promise<ModelResponse> {
  return runModelStep(
    {
      provider,
      request: { agent: ROOT, system: '', messages: [{ role: 'user', content: [{ type: 'text', text: 'go' }] }], tools: [] },
      listener: undefined,
      retry: NO_RETRY,
      stallTimeoutMs: 60_000,
      ...extra,
    },
    cancellation,
  );
}

const scripted = (steps: ScriptedStep[]): ScriptedProvider => new ScriptedProvider({ agents: { root: steps } });

/** Whatever a promise settles with, as a value. */
async function settled(promise: Promise<unknown>): Promise<unknown> {
  try {
    return { resolved: await promise };
  } catch (error) {
    return error;
  }
}

describe('what a step tells the listener', () => {
  it('text, the start of a call and its input deltas reach the listener, with the agent', async () => {
    const seen: string[] = [];
    const listener: SessionListener = {
      onTextDelta: (agent, delta) => void seen.push(`${agent.id} text ${delta}`),
      onToolUseStart: (agent, id, name) => void seen.push(`${agent.id} start ${id} ${name}`),
      onToolInputDelta: (agent, id, json) => void seen.push(`${agent.id} input ${id} ${json}`),
    };
    await step(scripted([{ text: 'hi', calls: [{ id: 'toolu_1', name: 'read_file', input: { p: 1 } }], chunkSize: 4 }]), { listener });
    expect(seen).toEqual(['root text hi', 'root start toolu_1 read_file', 'root input toolu_1 {"p"', 'root input toolu_1 :1}']);
  });

  it('a listener without the delta callbacks, or none at all, and no usage callback: the step still completes', async () => {
    const calls = [{ id: 'toolu_1', name: 'read_file', input: { p: 1 } }];
    const withEmpty = await step(scripted([{ text: 'hi', calls }]), { listener: {} });
    expect(withEmpty.content).toEqual([
      { type: 'text', text: 'hi' },
      { type: 'tool_use', id: 'toolu_1', name: 'read_file', input: { p: 1 } },
    ]);
    const withNone = await step(scripted([{ text: 'hi', usage: { inputTokens: 5, outputTokens: 3 } }]));
    expect(withNone.usage).toMatchObject({ inputTokens: 5, outputTokens: 3 });
  });
});

describe('usage as the stream reports it', () => {
  it('each cumulative report adds what grew, kind by kind; a report that adds nothing is not passed on', async () => {
    const added: Usage[] = [];
    const provider = answering(async (_request, sink) => {
      sink.usage?.(usage(4, 4, 0, 0));
      sink.usage?.(usage(4, 9, 5, 0));
      sink.usage?.(usage(4, 12, 5, 3));
      sink.usage?.(usage(4, 12, 5, 3));
      // A report that says less of one kind than before adds nothing of it.
      sink.usage?.(usage(4, 12, 2, 1));
      return response([{ type: 'text', text: 'done' }], { usage: usage(4, 15, 5, 3) });
    });
    await step(provider, { onUsage: (u) => void added.push(u) });
    expect(added).toEqual([usage(4, 4, 0, 0), usage(0, 5, 5, 0), usage(0, 3, 0, 3), usage(0, 3, 0, 0)]);
  });
});

describe('the stall watchdog', () => {
  it('a stream that keeps sending text, input or only heartbeats, each gap shorter than the stall limit, is not a stall', async () => {
    // 16 events 40 ms apart: over 600 ms in all, against a 300 ms limit.
    const texts = { content: ['0123456789abcdef'], chunkSize: 1, chunkDelayMs: 40 };
    const input = { calls: [{ id: 'toolu_1', name: 'read_file', input: { path: 'abcdefghij' } }], chunkSize: 2, chunkDelayMs: 40 };
    const heartbeats = { content: Array.from({ length: 16 }, () => ''), chunkDelayMs: 40 };
    for (const [what, scriptStep] of Object.entries({ texts, input, heartbeats })) {
      const outcome = await settled(step(scripted([scriptStep]), { stallTimeoutMs: 300 }));
      expect(outcome, what).toMatchObject({ resolved: { stopReason: expect.any(String) } });
    }
  });

  it('after a sign of life the watchdog waits the rest of the limit from it, not a whole limit more', async () => {
    // Limit 300 ms: one delta at 150 ms, then 400 ms of silence. Measured from the delta, the stall
    // comes at 450 ms, before the answer at 550 ms; a watchdog re-armed for a whole limit would
    // next look at 600 ms and see the answer first.
    const provider = answering(async (request, sink) => {
      await sleep(150, request.signal);
      sink.text('a');
      await sleep(400, request.signal);
      return response([{ type: 'text', text: 'a' }]);
    });
    const error = await settled(step(provider, { stallTimeoutMs: 300 }));
    expect(error).toBeInstanceOf(ProviderError);
    expect((error as Error).message).toBe('model stream stalled: no event for 300 ms (gave up after 1 attempts)');
  });

  it('a stalled stream is a stall even when the provider ignores the abort and answers later', async () => {
    const provider = answering(async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      return response([{ type: 'text', text: 'too late' }]);
    });
    const error = await settled(step(provider, { stallTimeoutMs: 100 }));
    expect((error as Error).message).toBe('model stream stalled: no event for 100 ms (gave up after 1 attempts)');
    expect((error as ProviderError).cause).toBeInstanceOf(StallError);
  });

  it('a stalled stream is a stall even when the provider rejects the abort with an error of its own (as the SDK does)', async () => {
    const provider = answering(
      (request) => new Promise((_, reject) => request.signal.addEventListener('abort', () => reject(new Error('Request was aborted.')), { once: true })),
    );
    const error = await settled(step(provider, { stallTimeoutMs: 100 }));
    expect((error as Error).message).toBe('model stream stalled: no event for 100 ms (gave up after 1 attempts)');
    expect(error).toMatchObject({ kind: 'stall', retryable: false });
  });

  it('a step that ends leaves no watchdog deadline behind, answered, cancelled before it began, or cancelled on a provider that never settles', async () => {
    const before = deadlines.size;
    await step(scripted([{ text: 'hi' }]));
    expect(deadlines.size, 'after an answer').toBe(before);

    const never = answering(() => new Promise<never>(() => undefined));
    const early = new StepCancellation();
    early.abort(new Error('cancelled first'));
    const cancelledFirst = step(never, {}, early);
    void cancelledFirst.catch(() => undefined);
    expect(deadlines.size, 'a step cancelled before it began').toBe(before);

    const late = new StepCancellation();
    const cancelledLater = step(never, {}, late);
    void cancelledLater.catch(() => undefined);
    expect(deadlines.size).toBe(before + 1);
    late.abort(new Error('cancelled'));
    expect(deadlines.size, 'a step cancelled while its provider hangs').toBe(before);
  });
});

describe('cancelling and giving up', () => {
  it('a cancelled step ends with the reason it was cancelled with, not the error its provider throws on the abort', async () => {
    const reason = new Error('the user cancelled');
    const provider = answering(
      (request) => new Promise((_, reject) => request.signal.addEventListener('abort', () => reject(new Error('Request was aborted.')), { once: true })),
    );
    const cancellation = new StepCancellation();
    const pending = step(provider, {}, cancellation);
    cancellation.abort(reason);
    await expect(pending).rejects.toBe(reason);
  });

  it('retries run out: one fault naming the attempts, of the last fault’s kind, not retried, with it as the cause', async () => {
    const retries: string[] = [];
    const provider = answering(async () => {
      throw new ProviderError('overloaded_error: Overloaded', { retryable: true, kind: 'stream' });
    });
    const error = await settled(
      step(provider, {
        retry: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 2 },
        // No onRetry of the step's own, and a listener without one: retries still happen.
        listener: {},
      }),
    );
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ message: 'overloaded_error: Overloaded (gave up after 3 attempts)', kind: 'stream', retryable: false });
    expect((error as ProviderError).cause).toMatchObject({ message: 'overloaded_error: Overloaded', retryable: true });
    const withCallbacks = await settled(
      step(provider, {
        retry: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 2 },
        onRetry: (info) => void retries.push(`step ${info.attempt} ${info.reason}`),
        listener: { onRetry: (agent, info) => void retries.push(`${agent.id} ${info.attempt}`) },
      }),
    );
    expect(withCallbacks).toMatchObject({ message: 'overloaded_error: Overloaded (gave up after 3 attempts)' });
    expect(retries).toEqual(['step 1 overloaded_error: Overloaded', 'root 1', 'step 2 overloaded_error: Overloaded', 'root 2']);
  });

  it('a new cancellation can be aborted before any attempt has begun', () => {
    const cancellation = new StepCancellation();
    expect(() => cancellation.abort('before anything')).not.toThrow();
    expect(cancellation.next().isAborted).toBe(true);
  });
});

describe('what the provider is handed', () => {
  it('the model a request names, and no model key at all when it names none', async () => {
    const seen: ModelRequest[] = [];
    const inner = scripted([{ text: 'a' }, { text: 'b' }]);
    const provider: Provider = {
      name: 'recording',
      stream: (request, sink) => {
        seen.push(request);
        return inner.stream(request, sink);
      },
    };
    const request = { agent: ROOT, system: 's', messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'go' }] }], tools: [] };
    const input = { provider, listener: undefined, retry: NO_RETRY, stallTimeoutMs: 60_000 };
    await runModelStep({ ...input, request: { ...request, model: 'claude-other' } }, new StepCancellation());
    await runModelStep({ ...input, request }, new StepCancellation());
    expect(seen[0]?.model).toBe('claude-other');
    expect(seen[1] && 'model' in seen[1]).toBe(false);
    expect(seen[1]?.system).toBe('s');
  });
});

describe('a response the session cannot take as it is', () => {
  it('an unknown stop reason fails the step at once, named', async () => {
    const error = await settled(step(answering(response([{ type: 'text', text: 'x' }], { stopReason: 'weird' as never }))));
    expect(error).toBeInstanceOf(ProviderError);
    expect(error).toMatchObject({ message: 'model returned an unknown stop reason: weird', retryable: false, kind: 'fatal' });
  });

  it('a tool_use id given twice fails the step, named; text blocks beside calls are fine', async () => {
    const call = { type: 'tool_use' as const, id: 'toolu_same', name: 'read_file', input: {} };
    const twice = await settled(step(answering(response([call, { ...call, name: 'write_file' }], { stopReason: 'tool_use' }))));
    expect(twice).toMatchObject({ message: 'model returned tool_use id toolu_same twice', retryable: false });
    const ok = await step(
      answering(
        response(
          [
            { type: 'text', text: 'one' },
            { type: 'text', text: 'two' },
            { ...call, id: 'toolu_a' },
            { ...call, id: 'toolu_b' },
          ],
          { stopReason: 'tool_use' },
        ),
      ),
    );
    expect(ok.content.map((b) => (b.type === 'text' ? b.text : b.id))).toEqual(['one', 'two', 'toolu_a', 'toolu_b']);
  });

  it('a call whose input nests past 64 levels enters with {} and a reason; its siblings, and reasons the provider gave, are kept', async () => {
    let deep: unknown = {};
    for (let i = 0; i < 70; i++) deep = { d: deep };
    const answer = response(
      [
        { type: 'text', text: 'calling' },
        { type: 'tool_use', id: 'toolu_deep', name: 'read_file', input: { d: deep } },
        { type: 'tool_use', id: 'toolu_flat', name: 'read_file', input: { path: 'a' } },
        { type: 'tool_use', id: 'toolu_bad', name: 'read_file', input: {} },
      ],
      { stopReason: 'tool_use', invalidToolInputs: { toolu_bad: 'its input was not a JSON object' } },
    );
    const result = await step(answering(answer));
    expect(result.content).toEqual([
      { type: 'text', text: 'calling' },
      { type: 'tool_use', id: 'toolu_deep', name: 'read_file', input: {} },
      { type: 'tool_use', id: 'toolu_flat', name: 'read_file', input: { path: 'a' } },
      { type: 'tool_use', id: 'toolu_bad', name: 'read_file', input: {} },
    ]);
    expect(result.invalidToolInputs).toEqual({
      toolu_bad: 'its input was not a JSON object',
      toolu_deep: 'its input is nested more than 64 levels deep',
    });
  });

  it('only the refused call loses its input: a text block never gains one, even beside a call whose id is the text "undefined"', async () => {
    let deep: unknown = [];
    for (let i = 0; i < 70; i++) deep = [deep];
    const answer = response(
      [
        { type: 'text', text: 'calling' },
        { type: 'tool_use', id: 'undefined', name: 'read_file', input: { d: deep } },
      ],
      { stopReason: 'tool_use' },
    );
    const result = await step(answering(answer));
    expect(result.content).toEqual([
      { type: 'text', text: 'calling' },
      { type: 'tool_use', id: 'undefined', name: 'read_file', input: {} },
    ]);
  });

  it('a lone surrogate in a call’s id or name becomes U+FFFD, in the call, the cut-off ids and the invalid-input reasons alike', async () => {
    const answer = response(
      [
        { type: 'text', text: 'calling' },
        { type: 'tool_use', id: 'toolu_\ud800a', name: 'read_file', input: { path: 'x' } },
        { type: 'tool_use', id: 'toolu_b', name: 'read\udc00', input: {} },
        { type: 'tool_use', id: 'toolu_c', name: 'read_file', input: {} },
      ],
      { stopReason: 'max_tokens', incompleteToolUseIds: ['toolu_c'], invalidToolInputs: { 'toolu_\ud800a': 'its input was not valid JSON' } },
    );
    const result = await step(answering(answer));
    expect(result).toEqual({
      content: [
        { type: 'text', text: 'calling' },
        { type: 'tool_use', id: 'toolu_\uFFFDa', name: 'read_file', input: { path: 'x' } },
        { type: 'tool_use', id: 'toolu_b', name: 'read\uFFFD', input: {} },
        { type: 'tool_use', id: 'toolu_c', name: 'read_file', input: {} },
      ],
      stopReason: 'max_tokens',
      usage: usage(1, 1, 0, 0),
      incompleteToolUseIds: ['toolu_c'],
      invalidToolInputs: { 'toolu_\uFFFDa': 'its input was not valid JSON' },
    });
    // The same with the mended id among the cut-off ones, and no invalid inputs at all.
    const cutOff = await step(
      answering(
        response([{ type: 'tool_use', id: 'toolu_\udfffz', name: 'read_file', input: {} }], {
          stopReason: 'max_tokens',
          incompleteToolUseIds: ['toolu_\udfffz'],
        }),
      ),
    );
    expect(cutOff.content).toEqual([{ type: 'tool_use', id: 'toolu_\uFFFDz', name: 'read_file', input: {} }]);
    expect(cutOff.incompleteToolUseIds).toEqual(['toolu_\uFFFDz']);
    expect('invalidToolInputs' in cutOff).toBe(false);
  });
});
