import Database from 'better-sqlite3';
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import { MemoryRunStore, type StoreOptions } from '../../../src/store/memoryStore.js';
import type { ClaimResult, JournalRow, NewRun, RunOwner } from '../../../src/store/runStore.js';
import { openPostgresStore, type PostgresRunStore } from '../../../src/store/postgresStore.js';
import { openSqliteStore, type SqliteRunStore } from '../../../src/store/sqliteStore.js';
import { StoreError, type StoreErrorKind } from '../../../src/store/storeError.js';
import { WalCheckpointer } from '../../../src/store/walCheckpointer.js';
import { postgresForFile } from '../../support/postgresServer.js';

/**
 * The run stores: one contract all must keep (the memory store stands in for the others in
 * tests, so they must not drift apart), then what only a file can get wrong. Real files, real
 * processes; the oracles read the database with their own connection, never through the store.
 */

const HOST = hostname();
const EXARCH_ID = 0x45584152;

let dir: string;
let clock: number;
const opened: { close(): void | Promise<void> }[] = [];
const postgres = postgresForFile('test/e2e/store/store.test.ts (its Postgres part)');
const options: StoreOptions = { now: () => clock };

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'exarch-store-'));
  clock = 1_000_000;
});
afterEach(async () => {
  for (const store of opened.splice(0)) await store.close();
  rmSync(dir, { recursive: true, force: true });
});

function track<T extends { close(): void | Promise<void> }>(store: T): T {
  opened.push(store);
  return store;
}

const me = (token: string): RunOwner => ({ host: HOST, pid: process.pid, token });

function newRun(id: string, overrides: Partial<NewRun> = {}): NewRun {
  return {
    id,
    task: `task ${id}`,
    cwd: '/work',
    options: { model: 'm', maxSteps: 9, tools: ['read_file'] },
    startedAt: 100,
    owner: me('first'),
    leaseMs: 60_000,
    ...overrides,
  };
}

function row(runId: string, seq: number, record: JournalRecord, session = 'root'): JournalRow {
  return { runId, seq, session, ts: 5000 + seq, record };
}

const usage = (inputTokens: number, outputTokens: number, cacheCreationInputTokens = 0, cacheReadInputTokens = 0): JournalRecord => {
  const request = { inputTokens, outputTokens, cacheCreationInputTokens, cacheReadInputTokens };
  return { type: 'usage', request, session: request, stopReason: 'end_turn' };
};
const session = (id: string): JournalRecord => ({ type: 'session', agent: { name: id, path: [id], depth: 0, id }, task: 'go' });
const message = (text: string): JournalRecord => ({ type: 'message', role: 'assistant', content: [{ type: 'text', text }] });

/** The pid of a process that has exited (and been reaped): a dead owner on this host. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  expect(child.status).toBe(0);
  return child.pid;
}

function errorOf(fn: () => unknown): StoreError {
  try {
    fn();
  } catch (error) {
    if (error instanceof StoreError) return error;
    throw error;
  }
  throw new Error('expected a StoreError');
}

/** The StoreError `fn` throws or rejects with: a contract test runs the same way against a store that answers synchronously and one that answers with promises. */
async function refusal(fn: () => unknown): Promise<StoreError> {
  try {
    await fn();
  } catch (error) {
    if (error instanceof StoreError) return error;
    throw error;
  }
  throw new Error('expected a StoreError');
}

type AnyStore = MemoryRunStore | SqliteRunStore | PostgresRunStore;
const STORES: [string, () => AnyStore | Promise<AnyStore>][] = [
  ['memory', () => new MemoryRunStore(options)],
  ['sqlite', () => openSqliteStore(join(dir, 'runs.db'), options)],
  // A fresh database per test on one real server.
  ['postgres', async () => openPostgresStore(await postgres.server().createDatabase(), options)],
];

for (const [kind, make] of STORES) {
  describe.skipIf(kind === 'postgres' && !postgres.available)(`${kind} run store: the RunStore contract`, () => {
    let store: AnyStore;
    beforeEach(async () => {
      store = track(await make());
    });

    it('keeps a run as created: running, owned, leased from now; a taken id is a conflict', async () => {
      const run = newRun('r1');
      await store.createRun(run);
      expect(await store.getRun('r1')).toEqual({
        id: 'r1',
        task: 'task r1',
        cwd: '/work',
        options: run.options,
        startedAt: 100,
        status: 'running',
        owner: me('first'),
        leaseUntil: clock + 60_000,
        endedAt: null,
      });
      expect(await store.getRun('nope')).toBeUndefined();
      expect((await refusal(() => store.createRun(newRun('r1', { task: 'other' })))).kind).toBe('conflict');
      expect((await store.getRun('r1'))?.task).toBe('task r1');
    });

    it('gives the journal back in seq order, records intact, per run', async () => {
      await store.createRun(newRun('a'));
      await store.createRun(newRun('b'));
      const records: JournalRecord[] = [
        session('root'),
        message('héllo "quoted"\n'),
        usage(3, 4),
        { type: 'tool', result: { type: 'tool_result', tool_use_id: 't1', content: 'ok', is_error: true } },
        { type: 'queued', text: 'more' },
        { type: 'interrupt' },
      ];
      await store.append([row('a', 3, records[2]!), row('a', 1, records[0]!)]);
      await store.append([row('b', 1, message('other run'), 'root/x')]);
      await store.append([row('a', 2, records[1]!), row('a', 5, records[4]!), row('a', 4, records[3]!), row('a', 6, records[5]!, '')]);
      const journal = await store.journal('a');
      expect(journal.map((r) => r.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(journal.map((r) => r.record)).toEqual(records);
      expect(journal[5]).toEqual({ runId: 'a', seq: 6, session: '', ts: 5006, record: { type: 'interrupt' } });
      expect(await store.journal('b')).toEqual([row('b', 1, message('other run'), 'root/x')]);
      expect(await store.journal('none')).toEqual([]);
    });

    it('appends a batch atomically: one taken seq and none of the batch is kept', async () => {
      await store.createRun(newRun('a'));
      await store.append([row('a', 1, message('one')), row('a', 2, message('two'))]);
      expect((await refusal(() => store.append([row('a', 3, message('3')), row('a', 4, message('4')), row('a', 2, message('again'))]))).kind).toBe('conflict');
      expect((await refusal(() => store.append([row('a', 5, message('5')), row('a', 5, message('5 twice'))]))).kind).toBe('conflict');
      expect((await store.journal('a')).map((r) => r.record)).toEqual([message('one'), message('two')]);
      await store.append([row('a', 3, message('3'))]);
      expect((await store.journal('a')).map((r) => r.seq)).toEqual([1, 2, 3]);
    });

    it('hands out copies: changing what was passed in or read back changes nothing stored', async () => {
      const run = newRun('a');
      await store.createRun(run);
      const record = { type: 'queued', text: 'before' };
      await store.append([row('a', 1, record as JournalRecord)]);
      record.text = 'after';
      ((await store.journal('a'))[0]!.record as { text: string }).text = 'mutated';
      ((await store.getRun('a'))!.options.tools as string[]).push('mutated');
      expect((await store.journal('a'))[0]!.record).toEqual({ type: 'queued', text: 'before' });
      expect((await store.getRun('a'))!.options.tools).toEqual(['read_file']);
    });

    it('lists runs newest first (started_at, then id) with agents, requests and usage summed from the journal', async () => {
      await store.createRun(newRun('old', { startedAt: 100 }));
      await store.createRun(newRun('b-new', { startedAt: 300 }));
      await store.createRun(newRun('mid', { startedAt: 200 }));
      await store.createRun(newRun('a-new', { startedAt: 300 }));
      await store.createRun(newRun('c-new', { startedAt: 300 }));
      await store.append([
        row('mid', 1, session('root')),
        row('mid', 2, message('x')),
        row('mid', 3, usage(10, 20, 30, 40)),
        row('mid', 4, session('root/c'), 'root/c'),
      ]);
      await store.append([row('mid', 5, usage(1, 2, 3, 4), 'root/c'), row('old', 1, session('root')), row('old', 2, usage(7, 0))]);
      const runs = await store.listRuns();
      expect(runs.map((r) => r.id)).toEqual(['c-new', 'b-new', 'a-new', 'mid', 'old']);
      const byId = new Map(runs.map((r) => [r.id, r]));
      expect(byId.get('mid')).toMatchObject({
        task: 'task mid',
        agents: 2,
        requests: 2,
        usage: { inputTokens: 11, outputTokens: 22, cacheCreationInputTokens: 33, cacheReadInputTokens: 44 },
      });
      expect(byId.get('old')).toMatchObject({
        agents: 1,
        requests: 1,
        usage: { inputTokens: 7, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
      });
      expect(byId.get('a-new')).toMatchObject({
        agents: 0,
        requests: 0,
        usage: { inputTokens: 0, outputTokens: 0, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
      });
    });

    it('lists a running run whose owner is dead, or whose lease ran out, as interrupted', async () => {
      await store.createRun(newRun('live'));
      await store.createRun(newRun('dead', { owner: { host: HOST, pid: deadPid(), token: 'gone' } }));
      await store.createRun(newRun('remote', { owner: { host: `not-${HOST}`, pid: deadPid(), token: 'far' } }));
      await store.createRun(newRun('expired', { leaseMs: 10 }));
      await store.createRun(newRun('finished'));
      await store.release('finished', me('first'), 'done');
      clock += 11;
      const status = new Map((await store.listRuns()).map((r) => [r.id, r.status]));
      expect(Object.fromEntries(status)).toEqual({ live: 'running', dead: 'interrupted', remote: 'running', expired: 'interrupted', finished: 'done' });
    });

    it('claims: refused while a live owner holds an unexpired lease, granted once it has expired', async () => {
      await store.createRun(newRun('r', { owner: me('holder'), leaseMs: 1000 }));
      const refused = await store.claim('r', me('me'), 5000);
      expect(refused).toEqual({ ok: false, holder: me('holder'), leaseUntil: clock + 1000 } satisfies ClaimResult);
      const remote = { host: `not-${HOST}`, pid: deadPid(), token: 'remote' };
      await store.createRun(newRun('far', { owner: remote, leaseMs: 1000 }));
      expect(await store.claim('far', me('me'), 5000)).toEqual({ ok: false, holder: remote, leaseUntil: clock + 1000 });

      clock += 1001;
      expect(await store.claim('r', me('me'), 5000)).toEqual({ ok: true });
      expect(await store.claim('far', me('me'), 5000)).toEqual({ ok: true });
      expect(await store.getRun('r')).toMatchObject({ status: 'running', owner: me('me'), leaseUntil: clock + 5000 });
      expect(await store.claim('r', me('holder'), 5000)).toEqual({ ok: false, holder: me('me'), leaseUntil: clock + 5000 });
    });

    it('claims over a dead owner on this host at once, whatever its lease', async () => {
      const dead = { host: HOST, pid: deadPid(), token: 'crashed' };
      await store.createRun(newRun('r', { owner: dead, leaseMs: 3_600_000 }));
      expect(await store.claim('r', me('me'), 5000)).toEqual({ ok: true });
      expect((await store.getRun('r'))?.owner).toEqual(me('me'));
    });

    it('lets the holder claim again (same token), and refuses an unknown run', async () => {
      await store.createRun(newRun('r', { owner: me('t'), leaseMs: 1000 }));
      clock += 500;
      expect(await store.claim('r', me('t'), 2000)).toEqual({ ok: true });
      expect((await store.getRun('r'))?.leaseUntil).toBe(clock + 2000);
      const error = await refusal(() => store.claim('nope', me('t'), 1000));
      expect(error.kind).toBe('unknown-run');
      expect(error.message).toContain('nope');
    });

    it('renews only for the holder', async () => {
      await store.createRun(newRun('r', { owner: me('t'), leaseMs: 1000 }));
      clock += 800;
      expect(await store.renew('r', me('other'), 9000)).toBe(false);
      expect((await store.getRun('r'))?.leaseUntil).toBe(1_001_000);
      expect(await store.renew('r', me('t'), 9000)).toBe(true);
      expect((await store.getRun('r'))?.leaseUntil).toBe(clock + 9000);
      expect(await store.renew('nope', me('t'), 9000)).toBe(false);
    });

    it('releases only for the holder: status set, ended, owner and lease cleared; a later claim reopens it', async () => {
      await store.createRun(newRun('r', { owner: me('t') }));
      await store.release('r', me('other'), 'failed');
      expect(await store.getRun('r')).toMatchObject({ status: 'running', owner: me('t'), endedAt: null });
      clock += 42;
      await store.release('r', me('t'), 'capped');
      expect(await store.getRun('r')).toMatchObject({ status: 'capped', owner: null, leaseUntil: 0, endedAt: clock });
      expect(await store.renew('r', me('t'), 1000)).toBe(false);
      await store.release('nope', me('t'), 'done');
      expect(await store.claim('r', me('next'), 1000)).toEqual({ ok: true });
      expect(await store.getRun('r')).toMatchObject({ status: 'running', owner: me('next'), endedAt: null, leaseUntil: clock + 1000 });
    });
  });
}

describe('memory run store', () => {
  it('clone freezes every row: later writes to either store do not reach the other', () => {
    const store = new MemoryRunStore(options);
    store.createRun(newRun('r'));
    store.append([row('r', 1, message('one'))]);
    const frozen = store.clone();
    store.append([row('r', 2, message('two'))]);
    store.release('r', me('first'), 'done');
    frozen.append([row('r', 2, message('other two'))]);
    expect(frozen.journal('r').map((r) => r.record)).toEqual([message('one'), message('other two')]);
    expect(frozen.getRun('r')).toMatchObject({ status: 'running', owner: me('first') });
    expect(store.journal('r').map((r) => r.record)).toEqual([message('one'), message('two')]);
  });
});

const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex');

/** The file's marks and journal mode, read with a connection of the test's own. */
function marks(file: string): { applicationId: unknown; userVersion: unknown; journalMode: unknown; tables: unknown } {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    return {
      applicationId: db.pragma('application_id', { simple: true }),
      userVersion: db.pragma('user_version', { simple: true }),
      journalMode: db.pragma('journal_mode', { simple: true }),
      tables: db
        .prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name")
        .all()
        .map((r) => (r as { name: string }).name),
    };
  } finally {
    db.close();
  }
}

/** A real exarch database, closed (checkpointed), a few dozen pages long. */
function exarchFile(name: string): string {
  const file = join(dir, name);
  const store = openSqliteStore(file, options);
  store.createRun(newRun('r'));
  for (let seq = 1; seq <= 200; seq++) store.append([row('r', seq, message(`${seq} ${'x'.repeat(300)}`))]);
  store.close();
  expect(existsSync(`${file}-wal`)).toBe(false);
  expect(statSync(file).size).toBeGreaterThan(20 * 4096);
  return file;
}

function garble(bytes: Buffer, from: number, to: number): Buffer {
  for (let i = from; i < Math.min(to, bytes.length); i++) bytes[i] = (i * 131 + 7) & 0xff;
  return bytes;
}

describe('sqlite run store: the file', () => {
  it('creates the file and its parent directories, in WAL mode, marked as exarch schema 3', () => {
    const file = join(dir, 'a', 'b', 'exarch.db');
    track(openSqliteStore(file, options)).close();
    expect(marks(file)).toEqual({ applicationId: EXARCH_ID, userVersion: 3, journalMode: 'wal', tables: ['bursts', 'runs'] });
  });

  it('takes up a schema 1 store: its journal, one row per record, becomes bursts, and reads the same', () => {
    const file = join(dir, 'v1.db');
    // Schema 1 exactly as exarch 0.1 wrote it, by hand.
    const db = new Database(file);
    db.exec(`CREATE TABLE runs (id TEXT PRIMARY KEY NOT NULL, task TEXT NOT NULL, cwd TEXT NOT NULL, options TEXT NOT NULL, started_at INTEGER NOT NULL,
        status TEXT NOT NULL, owner_host TEXT, owner_pid INTEGER, owner_token TEXT, lease_until INTEGER NOT NULL DEFAULT 0, ended_at INTEGER,
        agents INTEGER, requests INTEGER, input_tokens INTEGER, output_tokens INTEGER, cache_creation_input_tokens INTEGER, cache_read_input_tokens INTEGER);
      CREATE TABLE journal (run_id TEXT NOT NULL, seq INTEGER NOT NULL, session TEXT NOT NULL, ts INTEGER NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)) WITHOUT ROWID;`);
    db.prepare(
      `INSERT INTO runs (id, task, cwd, options, started_at, status, lease_until) VALUES ('old', 't', '/w', '{"tools":[]}', 1, 'interrupted', 0)`,
    ).run();
    const insert = db.prepare('INSERT INTO journal VALUES (?, ?, ?, ?, ?, ?)');
    const records = [session('root'), message('héllo "quoted"\n'), usage(3, 4)];
    records.forEach((record, i) => {
      insert.run('old', i + 1, 'root', 7000 + i, record.type, JSON.stringify(record));
    });
    db.pragma(`application_id = ${EXARCH_ID}`);
    db.pragma('user_version = 1');
    db.close();
    const store = track(openSqliteStore(file, options));
    expect(store.journal('old')).toEqual(records.map((record, i) => ({ runId: 'old', seq: i + 1, session: 'root', ts: 7000 + i, record })));
    expect(store.listRuns()[0]).toMatchObject({ id: 'old', agents: 1, requests: 1, usage: { inputTokens: 3, outputTokens: 4 } });
    store.append([row('old', 4, message('after'))]);
    expect(store.journal('old').map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    expect(marks(file)).toMatchObject({ userVersion: 3, tables: ['bursts', 'runs'] });
  });

  it('takes up a schema 2 store: bursts keyed by run id move under the number of their run, read and list the same, and the next run is numbered after them', () => {
    const file = join(dir, 'v2.db');
    // Schema 2 exactly as exarch wrote it, by hand.
    const db = new Database(file);
    db.exec(`CREATE TABLE runs (id TEXT PRIMARY KEY NOT NULL, task TEXT NOT NULL, cwd TEXT NOT NULL, options TEXT NOT NULL, started_at INTEGER NOT NULL,
        status TEXT NOT NULL, owner_host TEXT, owner_pid INTEGER, owner_token TEXT, lease_until INTEGER NOT NULL DEFAULT 0, ended_at INTEGER,
        agents INTEGER, requests INTEGER, input_tokens INTEGER, output_tokens INTEGER, cache_creation_input_tokens INTEGER, cache_read_input_tokens INTEGER);
      CREATE TABLE bursts (run_id TEXT NOT NULL, seq INTEGER NOT NULL, last INTEGER NOT NULL, records TEXT NOT NULL, PRIMARY KEY (run_id, seq)) WITHOUT ROWID;
      CREATE VIEW journal (run_id, seq, session, ts, type, body) AS
        SELECT b.run_id, b.seq + r.key, r.value ->> 0, r.value ->> 1, r.value -> 2 ->> 'type', r.value ->> 2
        FROM bursts AS b, json_each(b.records) AS r;`);
    const addRun = db.prepare(
      `INSERT INTO runs (id, task, cwd, options, started_at, status, lease_until) VALUES (?, 't', '/w', '{"tools":[]}', ?, 'interrupted', 0)`,
    );
    addRun.run('zz-first', 1);
    addRun.run('aa-second', 2);
    const burst = db.prepare('INSERT INTO bursts VALUES (?, ?, ?, ?)');
    const stored = (records: JournalRecord[], session = 'root'): string => JSON.stringify(records.map((record, i) => [session, 7000 + i, record]));
    burst.run('zz-first', 1, 2, stored([session('root'), usage(3, 4)]));
    burst.run('aa-second', 1, 1, stored([session('root')]));
    burst.run('zz-first', 3, 3, stored([message('é "q"\n')], 'root/w'));
    burst.run('aa-second', 2, 3, stored([usage(1, 1), usage(2, 2)]));
    db.pragma(`application_id = ${EXARCH_ID}`);
    db.pragma('user_version = 2');
    db.close();
    const store = track(openSqliteStore(file, options));
    expect(store.journal('zz-first')).toEqual([
      { runId: 'zz-first', seq: 1, session: 'root', ts: 7000, record: session('root') },
      { runId: 'zz-first', seq: 2, session: 'root', ts: 7001, record: usage(3, 4) },
      { runId: 'zz-first', seq: 3, session: 'root/w', ts: 7000, record: message('é "q"\n') },
    ]);
    expect(store.journal('aa-second').map((r) => [r.seq, r.record])).toEqual([
      [1, session('root')],
      [2, usage(1, 1)],
      [3, usage(2, 2)],
    ]);
    expect(store.listRuns().map((r) => (r.status === 'unreadable' ? r : [r.id, r.agents, r.requests, r.usage.inputTokens]))).toEqual([
      ['aa-second', 1, 2, 3],
      ['zz-first', 1, 1, 3],
    ]);
    store.append([row('zz-first', 4, message('after'))]);
    store.createRun(newRun('third'));
    store.append([row('third', 1, session('root'))]);
    expect(store.journal('zz-first').map((r) => r.seq)).toEqual([1, 2, 3, 4]);
    expect(store.journal('third').map((r) => r.record)).toEqual([session('root')]);
    const after = new Database(file, { readonly: true });
    try {
      expect(after.prepare('SELECT id, num FROM runs ORDER BY num').all()).toEqual([
        { id: 'zz-first', num: 1 },
        { id: 'aa-second', num: 2 },
        { id: 'third', num: 3 },
      ]);
      expect(after.prepare("SELECT seq, type FROM journal WHERE run_id = 'zz-first' ORDER BY seq").all()).toEqual([
        { seq: 1, type: 'session' },
        { seq: 2, type: 'usage' },
        { seq: 3, type: 'message' },
        { seq: 4, type: 'message' },
      ]);
    } finally {
      after.close();
    }
    expect(marks(file)).toMatchObject({ userVersion: 3, tables: ['bursts', 'runs'] });
  });

  it('stores a burst as one row, and shows it record by record in the view journal', () => {
    const file = join(dir, 'view.db');
    const store = track(openSqliteStore(file, options));
    store.createRun(newRun('r'));
    store.append([row('r', 1, session('root')), row('r', 2, message('a')), row('r', 3, usage(1, 2), 'root/w')]);
    store.append([row('r', 4, message('b'))]);
    const db = new Database(file, { readonly: true });
    try {
      // A burst's key is the run's number times 2^32 plus its first seq.
      expect(db.prepare('SELECT b.key - u.num * 4294967296 AS seq, b.last FROM bursts AS b, runs AS u ORDER BY b.key').all()).toEqual([
        { seq: 1, last: 3 },
        { seq: 4, last: 4 },
      ]);
      const view = db.prepare('SELECT seq, session, ts, type, body FROM journal ORDER BY seq').all() as {
        seq: number;
        session: string;
        ts: number;
        type: string;
        body: string;
      }[];
      expect(view.map((r) => [r.seq, r.session, r.ts, r.type])).toEqual([
        [1, 'root', 5001, 'session'],
        [2, 'root', 5002, 'message'],
        [3, 'root/w', 5003, 'usage'],
        [4, 'root', 5004, 'message'],
      ]);
      expect(JSON.parse(view[1]?.body ?? '')).toEqual(message('a'));
    } finally {
      db.close();
    }
  });

  it('a run released, claimed by another store, appended to and released again, lists the totals of its whole journal', () => {
    const file = join(dir, 'totals.db');
    const first = track(openSqliteStore(file, options));
    first.createRun(newRun('r'));
    first.append([row('r', 1, session('root')), row('r', 2, usage(5, 6, 7, 8))]);
    first.release('r', me('first'), 'interrupted');
    first.close();
    const second = track(openSqliteStore(file, options));
    expect(second.claim('r', me('second'), 1000)).toEqual({ ok: true });
    second.append([row('r', 3, usage(1, 1)), row('r', 4, session('root/w'))]);
    // A conflicting burst counts nothing.
    expect(() => second.append([row('r', 4, usage(100, 100))])).toThrow(StoreError);
    second.release('r', me('second'), 'done');
    const db = new Database(file, { readonly: true });
    try {
      expect(db.prepare('SELECT agents, requests, input_tokens, output_tokens, cache_creation_input_tokens, cache_read_input_tokens FROM runs').get()).toEqual({
        agents: 2,
        requests: 2,
        input_tokens: 6,
        output_tokens: 7,
        cache_creation_input_tokens: 7,
        cache_read_input_tokens: 8,
      });
    } finally {
      db.close();
    }
  });

  it('refuses a burst that overlaps one stored, wherever it starts, and writes none of its rows', () => {
    const store = track(openSqliteStore(join(dir, 'overlap.db'), options));
    store.createRun(newRun('r'));
    store.append([row('r', 1, message('a')), row('r', 2, message('b')), row('r', 3, message('c'))]);
    for (const seqs of [[2], [3, 4], [0, 1], [1]]) {
      expect(errorOf(() => store.append([row('r', 10, message('x')), ...seqs.map((seq) => row('r', seq, message('y')))])).kind).toBe('conflict');
    }
    expect(store.journal('r').map((r) => r.seq)).toEqual([1, 2, 3]);
  });

  it('keeps two runs journaled side by side apart, and refuses rows of a run it has no row for or past its seqs', () => {
    const store = track(openSqliteStore(join(dir, 'apart.db'), options));
    store.createRun(newRun('a'));
    store.createRun(newRun('b'));
    store.append([row('a', 1, message('a1')), row('b', 1, message('b1'))]);
    store.append([row('b', 2, message('b2')), row('a', 2, message('a2'))]);
    expect(store.journal('a').map((r) => [r.seq, r.record])).toEqual([
      [1, message('a1')],
      [2, message('a2')],
    ]);
    expect(store.journal('b').map((r) => [r.seq, r.record])).toEqual([
      [1, message('b1')],
      [2, message('b2')],
    ]);
    expect(store.journal('nobody')).toEqual([]);
    const unknown = errorOf(() => store.append([row('nobody', 1, message('x'))]));
    expect([unknown.kind, unknown.message]).toEqual(['unknown-run', `the run store ${join(dir, 'apart.db')} has no run nobody`]);
    // 2^32 - 1 is the last seq a run can hold.
    store.append([row('a', 2 ** 32 - 1, message('last'))]);
    const full = errorOf(() => store.append([row('a', 2 ** 32, message('x'))]));
    expect([full.kind, full.message]).toEqual([
      'full',
      `the run store ${join(dir, 'apart.db')} cannot hold more (journal rows 4294967296..4294967296 of run a: seqs run from 0 to 4294967295)`,
    ]);
    expect(errorOf(() => store.append([row('a', -1, message('x'))])).kind).toBe('full');
    expect(store.journal('a').map((r) => r.seq)).toEqual([1, 2, 2 ** 32 - 1]);
    expect(store.journal('b').map((r) => r.seq)).toEqual([1, 2]);
  });

  it('journals a run numbered at the top of the key space exactly, and refuses a run past it without keeping a row of it', () => {
    const file = join(dir, 'top.db');
    const first = openSqliteStore(file, options);
    first.createRun(newRun('top'));
    first.close();
    // 2^53 / 2^32 = 2^21 run numbers keep every key (number × 2^32 + seq) exact; the last one is
    // 2^21 - 2, so that the end of its range, (number + 1) × 2^32, is exact too.
    const db = new Database(file);
    db.prepare("UPDATE runs SET num = ? WHERE id = 'top'").run(2 ** 21 - 2);
    db.close();
    const store = track(openSqliteStore(file, options));
    store.append([row('top', 1, message('a')), row('top', 2, message('b'))]);
    store.append([row('top', 2 ** 32 - 1, message('z'))]);
    expect(store.journal('top').map((r) => [r.seq, r.record])).toEqual([
      [1, message('a')],
      [2, message('b')],
      [2 ** 32 - 1, message('z')],
    ]);
    const full = errorOf(() => store.createRun(newRun('past')));
    expect([full.kind, full.message]).toEqual(['full', `the run store ${file} cannot hold more (${2 ** 21 - 2} runs)`]);
    expect(store.listRuns().map((r) => r.id)).toEqual(['top']);
    expect(store.getRun('past')).toBeUndefined();
  });

  it('keeps runs and journals across reopening', () => {
    const file = join(dir, 'runs.db');
    const first = openSqliteStore(file, options);
    first.createRun(newRun('r'));
    first.append([row('r', 1, session('root')), row('r', 2, usage(5, 6))]);
    first.release('r', me('first'), 'done');
    first.close();
    first.close();
    const again = track(openSqliteStore(file, options));
    expect(again.getRun('r')).toMatchObject({ status: 'done', owner: null, endedAt: clock });
    expect(again.journal('r').map((r) => r.record)).toEqual([session('root'), usage(5, 6)]);
    expect(again.listRuns()[0]).toMatchObject({ agents: 1, requests: 1 });
  });

  it('two stores on one file see each other’s writes, and only one claim wins', () => {
    const file = join(dir, 'shared.db');
    const a = track(openSqliteStore(file, options));
    const b = track(openSqliteStore(file, options));
    a.createRun(newRun('r', { leaseMs: 10 }));
    expect(b.getRun('r')?.task).toBe('task r');
    b.append([row('r', 1, message('from b'))]);
    expect(a.journal('r').map((r) => r.record)).toEqual([message('from b')]);
    expect(errorOf(() => a.append([row('r', 1, message('from a'))])).kind).toBe('conflict');
    clock += 11;
    expect(a.claim('r', me('a'), 60_000)).toEqual({ ok: true });
    expect(b.claim('r', me('b'), 60_000)).toEqual({ ok: false, holder: me('a'), leaseUntil: clock + 60_000 });
  });

  it('lets exactly one of several processes racing for each run take it', async () => {
    const file = join(dir, 'race.db');
    const ids = Array.from({ length: 40 }, (_, i) => `r${i}`);
    const setup = openSqliteStore(file);
    const crashed = { host: HOST, pid: deadPid(), token: 'crashed' };
    for (const id of ids) setup.createRun(newRun(id, { owner: crashed }));
    setup.close();
    // The compiled store (vitest's global setup builds dist/ before any test file runs).
    const module = fileURLToPath(new URL('../../../dist/src/store/sqliteStore.js', import.meta.url));
    // Each claimant opens the store, says so, and claims every run once the test says go; it
    // stays alive until all have answered (a winner that exited would be a dead owner).
    const script = `
      import { openSqliteStore } from ${JSON.stringify(module)};
      import { hostname } from 'node:os';
      const store = openSqliteStore(${JSON.stringify(file)});
      const owner = { host: hostname(), pid: process.pid, token: 'child' + process.argv[1] };
      console.log('ready');
      process.stdin.once('data', () => {
        const results = ${JSON.stringify(ids)}.map((id) => store.claim(id, owner, 60000));
        console.log(JSON.stringify(results));
        process.stdin.on('end', () => { store.close(); process.exit(0); });
      });`;
    const children = [0, 1, 2, 3].map((i) => spawn(process.execPath, ['--input-type=module', '-e', script, String(i)], { stdio: ['pipe', 'pipe', 'inherit'] }));
    const lines = children.map((child) => {
      const queue: string[] = [];
      const waiting: ((line: string) => void)[] = [];
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
        for (let at = out.indexOf('\n'); at >= 0; at = out.indexOf('\n')) {
          const line = out.slice(0, at);
          out = out.slice(at + 1);
          const next = waiting.shift();
          if (next) next(line);
          else queue.push(line);
        }
      });
      return (): Promise<string> =>
        new Promise((resolve, reject) => {
          const line = queue.shift();
          if (line !== undefined) return resolve(line);
          waiting.push(resolve);
          child.once('exit', (code) => reject(new Error(`claimant exited (${code}) before answering`)));
        });
    });
    expect(await Promise.all(lines.map((next) => next()))).toEqual(['ready', 'ready', 'ready', 'ready']);
    for (const child of children) child.stdin.write('go\n');
    const answers = (await Promise.all(lines.map((next) => next()))).map((line) => JSON.parse(line) as ClaimResult[]);
    await Promise.all(
      children.map(
        (child) =>
          new Promise((resolve) => {
            child.once('exit', resolve);
            child.stdin.end();
          }),
      ),
    );

    const check = new Database(file, { readonly: true });
    const tokens = new Map((check.prepare('SELECT id, owner_token AS token FROM runs').all() as { id: string; token: string }[]).map((r) => [r.id, r.token]));
    check.close();
    ids.forEach((id, i) => {
      const results = answers.map((a) => a[i]!);
      expect(
        results.filter((r) => r.ok),
        id,
      ).toHaveLength(1);
      const winner = `child${results.findIndex((r) => r.ok)}`;
      expect(tokens.get(id)).toBe(winner);
      for (const r of results) if (!r.ok) expect(r.holder.token).toBe(winner);
    });
  });

  it('gives runs created by several processes at once numbers of their own, so no journal holds the records of another run', async () => {
    const file = join(dir, 'numbers.db');
    openSqliteStore(file).close();
    const module = fileURLToPath(new URL('../../../dist/src/store/sqliteStore.js', import.meta.url));
    // Each process waits for the others to be ready, then creates its runs and appends to each,
    // interleaved, as fast as it can.
    const script = `
      import { openSqliteStore } from ${JSON.stringify(module)};
      const me = process.argv[1];
      const store = openSqliteStore(${JSON.stringify(file)});
      const owner = { host: 'h', pid: process.pid, token: 'p' + me };
      console.log('ready');
      process.stdin.once('data', () => {
        const ids = Array.from({ length: 25 }, (_, k) => 'p' + me + '-' + k);
        for (const id of ids) store.createRun({ id, task: 't', cwd: '/w', options: { tools: [] }, startedAt: 1, owner, leaseMs: 60000 });
        for (let seq = 1; seq <= 3; seq++)
          for (const id of ids) store.append([{ runId: id, seq, session: 'root', ts: seq, record: { type: 'message', role: 'user', content: id + ' ' + seq } }]);
        store.close();
        console.log('done');
      });`;
    const children = [0, 1, 2, 3].map((i) => spawn(process.execPath, ['--input-type=module', '-e', script, String(i)], { stdio: ['pipe', 'pipe', 'inherit'] }));
    const said = (child: (typeof children)[number], word: string): Promise<void> =>
      new Promise((resolve, reject) => {
        let out = '';
        const listen = (chunk: Buffer): void => {
          out += chunk.toString();
          if (out.split('\n').includes(word)) {
            child.stdout.off('data', listen);
            resolve();
          }
        };
        child.stdout.on('data', listen);
        child.once('exit', (code) => reject(new Error(`process exited (${code}) before saying ${word}`)));
      });
    await Promise.all(children.map((child) => said(child, 'ready')));
    const finished = children.map((child) => said(child, 'done'));
    for (const child of children) child.stdin.write('go\n');
    await Promise.all(finished);
    const check = new Database(file, { readonly: true });
    try {
      const nums = (check.prepare('SELECT num FROM runs').all() as { num: number }[]).map((r) => r.num);
      expect(new Set(nums).size).toBe(100);
      const rows = check.prepare('SELECT run_id, seq, body FROM journal ORDER BY run_id, seq').all() as { run_id: string; seq: number; body: string }[];
      expect(rows).toHaveLength(300);
      for (const r of rows) expect(JSON.parse(r.body).content).toBe(`${r.run_id} ${r.seq}`);
    } finally {
      check.close();
    }
  });

  it('keeps every append of a process killed mid-run (its WAL not checkpointed), and lists the run as interrupted', () => {
    const file = join(dir, 'killed.db');
    const module = fileURLToPath(new URL('../../../dist/src/store/sqliteStore.js', import.meta.url));
    const script = `
      import { openSqliteStore } from ${JSON.stringify(module)};
      import { hostname } from 'node:os';
      const store = openSqliteStore(${JSON.stringify(file)});
      const owner = { host: hostname(), pid: process.pid, token: 'victim' };
      store.createRun({ id: 'r', task: 't', cwd: '/', options: { tools: [] }, startedAt: 1, owner, leaseMs: 3600000 });
      for (let seq = 1; seq <= 50; seq++) store.append([{ runId: 'r', seq, session: 'root', ts: seq, record: { type: 'queued', text: 'n' + seq } }]);
      process.kill(process.pid, 'SIGKILL');`;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    expect(child.signal, child.stderr).toBe('SIGKILL');
    expect(statSync(`${file}-wal`).size).toBeGreaterThan(0);
    const store = track(openSqliteStore(file));
    expect(store.journal('r').map((r) => r.record)).toEqual(Array.from({ length: 50 }, (_, i) => ({ type: 'queued', text: `n${i + 1}` })));
    expect(store.listRuns()[0]?.status).toBe('interrupted');
    expect(store.claim('r', me('resumer'), 1000)).toEqual({ ok: true });
  });

  it('takes a 0-byte file, and an empty unmarked SQLite file, as a new store', () => {
    const empty = join(dir, 'empty.db');
    writeFileSync(empty, '');
    const store = track(openSqliteStore(empty, options));
    store.createRun(newRun('r'));
    expect(marks(empty)).toMatchObject({ applicationId: EXARCH_ID, userVersion: 3 });

    const blank = join(dir, 'blank.db');
    const raw = new Database(blank);
    raw.pragma('journal_mode = WAL');
    raw.close();
    expect(statSync(blank).size).toBeGreaterThan(0);
    track(openSqliteStore(blank, options)).close();
    expect(marks(blank)).toMatchObject({ applicationId: EXARCH_ID, userVersion: 3, tables: ['bursts', 'runs'] });
  });

  describe('refuses a bad file with a one-line StoreError naming it, and leaves its bytes alone', () => {
    function refuse(file: string, kind: StoreErrorKind, exactly?: string): void {
      const before = existsSync(file) && statSync(file).isFile() ? sha256(file) : undefined;
      const error = errorOf(() => track(openSqliteStore(file, options)));
      expect(error).toBeInstanceOf(Error);
      expect(error.name).toBe('StoreError');
      expect(error.kind).toBe(kind);
      expect(error.file).toBe(file);
      expect(error.message).toContain(file);
      expect(error.message).not.toMatch(/[\r\n]/);
      if (exactly !== undefined) expect(error.message).toBe(exactly);
      if (before !== undefined) expect(sha256(file)).toBe(before);
    }

    it('a text file is not an exarch database', () => {
      const file = join(dir, 'notes.db');
      writeFileSync(file, 'SQLite? no: just some notes\n'.repeat(300));
      refuse(file, 'not-exarch', `the run store ${file} is not an exarch database (not a SQLite file)`);
    });

    it('another application’s database (tables, or its own application id) is not an exarch database', () => {
      const tables = join(dir, 'other.db');
      const db = new Database(tables);
      db.exec("CREATE TABLE notes (body TEXT); INSERT INTO notes VALUES ('mine')");
      db.close();
      refuse(tables, 'not-exarch', `the run store ${tables} is not an exarch database`);

      const marked = join(dir, 'marked.db');
      const other = new Database(marked);
      other.pragma('application_id = 0x12345678');
      other.close();
      expect(statSync(marked).size).toBeGreaterThan(0);
      refuse(marked, 'not-exarch');
    });

    it('an exarch database with garbage over its pages, or truncated, is corrupt', () => {
      const original = readFileSync(exarchFile('good.db'));
      const cases: [string, Buffer][] = [
        ['pages.db', garble(Buffer.from(original), 4096, original.length)],
        ['page1.db', garble(Buffer.from(original), 100, 4096)],
        ['middle.db', garble(Buffer.from(original), 10 * 4096, 12 * 4096)],
        ['truncated.db', Buffer.from(original).subarray(0, 3 * 4096)],
        ['header.db', Buffer.from(original).subarray(0, 50)],
      ];
      for (const [name, bytes] of cases) {
        const file = join(dir, name);
        writeFileSync(file, bytes);
        refuse(file, 'corrupt');
        expect(errorOf(() => openSqliteStore(file)).message).toMatch(
          new RegExp(`^the run store ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is corrupt \\(.+\\)$`),
        );
      }
    });

    it('a database of a newer schema is refused with both versions', () => {
      const file = exarchFile('newer.db');
      const db = new Database(file);
      db.pragma('user_version = 7');
      db.close();
      refuse(file, 'newer-schema', `the run store ${file} was written by a newer exarch (schema 7; this exarch reads 3)`);
      expect(marks(file).userVersion).toBe(7);
    });

    it('a directory, or a path through a file, cannot be opened', () => {
      const folder = join(dir, 'folder.db');
      mkdirSync(folder);
      refuse(folder, 'unreadable');
      const blocker = join(dir, 'blocker');
      writeFileSync(blocker, 'a file where a directory should be');
      const before = sha256(blocker);
      refuse(join(blocker, 'exarch.db'), 'unreadable');
      refuse(join(blocker, 'sub', 'exarch.db'), 'unreadable');
      expect(sha256(blocker)).toBe(before);
    });
  });
});

describe('SQLite store: checkpoints off the event loop', () => {
  /** Appends `mb` megabytes to run `r` of `store`, in bursts of one 4 KiB row. */
  function fill(store: SqliteRunStore, mb: number, from = 1): number {
    const text = 'x'.repeat(4000);
    let seq = from;
    for (let n = 0; n < mb * 256; n++, seq++) store.append([row('r', seq, { type: 'queued', text })]);
    return seq;
  }
  const sizeOf = (file: string): number => (existsSync(file) ? statSync(file).size : 0);

  it('copies the WAL back into the file while the run goes on, so the WAL stays bounded', async () => {
    const file = join(dir, 'busy.db');
    const store = track(openSqliteStore(file, options));
    store.createRun(newRun('r'));
    const fileBefore = sizeOf(file);
    let seq = 1;
    let largestWal = 0;
    // 96 MB written; SQLite's own checkpoint is off on the writing connection.
    for (let round = 0; round < 24; round++) {
      seq = fill(store, 4, seq);
      largestWal = Math.max(largestWal, sizeOf(`${file}-wal`));
      // The worker's checkpoint runs on another thread: give it a turn to answer.
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(sizeOf(file) - fileBefore, 'bytes the checkpoints copied into the database file').toBeGreaterThan(48 * 1024 * 1024);
    // Without checkpoints it would hold all 96 MB and more; the bound leaves room for a slow worker on a loaded machine.
    expect(largestWal, 'the largest the WAL grew').toBeLessThan(72 * 1024 * 1024);
    expect(store.journal('r')).toHaveLength(seq - 1);
  });

  it('leaves no WAL behind when closed just as the worker was asked for a checkpoint', async () => {
    // SQLite fails a second checkpoint at once rather than wait for the first, so the store's own
    // would find the worker's starting and leave the WAL behind.
    for (let n = 0; n < 5; n++) {
      const file = join(dir, `closing-${n}.db`);
      const store = openSqliteStore(file, options);
      store.createRun(newRun('r'));
      // 4 MB: more than a checkpoint's worth since the one asked for on the way.
      let seq = fill(store, 4);
      // The worker answers; the next write asks it for another checkpoint.
      await new Promise((resolve) => setTimeout(resolve, 100));
      seq = fill(store, 1 / 256, seq);
      store.close();
      expect(sizeOf(`${file}-wal`), `store ${n}: the WAL's bytes after close`).toBe(0);
      const db = new Database(file, { readonly: true });
      expect(db.prepare("SELECT count(*) AS n FROM journal WHERE run_id = 'r'").get()).toEqual({ n: seq - 1 });
      db.close();
    }
  });

  it('waits, when closed, for a checkpoint the worker is running', async () => {
    const file = join(dir, 'copying.db');
    const db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE t (x TEXT)');
    const checkpointer = new WalCheckpointer(db, file, 1);
    const insert = db.prepare('INSERT INTO t VALUES (?)');
    const write = (mb: number): void => {
      for (let n = 0; n < mb * 256; n++) insert.run('x'.repeat(4000));
    };
    try {
      // The worker starts and answers its first checkpoint.
      checkpointer.committed(0);
      await new Promise((resolve) => setTimeout(resolve, 300));
      write(12);
      const before = statSync(file).size;
      checkpointer.committed(0);
      expect(statSync(file).size, 'the database file as the checkpoint was asked for: not copied on this thread').toBe(before);
      // The worker is copying 12 MB now (and syncing them), which takes longer than this.
      const until = performance.now() + 10;
      while (performance.now() < until);
      checkpointer.close();
      db.pragma('busy_timeout = 0');
      expect(db.pragma('wal_checkpoint(TRUNCATE)'), "the store's closing checkpoint").toEqual([{ busy: 0, log: 0, checkpointed: 0 }]);
      expect(statSync(file).size - before, 'bytes copied into the database file').toBeGreaterThan(12 * 1024 * 1024);
    } finally {
      db.close();
    }
  });

  it('does not keep a process alive that never closed its store', () => {
    const file = join(dir, 'open.db');
    const module = fileURLToPath(new URL('../../../dist/src/store/sqliteStore.js', import.meta.url));
    const script = `
      import { openSqliteStore } from ${JSON.stringify(module)};
      const store = openSqliteStore(${JSON.stringify(file)});
      store.createRun({ id: 'r', task: 't', cwd: '/', options: { tools: [] }, startedAt: 1, owner: { host: 'h', pid: process.pid, token: 't' }, leaseMs: 3600000 });
      const text = 'x'.repeat(4000);
      for (let seq = 1; seq <= 3000; seq++) store.append([{ runId: 'r', seq, session: 'root', ts: seq, record: { type: 'queued', text } }]);
      setTimeout(() => console.log('appended'), 50);`;
    // A hang is killed after 30 s and reported as a signal rather than a test timeout.
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(child.signal, 'the process had to be killed: something kept it alive').toBeNull();
    expect(child.stdout.trim(), child.stderr).toBe('appended');
    expect(child.status).toBe(0);
    const store = track(openSqliteStore(file));
    expect(store.journal('r')).toHaveLength(3000);
  });
});
