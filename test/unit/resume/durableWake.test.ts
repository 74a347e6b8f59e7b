import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type DurableRun, resumeRun, startRun } from '../../../src/run/durableRun.js';
import type { JournalRow, RunStore } from '../../../src/store/runStore.js';
import { openSqliteStore, type SqliteRunStore } from '../../../src/store/sqliteStore.js';
import { scriptedProvider } from '../../../src/testing/scriptedProvider.js';
import type { Message, ModelRequest, Provider, StreamSink } from '../../../src/engine/types.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { RecordingStore, SkewedClock } from '../../support/durableStore.js';

/**
 * Issue 15, point 2, in a durable run: a woken parent's request waits until the journal holds
 * what the request shows. A result that lands in that wait joins the same synthetic turn: the
 * parent makes one request for both results, not a second one for the late result alone.
 *
 * The store is a real SQLite file whose appends answer asynchronously (as a networked store's
 * do), and the test holds the append that carries the root's turn until a second sub-agent has
 * delivered, so the late delivery lands in the wait every time, on any machine.
 */

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

/** A SQLite store whose appends settle when `hold` lets them (in order, as one connection would). */
class HeldStore implements RunStore {
  private tail: Promise<void> = Promise.resolve();
  /** Called with each append's rows before it is written; the append waits for the promise it returns. */
  hold: (rows: readonly JournalRow[]) => Promise<void> = async () => undefined;
  constructor(readonly inner: SqliteRunStore) {}
  append(rows: readonly JournalRow[]): Promise<void> {
    const gate = this.hold(rows);
    this.tail = this.tail.then(() => gate).then(() => this.inner.append(rows));
    return this.tail;
  }
  createRun: RunStore['createRun'] = (run) => this.inner.createRun(run);
  getRun: RunStore['getRun'] = (id) => this.inner.getRun(id);
  listRuns: RunStore['listRuns'] = () => this.inner.listRuns();
  journal: RunStore['journal'] = (id) => this.inner.journal(id);
  claim: RunStore['claim'] = (id, owner, lease) => this.inner.claim(id, owner, lease);
  renew: RunStore['renew'] = (id, owner, lease) => this.inner.renew(id, owner, lease);
  release: RunStore['release'] = (id, owner, status) => this.inner.release(id, owner, status);
  close: RunStore['close'] = () => this.inner.close();
}

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((done) => (resolve = done));
  return { promise, resolve };
}

/** The text blocks of a user message. */
function texts(message: Message | undefined): string[] {
  if (message?.role !== 'user') return [];
  return message.content.flatMap((b) => (b.type === 'text' ? [b.text] : []));
}

const spawn = (name: string) => ({ name: 'agent', input: { name, task: `task for ${name}` } });

describe('a durable parent woken by a result', () => {
  it('takes a result that lands while its request waits for the journal into the same turn', async () => {
    dir = mkdtempSync(join(tmpdir(), 'exarch-wake-'));
    const store = new HeldStore(openSqliteStore(join(dir, 'exarch.db')));
    const scripted = scriptedProvider({
      agents: {
        root: [{ calls: [spawn('a'), spawn('b')] }, { text: 'spawned both' }, { text: 'both are in' }, { text: 'never asked' }],
        a: [{ calls: [{ name: 'reply', input: { result: 'from a' } }] }],
        b: [{ fault: { message: 'model overloaded', retryable: false, status: 400 } }],
      },
    });
    // b's request fails only when the test says so: its failure is delivered without any tool
    // (and so without waiting for the journal), straight into the root's inbox.
    const failB = deferred();
    // What the journal held when the root's turn request left: it must show what the request shows.
    let runId = '';
    let journaledAtAsk: string[] = [];
    const provider: Provider = {
      name: 'held',
      async stream(request: ModelRequest, sink: StreamSink) {
        if (request.agent.name === 'b') await failB.promise;
        if (request.agent.id === 'root' && scripted.requestsOf('root').length === 2) {
          journaledAtAsk = (await store.inner.journal(runId)).flatMap((row) =>
            row.session === 'root' && row.record.type === 'message' && row.record.role === 'user' ? texts(row.record as Message) : [],
          );
        }
        return scripted.stream(request, sink);
      },
    };
    let rootActor: DurableRun['actor'] | undefined;
    store.hold = async (rows) => {
      const turn = rows.find(
        (row) =>
          row.session === 'root' &&
          row.record.type === 'message' &&
          row.record.role === 'user' &&
          JSON.stringify(row.record.content).includes("[agent 'a' replied]"),
      );
      if (turn === undefined) return;
      // The root's turn with a's result is being written: b fails now, and the write (and with it
      // the root's request) waits until b's failure is in the root's inbox.
      failB.resolve();
      for (let turns = 0; !rootActor?.getSnapshot().context.inbox.some((r) => r.name === 'b'); turns++) {
        if (turns > 10_000) throw new Error("b's failure never reached the root");
        await new Promise((resolve) => setImmediate(resolve));
      }
    };

    const run = await startRun('go', { provider, maxSteps: 10 }, { store, cwd: dir });
    runId = run.id;
    rootActor = run.actor;
    const result = await run.result;
    expect(result.status).toBe('done');

    const root = scripted.requestsOf('root');
    // spawn, "spawned both", then ONE request carrying both results.
    expect(root).toHaveLength(3);
    expect(texts(root[2]?.lastMessage)).toEqual(["[agent 'a' replied]\nfrom a", "[agent 'b' failed: model overloaded]"]);
    // ... which left only once the journal held the joined turn, b's failure with it.
    expect(journaledAtAsk.slice(-2)).toEqual(["[agent 'a' replied]\nfrom a", "[agent 'b' failed: model overloaded]"]);

    // The journal holds the turn as the model saw it: a resume of the finished run reads it back.
    const finished = await resumeRun(run.id, { provider, maxSteps: 10 }, { store, cwd: dir });
    expect(finished).toMatchObject({ finished: true, status: 'done', text: 'both are in' });
    store.close();
  });
});

describe('a resumed request', () => {
  it('is asked again from the committed history only: a result already in the inbox waits for the next turn', async () => {
    // Process 1: the root asks its turn with a's result; while that request is in flight, b
    // replies and its result lands in the root's inbox (delivered, not yet seen). The store as it
    // is then is the crash image.
    const clock = new SkewedClock();
    const store = new RecordingStore(new MemoryRunStore({ now: clock.now }));
    const rootAsked = deferred();
    const releaseB = deferred();
    const first = scriptedProvider({
      agents: {
        root: [{ calls: [spawn('a'), spawn('b')] }, { text: 'spawned both' }, { text: 'never answered' }],
        a: [{ calls: [{ name: 'reply', input: { result: 'from a' } }] }],
        b: [{ calls: [{ name: 'reply', input: { result: 'from b' } }] }],
      },
    });
    const never = new Promise<never>(() => undefined);
    const held: Provider = {
      name: 'held',
      async stream(request: ModelRequest, sink: StreamSink) {
        if (request.agent.name === 'b') await releaseB.promise;
        if (request.agent.id === 'root' && first.requestsOf('root').length === 2) {
          rootAsked.resolve();
          return never;
        }
        return first.stream(request, sink);
      },
    };
    const run = await startRun('go', { provider: held, maxSteps: 10 }, { store });
    await rootAsked.promise;
    releaseB.resolve();
    let image: MemoryRunStore | undefined;
    for (let turns = 0; image === undefined; turns++) {
      if (turns > 10_000) throw new Error("b's result never reached the root's journal");
      const last = store.frozen.at(-1);
      if (last?.rows.some((row) => row.session === 'root' && row.record.type === 'inbox' && row.record.result.name === 'b')) image = last.store.clone();
      await new Promise((resolve) => setImmediate(resolve));
    }
    expect(run.actor.getSnapshot().value).toBe('streaming');
    run.interrupt();
    await run.result;

    // Process 2 takes the run up from the image.
    clock.expireLeases();
    const second = scriptedProvider({ agents: { root: [{ text: 'seen a' }, { text: 'seen b' }] } });
    const resumed = await resumeRun(run.id, { provider: second, maxSteps: 10 }, { store: new RecordingStore(image) });
    if ('finished' in resumed) throw new Error('the run was not resumable');
    expect(await resumed.result).toMatchObject({ status: 'done', text: 'seen b' });
    const asked = second.requestsOf('root');
    expect(asked).toHaveLength(2);
    // The re-asked request shows exactly the committed history: a's result, not b's.
    expect(texts(asked[0]?.lastMessage)).toEqual(["[agent 'a' replied]\nfrom a"]);
    expect(texts(asked[1]?.lastMessage)).toEqual(["[agent 'b' replied]\nfrom b"]);
  });
});
