import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pipeline, Readable } from 'node:stream';
import type { AnyActorRef } from 'xstate';
import { stringifyBounded } from '../../engine/nesting.js';
import type { RunEventListener } from '../observe/events.js';
import { observe } from '../observe/runObserver.js';
import { Redactor } from '../../engine/redact.js';
import type { TraceRecord } from '../trace/format.js';
import { TraceRecordMaker } from '../trace/records.js';
import { renderViewerHtml } from './html.js';
import { ExarchError } from '../../engine/exarchError.js';
import { EventFollower } from './eventFollower.js';
import { chunksOf, ServedRecords } from './servedRecords.js';
import { StallWatch } from './stallWatch.js';
import { checkedViewerToken, newViewerToken, tokenMatches } from './viewerToken.js';

/**
 * The turn-flow viewer, live: a server on 127.0.0.1 that records a run as it goes (the same trace
 * records `TraceRecorder` writes: src/watch/trace/records.ts) and serves
 *
 * - `/`: the viewer page with the run so far, which then follows the run;
 * - `/events`: the rest of the run as server-sent events, one record each (`id` its index in the
 *   trace), then an `end` event once the run has ended. `?from=N` (or a reconnecting browser's
 *   `Last-Event-ID`) starts after what the page already has;
 * - `/trace.jsonl`: the trace so far, as `exarch view` reads it.
 *
 * A page opened after the run ended is the offline page of its trace. Each record is serialised
 * once, redacted (secrets of `process.env` by default; see redact.ts), and kept as those bytes,
 * which every stream, download and page reads; the page is rendered once per change of the trace,
 * not per request. Everything is written with backpressure (no more until the socket has taken the
 * last chunk), so a client that stops reading holds at most a chunk of its own, and a client that
 * took nothing while 4 MiB of the run arrived is dropped (stallWatch.ts): a browser's event
 * stream reconnects with the last id it got and loses nothing.
 *
 * Only the person who started it is answered: every request must carry the viewer's token
 * (`?token=…`, in `url`; anything else gets 403 and nothing of the run), a request whose `Host` is
 * not the server's own address (a DNS-rebinding page) gets 403, and the page itself may connect to
 * nothing but this server.
 */
export interface LiveViewerOptions {
  /** Default 0: any free port. An explicit port that is taken is an error. */
  readonly port?: number;
  /** Default 127.0.0.1. */
  readonly host?: string;
  /** The trace's title (default `exarch run`). */
  readonly title?: string;
  /** The model the run's requests ask for (prices its costs). */
  readonly model?: string;
  /** Secrets to keep out of what is served (default: those of `process.env`). */
  readonly redactor?: Redactor;
  /**
   * The secret every request must carry (`?token=…`): at least 22 URL-safe characters. Default: a
   * new one of 256 random bits, which `url` carries.
   */
  readonly token?: string;
  readonly now?: () => number;
}

export interface LiveViewer {
  /** The page to open: `http://127.0.0.1:PORT/?token=TOKEN`. */
  readonly url: string;
  /** The secret `url` carries, which every request must. */
  readonly token: string;
  /** Feed it the run's events (a `RunObserver` listener). Ignored after `end()`. */
  readonly onEvent: RunEventListener;
  /** The run ended: the trace is closed (`trace.end`) and every page is told. Idempotent. */
  end(): void;
  /** Resolves when `end()` has been called. */
  readonly ended: Promise<void>;
  /** Records so far. */
  readonly records: number;
  /** Ends every connection and stops listening. */
  close(): Promise<void>;
}

/**
 * The live viewer's server fed trace records made elsewhere: a run followed from its journal
 * (`exarch run --db --ui`: `JournalTraceStream`), whose records begin with `trace.start` and end
 * with `trace.end` as a recorder's do.
 */
export interface TraceServer {
  /** The page to open, with its token. */
  readonly url: string;
  readonly token: string;
  /** The run's next trace record. Ignored after `end()`. */
  readonly push: (record: TraceRecord) => void;
  /** No record follows: every page is told. Idempotent. */
  end(): void;
  readonly ended: Promise<void>;
  readonly records: number;
  close(): Promise<void>;
}

/** The live viewer's port is taken, or it cannot listen: one line for the user. */
export class LiveViewerError extends ExarchError<'live-viewer'> {
  constructor(message: string) {
    super('live-viewer', message);
  }
}

/** Starts the server; feed it the run's events with `onEvent`, then call `end()`. */
export async function startLiveViewer(options: LiveViewerOptions = {}): Promise<LiveViewer> {
  const server = await startTraceServer(options);
  const maker = new TraceRecordMaker(
    {
      ...(options.title === undefined ? {} : { title: options.title }),
      ...(options.model === undefined ? {} : { model: options.model }),
      ...(options.now === undefined ? {} : { now: options.now }),
    },
    server.push,
  );
  return {
    url: server.url,
    token: server.token,
    onEvent: maker.onEvent,
    get records() {
      return server.records;
    },
    ended: server.ended,
    end() {
      // Its `trace.end` first (once), then the pages are told.
      maker.end();
      server.end();
    },
    close: () => server.close(),
  };
}

/** A rendered page, kept until the trace changes. */
interface RenderedPage {
  readonly records: number;
  readonly ended: boolean;
  readonly bytes: Buffer;
}

/** Starts the server alone; `push` it trace records, then call `end()`. (`title`, `model` and `now` are the records' own.) */
export async function startTraceServer(options: Omit<LiveViewerOptions, 'title' | 'model' | 'now'> = {}): Promise<TraceServer> {
  const host = options.host ?? '127.0.0.1';
  const redactor = options.redactor ?? Redactor.fromEnv();
  const token = options.token === undefined ? newViewerToken() : checkedViewerToken(options.token);
  /** Every record so far, redacted: what is streamed, served as the trace, and embedded in a page. */
  const records = new ServedRecords();
  const followers = new Set<EventFollower>();
  let page: RenderedPage | undefined;
  /** Every client being sent something: one that takes nothing while the run goes on is dropped. */
  const stalls = new StallWatch(() => records.bytes);
  let ended = false;
  let closed = false;
  let flushing: NodeJS.Immediate | undefined;
  let markEnded = (): void => undefined;
  const endedPromise = new Promise<void>((resolve) => (markEnded = resolve));

  // Records of one turn of the event loop go out together.
  const flush = (): void => {
    flushing = undefined;
    stalls.check();
    for (const follower of followers) follower.pump();
  };
  const push = (record: TraceRecord): void => {
    if (ended) return;
    records.add(redactor.json(stringifyBounded(record)));
    flushing ??= setImmediate(flush);
  };

  /**
   * The page of the run so far, rendered once per change of the trace (a page is the whole trace:
   * rendering it per request would cost every load the run's size again). A client still being
   * sent an older page keeps that one alive, until it has it or StallWatch drops it.
   */
  const renderedPage = (): RenderedPage => {
    if (page?.records === records.count && page.ended === ended) return page;
    // The lines are redacted already; what the page adds (its code, colours) holds no secret.
    const html = renderViewerHtml(records.records(), {
      redactor: new Redactor([]),
      ...(ended ? {} : { live: { events: `events?token=${token}` } }),
    });
    page = { records: records.count, ended, bytes: Buffer.from(html, 'utf8') };
    return page;
  };

  let origin = '';
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    // Nothing that is served may be sent on elsewhere with its address (which holds the token).
    response.setHeader('referrer-policy', 'no-referrer');
    if (!allowedHost(request.headers.host, origin)) {
      response.writeHead(403, { 'content-type': 'text/plain; charset=utf-8' });
      response.end('forbidden: the exarch viewer answers pages of this machine only\n');
      return;
    }
    const url = new URL(request.url ?? '/', `http://${origin}`);
    if (!tokenMatches(token, url.searchParams.get('token'))) {
      response.writeHead(403, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
      response.end('forbidden: open the exarch viewer at the address it printed, with its ?token=\n');
      return;
    }
    if (request.method !== 'GET') {
      response.writeHead(405, { allow: 'GET', 'content-type': 'text/plain; charset=utf-8' });
      response.end('method not allowed\n');
      return;
    }
    if (url.pathname === '/' || url.pathname === '/index.html') {
      const served = renderedPage();
      response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store', 'content-length': served.bytes.length });
      stalls.watch(response);
      sendPaced(
        response,
        chunksOf((index) => (index === 0 ? served.bytes : undefined)),
      );
    } else if (url.pathname === '/events') {
      const lastId = request.headers['last-event-id'];
      const from = lastId !== undefined && /^\d+$/.test(String(lastId)) ? Number(lastId) + 1 : Number(url.searchParams.get('from') ?? 0);
      response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
      response.flushHeaders();
      const start = Number.isSafeInteger(from) && from >= 0 ? Math.min(from, records.count) : 0;
      const follower = new EventFollower(
        records,
        response,
        start,
        () => ended,
        (done) => followers.delete(done),
      );
      followers.add(follower);
      stalls.watch(response);
      follower.pump();
    } else if (url.pathname === '/trace.jsonl') {
      // The trace as it is now: its lines are the records' own bytes, so this copies nothing but the chunk in flight.
      const count = records.count;
      let length = 0;
      for (let i = 0; i < count; i++) length += records.line(i)?.length ?? 0;
      response.writeHead(200, { 'content-type': 'application/x-ndjson; charset=utf-8', 'cache-control': 'no-store', 'content-length': length });
      stalls.watch(response);
      sendPaced(
        response,
        chunksOf((index) => (index < count ? records.line(index) : undefined)),
      );
    } else {
      response.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' });
      response.end('not found\n');
    }
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        new LiveViewerError(
          error.code === 'EADDRINUSE'
            ? `the live viewer cannot listen on ${host}:${options.port ?? 0}: the port is in use; choose another`
            : `the live viewer cannot listen on ${host}:${options.port ?? 0}: ${error.message}`,
        ),
      ),
    );
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  origin = `${host.includes(':') ? `[${host}]` : host}:${port}`;

  return {
    url: `http://${origin}/?token=${token}`,
    token,
    push,
    get records() {
      return records.count;
    },
    ended: endedPromise,
    end() {
      if (ended) return;
      ended = true;
      markEnded();
      flushing ??= setImmediate(flush);
    },
    async close() {
      if (closed) return;
      closed = true;
      // What the pages will take now goes out first (and, if the run ended, its end), so a page that reads misses nothing.
      if (flushing) clearImmediate(flushing);
      flush();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * A body sent with backpressure: `stream.pipeline` writes the next chunk only once the socket has
 * taken the last (so a client that does not read holds one chunk, not the body), and stops when
 * the client goes (its error then is the client's leaving, nothing to report).
 */
function sendPaced(response: ServerResponse, chunks: Iterable<Buffer>): void {
  pipeline(Readable.from(chunks, { objectMode: true, highWaterMark: 1 }), response, () => undefined);
}

/** The server's own address, by IP or as localhost: nothing a web page elsewhere can have resolved to us. */
function allowedHost(header: string | undefined, origin: string): boolean {
  if (header === undefined) return false;
  const port = origin.slice(origin.lastIndexOf(':') + 1);
  return header === origin || header === `localhost:${port}` || header === `127.0.0.1:${port}` || header === `[::1]:${port}`;
}

/** What `serveViewer` returns. */
export interface ServedViewer {
  /** The page to open, with the token it needs (`?token=…`). */
  readonly url: string;
  /** Resolves once the run's root has ended and its last records were recorded. */
  readonly ended: Promise<void>;
  /** Stops following the run and closes the server. */
  close(): Promise<void>;
}

/**
 * Serves the live turn-flow viewer for the run `actor` roots, on 127.0.0.1 (any free port unless
 * `port` is given). Call it before `actor.start()` to show the run from its first event; on a
 * running actor the page starts from its sessions as they are now. The page shows the run ending
 * when the root actor ends (it is stopped, or reaches a final state); it keeps being served until
 * `close()`.
 *
 * @example
 * const actor = createSessionActor({ provider, task });
 * const viewer = await serveViewer(actor);
 * console.error(`watch it at ${viewer.url}`);
 * actor.start();
 * await waitForSettled(actor);
 * actor.stop();
 * await viewer.close();
 */
export async function serveViewer(actor: AnyActorRef, options: LiveViewerOptions = {}): Promise<ServedViewer> {
  const viewer = await startLiveViewer(options);
  let rootAgent: string | undefined;
  const stop = observe(actor, (event) => {
    viewer.onEvent(event);
    if (event.type === 'agent.started' && event.parent === null) rootAgent ??= event.agent;
    // A stop reports the sub-agents' ends in the same turn of the event loop, after the root's.
    if (event.type === 'agent.ended' && event.agent === rootAgent) setImmediate(() => viewer.end());
  });
  return {
    url: viewer.url,
    ended: viewer.ended,
    async close() {
      stop();
      await viewer.close();
    },
  };
}
