import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInspector, type StatelyInspectionEvent } from '@statelyai/inspect';
import type { AnyActorRef, InspectionEvent } from 'xstate';
import { WebSocket, WebSocketServer } from 'ws';
import { actorsOf, standIn } from '../../engine/actors.js';
import { sessionOf } from '../observe/decoder.js';
import { bridgePage } from './bridgePage.js';
import { CrewHider } from './crewHider.js';

/**
 * Live inspection of a running exarch tree with `@statelyai/inspect`, for `exarch run --inspect`
 * and `exarch demo --inspect`.
 *
 * `@statelyai/inspect` turns XState inspection events into its wire format (`StatelyInspectionEvent`:
 * `@xstate.actor`, `@xstate.snapshot`, `@xstate.event`, as JSON) and hands them to an adapter.
 * Its Node setup is two pieces: `createInspectorServer()` (`@statelyai/inspect/server`), an HTTP +
 * WebSocket relay on port 8080 that serves a page embedding the hosted Stately inspector
 * (https://stately.ai/inspect) and forwards every message it receives to the page, and
 * `createWebSocketInspector()`, a WebSocket client that the app uses to send its events to that relay.
 *
 * Here the relay and the app are one process, so the split is: `createInspector` (the package's
 * converter) with our own adapter, which hands each event straight to a relay we run ourselves —
 * bound to 127.0.0.1, on any port, closing every connection on `stop()`, refusing WebSocket
 * connections from other web pages, and replaying what a late viewer missed. Crews, the actors
 * that hold a batch's sub-agents, are left out: a sub-agent shows as its spawning session's child
 * (see crewHider.ts). It speaks the same
 * protocol as the package's relay: a `createWebSocketInspector({ url })` from another process can
 * publish into it, and `createWebSocketReceiver({ server })`, the Stately page or any WebSocket
 * client can read from it. Session contexts are summarised and secrets (the provider's client
 * with its API key) are never sent.
 */
export interface LiveInspectorOptions {
  /** Default: 8080 (the package's default), or any free port if 8080 is taken. An explicit port that is taken is an error. */
  readonly port?: number;
  /** Default 127.0.0.1: only this machine can connect. */
  readonly host?: string;
  /** The inspector UI the page embeds. Default https://stately.ai/inspect. */
  readonly inspectorUrl?: string;
}

export interface LiveInspector {
  /**
   * The observer to pass to `createActor(machine, { inspect })` (`createSessionActor(input, { inspect })`):
   * it sees everything from the start, and keeps what a viewer who connects late is shown.
   */
  readonly inspect: (event: InspectionEvent) => void;
  /**
   * Inspects a running actor's whole system only while a viewer is connected, and costs nothing
   * while none is (XState does not even build its inspection events). A viewer that connects is
   * shown every actor of the system as it is then, and everything from there on. Returns a
   * function that detaches it.
   */
  attach(actor: AnyActorRef): () => void;
  /** The page to open in a browser: the Stately inspector, fed by this process (with a local view when offline). */
  readonly url: string;
  /** The WebSocket that streams the events (`@statelyai/inspect` wire format, one JSON message each). */
  readonly wsUrl: string;
  /** One line telling the user what to open. */
  readonly instructions: string;
  /** Closes every connection and the server; events after it are dropped. */
  stop(): Promise<void>;
}

export const DEFAULT_INSPECTOR_PORT = 8080;
export const STATELY_INSPECTOR_URL = 'https://stately.ai/inspect';
/** `@xstate.event` messages kept for a viewer that connects late (actors and their latest snapshots are always kept). */
const REPLAY_EVENTS = 500;
/** How deep a value is copied into a message; deeper values become `'[…]'` (the package's own limit is 10). */
const DEPTH_LIMIT = 12;
const LAST_MESSAGES = 3;

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Inbound = StatelyInspectionEvent & { snapshot?: { status?: unknown; value?: unknown; context?: unknown } };

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null;
}

/** A session's context as the inspector shows it: what the session is doing, not its machinery. */
function isSessionContext(context: unknown): context is Record<string, unknown> & { agent: Record<string, unknown>; messages: unknown[] } {
  return sessionOf({ context }) !== undefined && Array.isArray((context as { messages?: unknown }).messages);
}

export function sessionContextView(context: unknown): unknown {
  if (!isSessionContext(context)) return context;
  const options = isRecord(context.options) ? context.options : {};
  const provider = isRecord(options.provider) ? options.provider : undefined;
  return {
    agent: context.agent,
    ...(provider ? { provider: providerSummary(provider) } : {}),
    steps: context.steps,
    maxSteps: options.maxSteps,
    pendingUser: context.pendingUser,
    inbox: context.inbox,
    spawned: context.spawned,
    usage: context.usage,
    childUsage: context.childUsage,
    failure: context.failure,
    result: context.result,
    messageCount: context.messages.length,
    lastMessages: context.messages.slice(-LAST_MESSAGES),
  };
}

function providerSummary(provider: Record<string, unknown>): Json {
  return {
    name: typeof provider.name === 'string' ? provider.name : 'provider',
    ...(typeof provider.model === 'string' ? { model: provider.model } : {}),
  };
}

/** Keys whose values never leave the process, and keys shown as a summary. */
const SECRET_KEYS = new Set(['apikey', 'authtoken', 'authorization', 'x-api-key', 'client', 'headers', 'password', 'secret', 'token']);
const DROPPED_KEYS = new Set(['logs', 'recorder', 'listener', 'signal']);

/**
 * A JSON-safe copy of `value` for the wire: `toJSON` honoured (machine snapshots, actor refs),
 * Maps and Sets as objects and arrays, functions and cycles dropped, depth limited; the provider
 * shown as its name and model, tools as their names, a history as its last messages, credentials
 * redacted, I/O plumbing dropped.
 */
export function redact(value: unknown, depth = 0, ancestors: Set<object> = new Set()): Json | undefined {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return value;
  if (typeof value === 'number') return Number.isFinite(value) ? value : null;
  if (typeof value === 'bigint') return value.toString();
  if (typeof value !== 'object') return undefined;
  if (ancestors.has(value)) return '[circular]';
  if (depth >= DEPTH_LIMIT) return '[…]';
  const toJSON = (value as { toJSON?: unknown }).toJSON;
  if (typeof toJSON === 'function') {
    const plain: unknown = toJSON.call(value);
    if (plain !== value) return redact(plain, depth, ancestors);
  }
  ancestors.add(value);
  try {
    if (Array.isArray(value) || value instanceof Set) {
      return [...value].map((item) => redact(item, depth + 1, ancestors) ?? null);
    }
    const entries: [string, unknown][] = value instanceof Map ? [...value].map(([k, v]) => [String(k), v]) : Object.entries(value);
    const out: { [key: string]: Json } = {};
    for (const [key, item] of entries) {
      const lower = key.toLowerCase();
      if (DROPPED_KEYS.has(key)) continue;
      if (SECRET_KEYS.has(lower)) {
        out[key] = '[redacted]';
      } else if (key === 'provider' && isRecord(item)) {
        out[key] = providerSummary(item);
      } else if (key === 'messages' && Array.isArray(item) && item.length > LAST_MESSAGES) {
        // A model request's input carries the whole history: its end is what changed.
        out[key] = [
          `[${item.length - LAST_MESSAGES} earlier messages]`,
          ...item.slice(-LAST_MESSAGES).map((m: unknown) => redact(m, depth + 1, ancestors) ?? null),
        ];
      } else if (key === 'tools' && Array.isArray(item)) {
        out[key] = item.map((tool) => (isRecord(tool) && typeof tool.name === 'string' ? tool.name : '?'));
      } else {
        const copy = redact(item, depth + 1, ancestors);
        if (copy !== undefined) out[key] = copy;
      }
    }
    return out;
  } finally {
    ancestors.delete(value);
  }
}

/**
 * What a viewer that connects late is sent first: every machine actor's registration (in order)
 * and its latest snapshot, and the last `REPLAY_EVENTS` events sent to those actors. Promise and
 * callback actors (each model request, tool batch and tick) stream live but are not replayed.
 */
class Replay {
  /** Insertion-ordered: `a:<sessionId>` actors, `s:<sessionId>` latest snapshots, `e:<n>` events. */
  private readonly log = new Map<string, string>();
  private readonly machines = new Set<string>();
  private readonly events: string[] = [];
  private counter = 0;

  add(event: Inbound, text: string): void {
    const id = event.sessionId;
    if (event.type === '@xstate.actor') {
      if (!isRecord(event.snapshot) || !('value' in event.snapshot)) return;
      this.machines.add(id);
      this.log.set(`a:${id}`, text);
    } else if (event.type === '@xstate.snapshot') {
      if (!this.machines.has(id)) return;
      this.log.delete(`s:${id}`);
      this.log.set(`s:${id}`, text);
    } else if (event.type === '@xstate.event') {
      if (!this.machines.has(id)) return;
      const key = `e:${this.counter++}`;
      this.log.set(key, text);
      this.events.push(key);
      if (this.events.length > REPLAY_EVENTS) this.log.delete(this.events.shift() ?? '');
    }
  }

  messages(): IterableIterator<string> {
    return this.log.values();
  }

  clear(): void {
    this.log.clear();
    this.machines.clear();
    this.events.length = 0;
  }
}

const PUBLISHED = new Set(['@xstate.actor', '@xstate.snapshot', '@xstate.event']);

/** A machine snapshot with its session context summarised (its `toJSON` reads `this`, so the copy serialises). */
function viewOf(snapshot: unknown): unknown {
  const context = (snapshot as { context?: unknown }).context;
  return isSessionContext(context) ? { ...(snapshot as object), context: sessionContextView(context) } : snapshot;
}

/**
 * What an idle inspector keeps, unconverted, for the first viewer: the same selection as `Replay`
 * (every actor, its latest snapshot, the last events). Holding an event is a Map update, so a
 * session with an inspector no one watches runs at the speed of one without.
 * An actor that finished is held as a small stand-in with its context summarised, so its history
 * is not kept alive for a viewer who may never come.
 */
class Held {
  private readonly actors = new Map<string, InspectionEvent>();
  private readonly snapshots = new Map<string, InspectionEvent>();
  /** The last REPLAY_EVENTS events, a ring. */
  private readonly events: (InspectionEvent | undefined)[] = new Array<InspectionEvent | undefined>(REPLAY_EVENTS);
  private next = 0;

  hold(event: InspectionEvent): void {
    if (event.type === '@xstate.event') {
      this.events[this.next] = event;
      this.next = (this.next + 1) % REPLAY_EVENTS;
      return;
    }
    const id = event.actorRef.sessionId;
    if (event.type === '@xstate.actor') {
      this.actors.set(id, event);
      return;
    }
    if (event.type !== '@xstate.snapshot') return;
    if ((event.snapshot as { status?: unknown }).status === 'active') {
      this.snapshots.set(id, event);
      return;
    }
    const snapshot = viewOf(event.snapshot);
    const actorRef = standIn(event.actorRef, snapshot);
    const registration = this.actors.get(id);
    if (registration) this.actors.set(id, { ...registration, actorRef } as InspectionEvent);
    this.snapshots.set(id, { ...event, actorRef, snapshot } as InspectionEvent);
  }

  /** Everything held: registrations, latest snapshots, then the last events, each in order; forgets it. */
  drain(): InspectionEvent[] {
    const ring = [...this.events.slice(this.next), ...this.events.slice(0, this.next)].filter((e): e is InspectionEvent => e !== undefined);
    const held = [...this.actors.values(), ...this.snapshots.values(), ...ring];
    this.actors.clear();
    this.snapshots.clear();
    this.events.fill(undefined);
    this.next = 0;
    return held;
  }
}

function isInbound(value: unknown): value is Inbound {
  return (
    isRecord(value) &&
    typeof value.type === 'string' &&
    value.type.startsWith('@xstate.') &&
    typeof value._version === 'string' &&
    typeof value.sessionId === 'string'
  );
}

function listen(server: ReturnType<typeof createServer>, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (error: Error): void => {
      server.off('listening', onListening);
      reject(error);
    };
    const onListening = (): void => {
      server.off('error', onError);
      resolve();
    };
    server.once('error', onError);
    server.once('listening', onListening);
    server.listen(port, host);
  });
}

function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

/**
 * Starts the relay and returns the `inspect` observer for the session actors, the page to open,
 * and `stop()`. Events are sent from the moment it returns; a viewer that connects later gets the
 * actors, their latest snapshots and recent events first.
 */
export async function startLiveInspector(options: LiveInspectorOptions = {}): Promise<LiveInspector> {
  const host = options.host ?? '127.0.0.1';
  const inspectorUrl = options.inspectorUrl ?? STATELY_INSPECTOR_URL;
  let page = '';
  const http = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? '/').split('?')[0];
    if (request.method === 'GET' && (path === '/' || path === '/index.html')) {
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
      response.end(page);
      return;
    }
    response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
    response.end('not found\n');
  });

  if (options.port === undefined) {
    try {
      await listen(http, DEFAULT_INSPECTOR_PORT, host);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw error;
      await listen(http, 0, host);
    }
  } else {
    try {
      await listen(http, options.port, host);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'EADDRINUSE') throw new Error(`exarch inspector: port ${options.port} on ${host} is in use; choose another port`);
      throw error;
    }
  }
  const port = (http.address() as AddressInfo).port;
  const origin = `${urlHost(host)}:${port}`;
  const url = `http://${origin}/`;
  const wsUrl = `ws://${origin}/`;
  page = bridgePage({ inspectorUrl });

  // Browsers let any web page open a WebSocket to localhost: only our own page may.
  const allowedOrigins = new Set([`http://${origin}`, `http://localhost:${port}`, `http://127.0.0.1:${port}`, `http://[::1]:${port}`]);
  const wss = new WebSocketServer({
    server: http,
    verifyClient: ({ origin: from }: { origin: string | undefined }, done: (ok: boolean, code?: number, message?: string) => void) => {
      const ok = from === undefined || from === '' || allowedOrigins.has(from);
      done(ok, 403, 'Forbidden: this WebSocket serves the exarch inspector page only');
    },
  });
  const replay = new Replay();
  const held = new Held();
  let stopped = false;

  const broadcast = (text: string, except?: WebSocket): void => {
    for (const client of wss.clients) if (client !== except && client.readyState === WebSocket.OPEN) client.send(text);
  };

  wss.on('connection', (socket) => {
    socket.on('error', () => socket.terminate());
    for (const text of replay.messages()) socket.send(text);
    // What happened while no one watched, converted now, in order, and sent to this viewer.
    for (const event of held.drain()) publish(event);
    for (const root of attached) watch(root);
    socket.on('close', () => {
      if (wss.clients.size === 0) unwatchAll();
    });
    // Like the package's relay: what one client publishes (a createWebSocketInspector in another
    // process) goes to every other client.
    socket.on('message', (data, isBinary) => {
      if (isBinary || stopped) return;
      const text = data.toString();
      let event: unknown;
      try {
        event = JSON.parse(text);
      } catch {
        return;
      }
      if (!isInbound(event)) return;
      replay.add(event, text);
      broadcast(text, socket);
    });
  });

  const crews = new CrewHider();
  const inspector = createInspector(
    {
      send(event: StatelyInspectionEvent) {
        if (stopped) return;
        const shown = crews.view(event);
        if (!shown) return;
        const message = redact(nameSessions(shown));
        if (!isInbound(message)) return;
        const text = JSON.stringify(message);
        replay.add(message, text);
        broadcast(text);
      },
    },
    { sanitizeContext: (context) => sessionContextView(context) as typeof context },
  );

  const publish = (event: InspectionEvent): void => {
    crews.note(event);
    // Summarise a session's context before the package serialises the whole snapshot.
    if (event.type === '@xstate.snapshot' && isSessionContext((event.snapshot as { context?: unknown }).context)) {
      inspector.inspect.next?.({ ...event, snapshot: viewOf(event.snapshot) as typeof event.snapshot });
      return;
    }
    inspector.inspect.next?.(event);
  };

  const inspect = (event: InspectionEvent): void => {
    // The package converts actors, events and snapshots only (and defers each conversion to a
    // timer of its own): microsteps and actions stop here.
    if (stopped || !PUBLISHED.has(event.type)) return;
    // No one watching: an idle inspector only remembers what a viewer would be shown on arrival.
    if (wss.clients.size === 0) held.hold(event);
    else publish(event);
  };
  // Attached systems: subscribed only while someone watches.
  const attached = new Set<AnyActorRef>();
  const watching = new Map<AnyActorRef, { unsubscribe(): void }>();
  const observer = { next: (event: InspectionEvent) => void (!stopped && PUBLISHED.has(event.type) && publish(event)) };
  const watch = (root: AnyActorRef): void => {
    if (watching.has(root) || stopped) return;
    // The system as it is now, then everything live.
    for (const actorRef of actorsOf(root)) {
      publish({ type: '@xstate.actor', actorRef, rootId: root.sessionId } as InspectionEvent);
      publish({
        type: '@xstate.snapshot',
        actorRef,
        snapshot: actorRef.getSnapshot(),
        event: { type: 'xstate.init' },
        rootId: root.sessionId,
      } as InspectionEvent);
    }
    watching.set(root, root.system.inspect(observer));
  };
  const unwatchAll = (): void => {
    if (watching.size === 0) return;
    for (const subscription of watching.values()) subscription.unsubscribe();
    watching.clear();
    // Unobserved from now on: the next viewer is shown the systems as they will be then, not as
    // they were last seen.
    replay.clear();
  };
  const attach = (actor: AnyActorRef): (() => void) => {
    attached.add(actor);
    if (wss.clients.size > 0) watch(actor);
    return () => {
      attached.delete(actor);
      watching.get(actor)?.unsubscribe();
      watching.delete(actor);
    };
  };

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    unwatchAll();
    for (const client of wss.clients) client.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  };

  const instructions = `Live inspector: open ${url} to watch every session (the Stately inspector needs internet; offline the page shows a local view). Events stream on ${wsUrl}`;
  return { inspect, attach, url, wsUrl, instructions, stop };
}

/** A session actor is named by its agent id (`root`, `root/explorer`) rather than its actor id (`1`, `2`). */
function nameSessions(event: StatelyInspectionEvent): StatelyInspectionEvent {
  if (event.type !== '@xstate.actor') return event;
  const agent = sessionOf(event.snapshot)?.context.agent;
  return agent ? { ...event, name: agent.id } : event;
}
