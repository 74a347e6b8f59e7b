import { readFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createSessionActor, MemoryLogSink, type ModelRequest, type SessionActor } from '../../../src/index.js';
import { AnthropicProvider } from '../../../src/providers/anthropic.js';
import { ScriptedProvider, type Script } from '../../../src/testing/index.js';
import { TraceRecorder } from '../../../src/watch/trace/recorder.js';
import { responseEvents, scriptedHandler, startAnthropicServer, type AnthropicTestServer } from '../../support/anthropicServer.js';
import { untilSettled, withinSessionWait } from '../../support/helpers.js';

/**
 * Contract rules checked with oracles that share nothing with `src/`: requests are counted where
 * the model receives them, lengths are checked by arithmetic, tags against CONTRACT §4's literal
 * strings. Each test is named for the behaviour a mutation of the code once broke unseen.
 */

const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** The text of the last user message of a request (what the model was just told). */
function lastUserText(request: ModelRequest): string {
  const last = request.messages.at(-1);
  if (last?.role !== 'user') return '';
  return last.content.map((block) => (block.type === 'text' ? block.text : '')).join('');
}

/** Keeps the requests each agent (by name) made, as the model saw them. */
function countingScripts(scripts: Record<string, (index: number, request: ModelRequest) => ReturnType<Extract<Script, (...args: never[]) => unknown>>>) {
  const requests = new Map<string, ModelRequest[]>();
  const agents: Record<string, Script> = {};
  for (const [name, step] of Object.entries(scripts)) {
    agents[name] = (request, index) => {
      // A copy: the session appends to its history in place after the request.
      requests.set(name, [...(requests.get(name) ?? []), { ...request, messages: structuredClone(request.messages) }]);
      return step(index, request);
    };
  }
  return { agents, requests };
}

interface Tree {
  readonly children?: Record<string, { getSnapshot(): unknown } | undefined>;
  readonly context?: { readonly agent?: { readonly name?: string } };
}

/** The names of the sessions in an actor tree (through whatever actors hold them), as XState keeps it. */
function liveSessions(children: Tree['children']): string[] {
  return Object.values(children ?? {}).flatMap((child) => {
    const snapshot = child?.getSnapshot() as Tree | undefined;
    const name = snapshot?.context?.agent?.name;
    return name !== undefined ? [name, ...liveSessions(snapshot?.children)] : liveSessions(snapshot?.children);
  });
}

async function settle(actor: SessionActor): Promise<void> {
  actor.start();
  await untilSettled(actor);
  cleanups.push(() => actor.stop());
}

describe('contract oracles', () => {
  it('a nudged continuation is a step: a turn of truncated answers makes exactly max-steps requests (CONTRACT §6)', async () => {
    for (const maxSteps of [1, 2, 3]) {
      const { agents, requests } = countingScripts({ root: () => ({ text: 'cut', stopReason: 'max_tokens' }) });
      await settle(createSessionActor({ provider: new ScriptedProvider({ agents }), task: 'go', maxSteps, truncationBudget: 10 }));
      expect(requests.get('root')?.length, `max-steps ${maxSteps}`).toBe(maxSteps);
    }
  });

  it('a sub-agent nudged to the step cap delivers the literal step-cap tag', async () => {
    const { agents, requests } = countingScripts({
      root: (index) => (index === 0 ? { calls: [{ name: 'agent', input: { name: 'w', task: 'work' } }] } : { text: 'ok' }),
      w: () => ({ text: 'still going', stopReason: 'max_tokens' }),
    });
    await settle(createSessionActor({ provider: new ScriptedProvider({ agents }), task: 'go', maxSteps: 2, truncationBudget: 10 }));
    expect(requests.get('w')).toHaveLength(2);
    expect(
      requests
        .get('root')
        ?.map(lastUserText)
        .some((text) => text.includes("[agent 'w' hit the step cap]")),
    ).toBe(true);
  });

  it('a clipped reply is at most the reply cap, marker included, at every cap (CONTRACT §3)', async () => {
    const payload = `head-${'x'.repeat(3000)}-tail`;
    for (const replyCap of [40, 41, 57, 100, 1000]) {
      const { agents, requests } = countingScripts({
        root: (index) => (index === 0 ? { calls: [{ name: 'agent', input: { name: 'w', task: 'work' } }] } : { text: 'ok' }),
        w: () => ({ calls: [{ name: 'reply', input: { result: payload } }] }),
      });
      await settle(createSessionActor({ provider: new ScriptedProvider({ agents }), task: 'go', replyCap }));
      const tag = "[agent 'w' replied]\n";
      const inbox =
        requests
          .get('root')
          ?.map(lastUserText)
          .find((text) => text.includes(tag)) ?? '';
      const delivered = inbox.slice(inbox.indexOf(tag) + tag.length);
      expect(delivered.length, `reply cap ${replyCap}: ${JSON.stringify(delivered)}`).toBeLessThanOrEqual(replyCap);
      // Middle elision: the head and the tail survive (where the cap leaves room beside the marker).
      if (replyCap >= 100) {
        expect(delivered.startsWith('head-'), delivered).toBe(true);
        expect(delivered.endsWith('-tail'), delivered).toBe(true);
      }
    }
  });

  it('a finished sub-agent is stopped at once, not kept alive until its last sibling finishes', async () => {
    const { agents } = countingScripts({
      root: (index) =>
        index === 0
          ? {
              calls: [
                { name: 'agent', input: { name: 'quick', task: 'a' } },
                { name: 'agent', input: { name: 'slow', task: 'b' } },
              ],
            }
          : { text: 'ok' },
      quick: () => ({ calls: [{ name: 'reply', input: { result: 'q' } }] }),
      slow: () => ({ calls: [{ name: 'reply', input: { result: 's' } }], delayMs: 400 }),
    });
    const actor = createSessionActor({ provider: new ScriptedProvider({ agents }), task: 'go' });
    // The first sub-agent to stop, as XState reports it: with the bug, both stop together at the end.
    let firstStopped: ((name: string) => void) | undefined;
    const stopped = new Promise<string>((resolve) => (firstStopped = resolve));
    const sub = actor.system.inspect((event) => {
      if (event.type !== '@xstate.snapshot' || event.actorRef === actor) return;
      const snapshot = event.snapshot as { status?: string; context?: { agent?: { name?: string } } };
      const name = snapshot.context?.agent?.name;
      if (name !== undefined && (snapshot.status === 'stopped' || snapshot.status === 'done')) firstStopped?.(name);
    });
    cleanups.push(() => sub.unsubscribe());
    actor.start();
    cleanups.push(() => actor.stop());
    expect(await withinSessionWait(stopped, () => 'no sub-agent stopped')).toBe('quick');
    // While the slow sibling still answers, the quick one is gone from the tree.
    expect(liveSessions(actor.getSnapshot().children)).toEqual(['slow']);
    await untilSettled(actor);
  });

  it('the trace keeps a delivery whose text is empty', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-oracle-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'trace.jsonl');
    const recorder = new TraceRecorder({ file });
    const { agents } = countingScripts({
      root: (index) => (index === 0 ? { calls: [{ name: 'agent', input: { name: 'mute', task: 'a' } }] } : { text: 'ok' }),
      mute: () => ({ calls: [{ name: 'reply', input: { result: '' } }] }),
    });
    const actor = createSessionActor({ provider: new ScriptedProvider({ agents }), task: 'go' }, { inspect: recorder.inspect });
    await settle(actor);
    recorder.close();
    const records = readFileSync(file, 'utf8')
      .trim()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const deliveries = records.filter((r) => r['kind'] === 'delivery');
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ name: 'mute', outcome: 'empty' });
  });

  it('an agent name of 65 characters is refused; 64 are taken (CONTRACT §2)', async () => {
    const { agents, requests } = countingScripts({
      root: (index) =>
        index === 0
          ? {
              calls: [
                { name: 'agent', input: { name: 'n'.repeat(65), task: 'a' } },
                { name: 'agent', input: { name: 'm'.repeat(64), task: 'b' } },
              ],
            }
          : { text: 'ok' },
      ['m'.repeat(64)]: () => ({ calls: [{ name: 'reply', input: { result: 'fine' } }] }),
    });
    await settle(createSessionActor({ provider: new ScriptedProvider({ agents }), task: 'go' }));
    const results = (requests.get('root')?.[1]?.messages.at(-1)?.content ?? []).flatMap((block) => (block.type === 'tool_result' ? [block] : []));
    expect(results.map((r) => r.is_error === true)).toEqual([true, false]);
    expect(requests.has('n'.repeat(65))).toBe(false);
    expect(requests.get('m'.repeat(64))).toHaveLength(1);
  });

  it('retries back off exponentially: retry k waits between half and all of base × 2^(k-1), capped', async () => {
    const delays: number[] = [];
    const base = 8;
    const agents: Record<string, Script> = { root: [{ fault: {} }, { fault: {} }, { fault: {} }, { fault: {} }, { fault: {} }, { text: 'ok' }] };
    await settle(
      createSessionActor({
        provider: new ScriptedProvider({ agents }),
        task: 'go',
        retry: { maxRetries: 5, baseDelayMs: base, maxDelayMs: 100 },
        listener: { onRetry: (_agent, info) => void delays.push(info.delayMs) },
      }),
    );
    expect(delays).toHaveLength(5);
    delays.forEach((delay, i) => {
      const ceiling = Math.min(100, base * 2 ** i);
      expect(delay, `retry ${i + 1}`).toBeGreaterThanOrEqual(ceiling / 2);
      expect(delay, `retry ${i + 1}`).toBeLessThanOrEqual(ceiling);
    });
  });
});

describe('contract oracles over the real SDK', () => {
  let server: AnthropicTestServer | undefined;
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('a stream that ends without message_stop is not a complete message: it is retried, never committed', async () => {
    const cut = responseEvents({ text: 'half an answer' }).filter((event) => event.event !== 'message_stop');
    server = await startAnthropicServer(
      scriptedHandler({
        root: [
          { kind: 'stream', events: cut },
          { kind: 'stream', events: responseEvents({ text: 'whole answer' }) },
        ],
      }),
    );
    const provider = new AnthropicProvider({ apiKey: 'test-key', baseURL: server.url, model: 'claude-test', sdkMaxRetries: 0 });
    const logs = new MemoryLogSink();
    const actor = createSessionActor({ provider, logs, task: 'go', retry: { maxRetries: 2, baseDelayMs: 1, maxDelayMs: 2 } });
    await settle(actor);
    expect(server.requests).toHaveLength(2);
    const assistant = actor.getSnapshot().context.messages.filter((m) => m.role === 'assistant');
    expect(assistant.map((m) => m.content.map((b) => (b.type === 'text' ? b.text : '')).join(''))).toEqual(['whole answer']);
  });
});
