import { createWebSocketInspector, createWebSocketReceiver, type StatelyInspectionEvent } from '@statelyai/inspect';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { createSessionActor, waitForSettled, type SessionInput } from '../../../src/index.js';
import { redact, startLiveInspector, type LiveInspector } from '../../../src/watch/inspect/liveInspector.js';
import { MemoryLogSink, ScriptedProvider, type ScriptedProviderOptions, type ScriptedStep } from '../../../src/testing/index.js';

const SECRET = 'sk-ant-do-not-send-0123456789';

/** A provider that, like AnthropicProvider, holds a client carrying an API key. */
class KeyedProvider extends ScriptedProvider {
  override readonly model = 'scripted-model';
  readonly client = { apiKey: SECRET, baseURL: 'http://127.0.0.1:1' };
}

/** One turn of the root: it asks a reader, waits, and answers. */
const rootTurn: readonly ScriptedStep[] = [
  { text: 'Asking a reader.', calls: [{ name: 'agent', input: { name: 'reader', task: 'Read a.md' } }] },
  { text: 'Waiting.' },
  { text: 'a.md says hello.' },
];
const readerTurn: readonly ScriptedStep[] = [{ calls: [{ name: 'reply', input: { result: 'hello' } }] }];
const script: ScriptedProviderOptions['agents'] = { root: rootTurn, reader: readerTurn };

type Wire = StatelyInspectionEvent & { snapshot?: { status?: string; value?: unknown; context?: Record<string, unknown> }; event?: { type: string } };

/** A `ws` client that collects every message, as text and parsed. */
async function collect(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ socket: WebSocket; texts: string[]; messages: Wire[]; closed: Promise<void> }> {
  const socket = new WebSocket(url, { headers });
  const texts: string[] = [];
  const messages: Wire[] = [];
  socket.on('message', (data) => {
    const text = String(data);
    texts.push(text);
    messages.push(JSON.parse(text) as Wire);
  });
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once('open', () => resolve());
    socket.once('error', reject);
  });
  return { socket, texts, messages, closed };
}

async function eventually(check: () => boolean, what: string, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/**
 * Waits for the `user.message` event carrying `text` and returns its index in `messages`: the
 * messages before it are everything the viewer was sent before that event.
 */
async function liveMarker(messages: Wire[], text: string): Promise<number> {
  const isMarker = (m: Wire): boolean =>
    m.type === '@xstate.event' && m.event?.type === 'user.message' && (m as { event: { text?: string } }).event.text === text;
  await eventually(() => messages.some(isMarker), `the live event "${text}"`);
  return messages.findIndex(isMarker);
}

function tcpHandles(): number {
  return process.getActiveResourcesInfo().filter((r) => r === 'TCPServerWrap' || r === 'TCPSocketWrap').length;
}

/** Runs the scripted root + reader session with the inspector's observer; returns once the root settled. */
async function runSession(live: LiveInspector, input: Partial<SessionInput> = {}) {
  const provider = new KeyedProvider({ agents: script });
  const root = createSessionActor({ provider, logs: new MemoryLogSink(), ...input }, { inspect: live.inspect });
  root.start();
  root.send({ type: 'user.message', text: 'What does a.md say?' });
  const settled = await waitForSettled(root);
  return { root, settled };
}

const started: LiveInspector[] = [];
afterEach(async () => {
  for (const live of started.splice(0)) await live.stop();
});
async function start(options: Parameters<typeof startLiveInspector>[0] = { port: 0 }): Promise<LiveInspector> {
  const live = await startLiveInspector(options);
  started.push(live);
  return live;
}

describe('startLiveInspector', () => {
  it('streams actor, snapshot and event messages of every session in the @statelyai/inspect wire format', async () => {
    const live = await start();
    expect(live.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(live.wsUrl).toBe(live.url.replace('http:', 'ws:'));
    expect(live.instructions).toContain(live.url);

    const client = await collect(live.wsUrl);
    const { root, settled } = await runSession(live);
    expect(settled.value).toBe('readyForUser');
    const rootActorMessage = () => client.messages.find((m) => m.type === '@xstate.actor' && m.name === 'root');
    const snapshotsOf = (sessionId: string | undefined) => client.messages.filter((m): m is Wire => m.type === '@xstate.snapshot' && m.sessionId === sessionId);
    await eventually(
      () => snapshotsOf(rootActorMessage()?.sessionId).some((m) => m.snapshot?.value === 'readyForUser' && m.snapshot.context?.messageCount === 6),
      'the root settling',
    );

    // Every message has the package's envelope.
    for (const m of client.messages) {
      expect(['@xstate.actor', '@xstate.snapshot', '@xstate.event']).toContain(m.type);
      expect(m._version).toMatch(/^\d+\.\d+\.\d+/);
      expect(typeof m.sessionId).toBe('string');
      expect(Number(m.createdAt)).toBeGreaterThan(0);
    }

    // Actors: the root (named by its agent id, with the machine definition) and the reader, its child: the crew that holds the reader is not shown.
    const rootActor = rootActorMessage();
    expect(rootActor).toBeDefined();
    expect(rootActor?.sessionId).toBe(root.sessionId);
    const definition = JSON.parse((rootActor as { definition: string }).definition) as { id: string; initial: string; states: Record<string, unknown> };
    expect(definition.id).toBe('session');
    expect(definition.initial).toBe('starting');
    expect(Object.keys(definition.states)).toEqual(expect.arrayContaining(['streaming', 'dispatchingBatch', 'replied']));
    const reader = client.messages.find((m) => m.type === '@xstate.actor' && m.name === 'root/reader') as Extract<Wire, { type: '@xstate.actor' }> | undefined;
    expect(reader).toBeDefined();
    expect(reader?.parentId).toBe(root.sessionId);
    expect(reader?.rootId).toBe(root.sessionId);
    const actors = client.messages.filter((m): m is Extract<Wire, { type: '@xstate.actor' }> => m.type === '@xstate.actor');
    expect(actors.filter((m) => (JSON.parse(m.definition ?? '{}') as { id?: string }).id === 'crew')).toEqual([]);
    const machines = new Set(actors.filter((m) => m.snapshot && typeof m.snapshot === 'object' && 'value' in m.snapshot).map((m) => m.name));
    expect([...machines].sort()).toEqual(['root', 'root/reader']);
    // Nothing is said about an actor that was not shown: every snapshot and event is of a shown actor.
    const shownIds = new Set(actors.map((m) => m.sessionId));
    expect(client.messages.filter((m) => !shownIds.has(m.sessionId))).toEqual([]);

    // Snapshots: each session's states in order, with a summarised context.
    const values = (sessionId: string | undefined) =>
      snapshotsOf(sessionId)
        .map((m) => m.snapshot?.value)
        .filter((v, i, all) => v !== all[i - 1]);
    expect(values(root.sessionId)).toEqual(['readyForUser', 'streaming', 'dispatchingBatch', 'streaming', 'readyForUser', 'streaming', 'readyForUser']);
    expect(values(reader?.sessionId)).toEqual(['starting', 'streaming', 'dispatchingBatch', 'replied']);
    expect(snapshotsOf(reader?.sessionId).at(-1)?.snapshot?.status).toBe('done');
    const context = snapshotsOf(root.sessionId).at(-1)?.snapshot?.context ?? {};
    expect(context).toMatchObject({
      agent: { id: 'root', depth: 0 },
      provider: { name: 'scripted', model: 'scripted-model' },
      steps: 1,
      spawned: 1,
      messageCount: 6,
    });
    expect(context).not.toHaveProperty('messages');
    expect(context).not.toHaveProperty('options');
    expect(context.lastMessages).toHaveLength(3);

    // Events: what each session received, with its sender.
    const eventsTo = (sessionId: string | undefined) =>
      client.messages.filter((m): m is Extract<Wire, { type: '@xstate.event' }> => m.type === '@xstate.event' && m.sessionId === sessionId);
    expect(eventsTo(root.sessionId).map((m) => m.event.type)).toEqual(
      expect.arrayContaining(['xstate.init', 'user.message', 'model.done', 'batch.drained', 'xstate.done.actor.1']),
    );
    const delivery = eventsTo(root.sessionId).find((m) => m.event.type === 'xstate.done.actor.1');
    // The reader's result comes from the reader (its crew only forwarded it).
    expect(delivery?.sourceId).toBe(reader?.sessionId);
    expect(delivery?.event).toMatchObject({ output: { name: 'reader', outcome: 'replied' } });

    // The provider's key never leaves the process, however deep it sits (the init event's input, a model request's input, a crew's input).
    expect(client.texts.join('\n')).not.toContain(SECRET);
    expect(client.texts.some((t) => t.includes('"apiKey"'))).toBe(false);
    root.stop();
  });

  it('attach: inspects nothing while no viewer is connected; a viewer sees the system as it is, then everything live', async () => {
    const live = await start();
    // Three turns, each with its sub-agent: a root whose script ran out would fail, and a message
    // sent to it then would be dropped (XState warns of a send to a stopped actor): the turns
    // after the first would show nothing for want of a session, not for want of a viewer.
    const provider = new KeyedProvider({ agents: { root: [...rootTurn, ...rootTurn, ...rootTurn], reader: [...readerTurn, ...readerTurn, ...readerTurn] } });
    const warn = vi.spyOn(console, 'warn');
    const root = createSessionActor({ provider, logs: new MemoryLogSink() });
    const settledAtRest = async (): Promise<void> => {
      const settled = await waitForSettled(root);
      expect([settled.status, settled.value, settled.context.failure]).toEqual(['active', 'readyForUser', null]);
    };
    // XState builds inspection events only for a system someone inspects: none while idle.
    const inspectSpy = vi.spyOn(root.system, 'inspect');
    const detach = live.attach(root);
    root.start();
    root.send({ type: 'user.message', text: 'What does a.md say?' });
    await settledAtRest();
    expect(inspectSpy).not.toHaveBeenCalled();

    const viewer = await collect(live.wsUrl);
    expect(inspectSpy).toHaveBeenCalledTimes(1);
    const unsubscribe = vi.spyOn(inspectSpy.mock.results[0]?.value as { unsubscribe(): void }, 'unsubscribe');

    // Live from here: the next turn, with its sub-agent. What the viewer got before its first
    // event is the system as it was when the viewer connected.
    root.send({ type: 'user.message', text: 'And again?' });
    const shown = viewer.messages.slice(0, await liveMarker(viewer.messages, 'And again?'));
    const rootSnapshots = shown.filter((m) => m.type === '@xstate.snapshot' && m.sessionId === root.sessionId);
    expect(rootSnapshots.map((m) => m.snapshot?.value)).toEqual(['readyForUser']);
    expect(shown.find((m) => m.type === '@xstate.actor' && m.sessionId === root.sessionId)).toMatchObject({ name: 'root' });
    // The finished reader is gone from the system, so it is not shown; what happened while idle is not either.
    expect(shown.some((m) => m.type === '@xstate.actor' && m.name === 'root/reader')).toBe(false);
    expect(shown.some((m) => m.type === '@xstate.event')).toBe(false);
    await settledAtRest();

    // The last viewer leaves: the system is no longer inspected, and another turn is not either.
    viewer.socket.close();
    await viewer.closed;
    await eventually(() => unsubscribe.mock.calls.length === 1, 'the unsubscription');
    root.send({ type: 'user.message', text: 'Once more?' });
    await settledAtRest();
    expect(provider.requestsOf('root')).toHaveLength(9);
    expect(inspectSpy).toHaveBeenCalledTimes(1);
    detach();
    root.stop();
    // Every message reached a live session: none was sent to a stopped actor.
    expect(warn.mock.calls.filter((args) => String(args[0]).includes('stopped actor'))).toEqual([]);
    warn.mockRestore();
  });

  it('replays actors and their latest snapshots to a viewer that connects late, and feeds createWebSocketReceiver', async () => {
    const live = await start();
    const { root } = await runSession(live);
    const late = await collect(live.wsUrl);
    const received: StatelyInspectionEvent[] = [];
    const receiver = createWebSocketReceiver({ server: live.wsUrl });
    receiver.subscribe((event) => received.push(event));
    // The package's receiver cannot be closed (the server's stop() closes it): wait until it is
    // connected, so that no assertion below can leave it half-open with no error handler.
    await eventually(() => received.some((e) => e.type === '@xstate.snapshot' && e.sessionId === root.sessionId), "the package's receiver");

    // The replay is the whole history up to the first live event: the package converts each event
    // on a timer of its own, so the replay reaches the viewer over several turns of the event loop,
    // and a live event sent now arrives after all of it.
    root.send({ type: 'user.message', text: 'And again?' });
    const firstLive = await liveMarker(late.messages, 'And again?');
    const replayed = late.messages.slice(0, firstLive);
    expect(replayed.some((m) => m.type === '@xstate.actor' && m.name === 'root/reader')).toBe(true);
    const rootSnapshots = replayed.filter((m) => m.type === '@xstate.snapshot' && m.sessionId === root.sessionId);
    expect(rootSnapshots).toHaveLength(1);
    expect((rootSnapshots[0] as Wire).snapshot?.value).toBe('readyForUser');
    // Registration comes before the snapshot; promise and callback actors (model, tools, ticks) are not replayed.
    const firstActor = replayed.findIndex((m) => m.type === '@xstate.actor' && m.sessionId === root.sessionId);
    expect(firstActor).toBeGreaterThanOrEqual(0);
    expect(firstActor).toBeLessThan(replayed.indexOf(rootSnapshots[0] as Wire));
    expect(replayed.filter((m) => m.type === '@xstate.actor').map((m) => (m as { name: string }).name)).not.toContain('model');
    await waitForSettled(root);
    root.stop();
  });

  it("relays what another process's createWebSocketInspector publishes, as the package's server does", async () => {
    const live = await start();
    const viewer = await collect(live.wsUrl);
    const publisher = createWebSocketInspector({ url: live.wsUrl });
    publisher.actor('elsewhere', { status: 'active', context: { n: 1 } });
    publisher.event('elsewhere', { type: 'poke' });
    await eventually(() => viewer.messages.some((m) => m.type === '@xstate.event' && m.sessionId === 'elsewhere'), 'the relayed event');
    expect(viewer.messages.find((m) => m.type === '@xstate.actor')).toMatchObject({ sessionId: 'elsewhere', name: 'elsewhere' });
    publisher.stop();
  });

  it('serves the page to open, and refuses WebSocket connections from other web pages', async () => {
    const live = await start();
    const response = await fetch(live.url);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toContain('text/html');
    const html = await response.text();
    expect(html).toContain('https://stately.ai/inspect');
    expect(html).toContain('@statelyai.connected');
    expect((await fetch(new URL('/nope', live.url))).status).toBe(404);

    const own = await collect(live.wsUrl, { origin: live.url.replace(/\/$/, '') });
    own.socket.close();
    await expect(collect(live.wsUrl, { origin: 'https://elsewhere.example' })).rejects.toThrow(/403/);
  });

  it('stop() closes every connection and the server, and leaves no handle open', async () => {
    // Sockets of the tests before this one (their servers are stopped) may still be closing.
    let before = tcpHandles();
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, 25));
      const now = tcpHandles();
      if (now === before) break;
      before = now;
    }
    const live = await startLiveInspector({ port: 0 });
    const client = await collect(live.wsUrl);
    await fetch(live.url);
    const { root } = await runSession(live);
    expect(tcpHandles()).toBeGreaterThan(before);
    root.stop();
    await live.stop();
    await client.closed;
    expect(client.socket.readyState).toBe(WebSocket.CLOSED);
    await expect(fetch(live.url)).rejects.toThrow();
    // Events after stop() are dropped, not thrown.
    expect(() => live.inspect({ type: '@xstate.event', event: { type: 'late' }, rootId: 'x', sourceRef: undefined, actorRef: root })).not.toThrow();
    await live.stop();
    await eventually(() => tcpHandles() <= before, 'every socket to close', 2000);
  });

  it('without a port, takes 8080 (the package default) or, when that is taken, any free port', async () => {
    const first = await start({});
    const second = await start({});
    expect(second.url).not.toBe(first.url);
    expect(new URL(second.url).port).not.toBe('8080');
    for (const live of [first, second]) expect((await fetch(live.url)).status).toBe(200);
  });

  it('an explicit port that is taken is an error naming it', async () => {
    const first = await start();
    const port = Number(new URL(first.url).port);
    await expect(startLiveInspector({ port })).rejects.toThrow(`port ${port} on 127.0.0.1 is in use`);
  });
});

describe('redact', () => {
  it('keeps data, drops plumbing and never copies credentials', () => {
    const cycle: Record<string, unknown> = { name: 'loop' };
    cycle.self = cycle;
    const value = {
      provider: { name: 'anthropic', model: 'claude-x', client: { apiKey: SECRET } },
      nested: { deeper: { apiKey: SECRET, authToken: SECRET, headers: { 'x-api-key': SECRET } } },
      tools: [{ name: 'read_file', input: { parse() {} }, run() {} }],
      logs: { write() {} },
      signal: new AbortController().signal,
      results: new Map([['toolu_1', { ok: true }]]),
      seen: new Set(['a']),
      when: new Date(0),
      count: 3,
      nan: Number.NaN,
      fn() {},
      cycle,
      request: { messages: [1, 2, 3, 4, 5].map((i) => ({ role: 'user', content: `m${i}` })) },
    };
    const copy = redact(value);
    expect(JSON.stringify(copy)).not.toContain(SECRET);
    expect(copy).toEqual({
      provider: { name: 'anthropic', model: 'claude-x' },
      nested: { deeper: { apiKey: '[redacted]', authToken: '[redacted]', headers: '[redacted]' } },
      tools: ['read_file'],
      results: { toolu_1: { ok: true } },
      seen: ['a'],
      when: '1970-01-01T00:00:00.000Z',
      count: 3,
      nan: null,
      cycle: { name: 'loop', self: '[circular]' },
      request: { messages: ['[2 earlier messages]', { role: 'user', content: 'm3' }, { role: 'user', content: 'm4' }, { role: 'user', content: 'm5' }] },
    });
  });
});
