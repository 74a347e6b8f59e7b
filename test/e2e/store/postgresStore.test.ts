import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import { POSTGRES_SCHEMA_VERSION } from '../../../src/store/postgresSchema.js';
import { openPostgresStore } from '../../../src/store/postgresStore.js';
import { Redactor } from '../../../src/engine/redact.js';
import type { ClaimResult, JournalRow, NewRun, RunOwner } from '../../../src/store/runStore.js';
import { StoreError } from '../../../src/store/storeError.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { query } from '../../support/storedRuns.js';

/**
 * What only the Postgres store can get wrong (the RunStore contract itself runs in store.test.ts):
 * its schema and migrations, a shared server with several stores and processes at once, a server
 * that restarts under it. One real server; the oracles read it with a connection of their own.
 */

const postgres = postgresForFile('test/e2e/store/postgresStore.test.ts');

const HOST = hostname();
const me = (token: string): RunOwner => ({ host: HOST, pid: process.pid, token });
const newRun = (id: string, overrides: Partial<NewRun> = {}): NewRun => ({
  id,
  task: `task ${id}`,
  cwd: '/work',
  options: { tools: [] },
  startedAt: 1,
  owner: me('first'),
  leaseMs: 60_000,
  ...overrides,
});
const message = (text: string): JournalRecord => ({ type: 'message', role: 'assistant', content: [{ type: 'text', text }] });
const row = (runId: string, seq: number, record: JournalRecord, session = 'root'): JournalRow => ({ runId, seq, session, ts: seq, record });

async function refusal(promise: Promise<unknown>): Promise<StoreError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof StoreError) return error;
    throw error;
  }
  throw new Error('expected a StoreError');
}

describe.skipIf(!postgres.available)('postgres run store', () => {
  it('creates its schema on first use, in its own namespace, at the current version', async () => {
    const url = await postgres.server().createDatabase();
    const store = openPostgresStore(url);
    try {
      expect(await query(url, "SELECT 1 FROM information_schema.schemata WHERE schema_name = 'exarch'")).toEqual([]);
      expect(await store.listRuns()).toEqual([]);
      const tables = await query<{ table_name: string }>(
        url,
        "SELECT table_name FROM information_schema.tables WHERE table_schema = 'exarch' ORDER BY table_name",
      );
      expect(tables.map((t) => t.table_name)).toEqual(['commands', 'journal', 'runs', 'schema_version', 'sessions']);
      expect(await query(url, 'SELECT version FROM exarch.schema_version')).toEqual([{ version: POSTGRES_SCHEMA_VERSION }]);
      expect(await query(url, "SELECT count(*)::int AS n FROM information_schema.tables WHERE table_schema = 'public'")).toEqual([{ n: 0 }]);
    } finally {
      await store.close();
    }
  });

  it('lets several stores starting at once on an empty database migrate it once', async () => {
    const url = await postgres.server().createDatabase();
    const stores = Array.from({ length: 6 }, () => openPostgresStore(url));
    try {
      await Promise.all(stores.map((s, i) => s.createRun(newRun(`r${i}`))));
      expect(await query(url, 'SELECT version FROM exarch.schema_version')).toEqual([{ version: POSTGRES_SCHEMA_VERSION }]);
      expect((await stores[0]!.listRuns()).map((r) => r.id).sort()).toEqual(['r0', 'r1', 'r2', 'r3', 'r4', 'r5']);
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('migrates a database of schema 1 on first use: the steering table, the sessions and their spans added, the runs kept', async () => {
    const url = await postgres.server().createDatabase();
    const first = openPostgresStore(url);
    await first.createRun(newRun('r'));
    await first.close();
    // Schema 1 as an earlier exarch left it: no steering table, nothing of schema 3.
    await query(url, 'DROP TABLE exarch.commands');
    await query(url, 'DROP TABLE exarch.sessions');
    await query(url, 'DROP INDEX exarch.journal_sessions');
    await query(url, 'ALTER TABLE exarch.journal DROP COLUMN burst');
    await query(url, 'ALTER TABLE exarch.runs DROP COLUMN next_seq');
    await query(url, 'UPDATE exarch.schema_version SET version = 1');
    const store = openPostgresStore(url);
    try {
      expect((await store.listRuns()).map((r) => r.id)).toEqual(['r']);
      expect(await query(url, 'SELECT version FROM exarch.schema_version')).toEqual([{ version: 4 }]);
      expect(await store.sendCommand('r', '/help')).toBeGreaterThan(0);
      // Schema 4: a session's span, recorded once.
      await store.recordSpan('r', 'root', '00-aa-bb-01');
      await store.recordSpan('r', 'root', '00-cc-dd-01');
      expect(await store.spansOf('r')).toEqual(new Map([['root', '00-aa-bb-01']]));
    } finally {
      await store.close();
    }
  });

  it('hands each steering line to one taker, in the order sent; an unanswered one again to the same taker; answers by number', async () => {
    const url = await postgres.server().createDatabase();
    const store = openPostgresStore(url);
    try {
      await store.createRun(newRun('r'));
      const help = await store.sendCommand('r', '/help');
      const cancel = await store.sendCommand('r', '/cancel root/lead');
      await store.sendCommand('other', '/help');
      expect(await store.answers([help, cancel])).toEqual([]);
      expect(await store.takeCommands('r', 'worker-a')).toEqual([
        { seq: help, line: '/help' },
        { seq: cancel, line: '/cancel root/lead' },
      ]);
      // Taken: another worker gets nothing; the first is asked again only for what it did not answer.
      expect(await store.takeCommands('r', 'worker-b')).toEqual([]);
      await store.answerCommand(help, 'exarch: running: root');
      expect(await store.takeCommands('r', 'worker-a')).toEqual([{ seq: cancel, line: '/cancel root/lead' }]);
      expect(await store.answers([help, cancel])).toEqual([{ seq: help, answer: 'exarch: running: root' }]);
      const late = await store.sendCommand('r', '/msg root hi');
      expect(await store.takeCommands('r', 'worker-b')).toEqual([{ seq: late, line: '/msg root hi' }]);
    } finally {
      await store.close();
    }
  });

  it('steering lines a worker let go of, or took and never answered for 30 s, go to the next; a line no one took can be withdrawn', async () => {
    const url = await postgres.server().createDatabase();
    let now = 1_000_000;
    const store = openPostgresStore(url, { now: () => now });
    try {
      await store.createRun(newRun('r'));
      const a = await store.sendCommand('r', '/help');
      const b = await store.sendCommand('r', '/msg root hi');
      expect((await store.takeCommands('r', 'worker-a')).map((c) => c.seq)).toEqual([a, b]);
      // worker-a acted on the first and stopped: the other goes to the next worker at once.
      await store.releaseCommands('r', 'worker-a', [a]);
      expect((await store.takeCommands('r', 'worker-b')).map((c) => c.seq)).toEqual([b]);
      // worker-b died with it taken: 30 s on, another takes it; worker-a's own is left to worker-a until then too.
      now += 29_000;
      expect(await store.takeCommands('r', 'worker-c')).toEqual([]);
      now += 31_000;
      expect((await store.takeCommands('r', 'worker-c')).map((c) => c.seq)).toEqual([a, b]);
      // Withdrawn: only a line no one took.
      const untaken = await store.sendCommand('r', '/cancel root/x');
      expect(await store.withdrawCommands([b, untaken])).toBe(1);
      expect(await query(url, 'SELECT seq FROM exarch.commands ORDER BY seq')).toEqual([{ seq: String(a) }, { seq: String(b) }]);
    } finally {
      await store.close();
    }
  });

  it('refuses a database of a newer schema with one line naming both versions, and writes nothing', async () => {
    const url = await postgres.server().createDatabase();
    const first = openPostgresStore(url);
    await first.createRun(newRun('r'));
    await first.close();
    await query(url, 'UPDATE exarch.schema_version SET version = 7');
    const store = openPostgresStore(url);
    try {
      const error = await refusal(store.createRun(newRun('other')));
      expect(error.kind).toBe('newer-schema');
      expect(error.message).toBe(`the run store ${url} was written by a newer exarch (schema 7; this exarch reads ${POSTGRES_SCHEMA_VERSION})`);
      expect((await refusal(store.listRuns())).kind).toBe('newer-schema');
      expect(await query(url, 'SELECT id FROM exarch.runs')).toEqual([{ id: 'r' }]);
      expect(await query(url, 'SELECT version FROM exarch.schema_version')).toEqual([{ version: 7 }]);
    } finally {
      await store.close();
    }
  });

  it('appends: rows written earlier are never rewritten by later appends or a release', async () => {
    const url = await postgres.server().createDatabase();
    const store = openPostgresStore(url);
    try {
      await store.createRun(newRun('r'));
      await store.append([row('r', 1, message('one')), row('r', 2, message('two'))]);
      // xmin is the transaction that wrote a row version: an UPDATE (a rewrite) would change it.
      const before = await query<{ seq: number; xmin: string }>(url, 'SELECT seq, xmin::text FROM exarch.journal ORDER BY seq');
      for (let seq = 3; seq <= 50; seq++) await store.append([row('r', seq, message(`n${seq}`))]);
      await store.release('r', me('first'), 'done');
      const after = await query<{ seq: number; xmin: string }>(url, 'SELECT seq, xmin::text FROM exarch.journal WHERE seq <= 2 ORDER BY seq');
      expect(after).toEqual(before);
      // One row version per record: nothing updated or deleted in the journal. (A backend reports
      // its counts when it ends: closing the store sends them.)
      await store.close();
      const stats = await waitForStats(url);
      expect(stats).toEqual({ ins: 50, upd: 0, del: 0 });
    } finally {
      await store.close();
    }
  });

  it('keeps secrets out of every column it writes', async () => {
    const url = await postgres.server().createDatabase();
    const secret = 'sk-test-0123456789abcdef';
    const store = openPostgresStore(url, { redactor: new Redactor([secret]) });
    try {
      await store.createRun(newRun('r', { task: `use ${secret} please`, options: { tools: [], note: `key=${secret}` } }));
      await store.append([row('r', 1, message(`the key is ${secret}`)), row('r', 2, { type: 'queued', text: JSON.stringify({ echoed: secret }) })]);
      const dump = await query<{ text: string }>(
        url,
        "SELECT (SELECT string_agg(r::text, '|') FROM exarch.runs AS r) || (SELECT string_agg(j::text, '|') FROM exarch.journal AS j) AS text",
      );
      expect(dump[0]?.text).toContain('[redacted]');
      expect(dump[0]?.text).not.toContain(secret);
      expect((await store.journal('r'))[0]?.record).toEqual(message('the key is [redacted]'));
    } finally {
      await store.close();
    }
  });

  it('lets exactly one of several stores racing for each run take it', async () => {
    const url = await postgres.server().createDatabase();
    const setup = openPostgresStore(url);
    const ids = Array.from({ length: 30 }, (_, i) => `r${i}`);
    for (const id of ids) await setup.createRun(newRun(id, { owner: { host: `gone-${HOST}`, pid: 1, token: 'crashed' }, leaseMs: -1 }));
    await setup.close();
    const stores = [0, 1, 2, 3].map(() => openPostgresStore(url, { poolSize: 8 }));
    try {
      const answers: ClaimResult[][] = await Promise.all(stores.map((s, i) => Promise.all(ids.map((id) => s.claim(id, me(`c${i}`), 60_000)))));
      const owners = new Map(
        (await query<{ id: string; owner_token: string }>(url, 'SELECT id, owner_token FROM exarch.runs')).map((r) => [r.id, r.owner_token]),
      );
      ids.forEach((id, n) => {
        const results = answers.map((a) => a[n]!);
        expect(
          results.filter((r) => r.ok),
          id,
        ).toHaveLength(1);
        expect(owners.get(id)).toBe(`c${results.findIndex((r) => r.ok)}`);
      });
    } finally {
      await Promise.all(stores.map((s) => s.close()));
    }
  });

  it('takes appends to one run from several stores at once; a seq taken by another is a conflict', async () => {
    const url = await postgres.server().createDatabase();
    const [a, b] = [openPostgresStore(url), openPostgresStore(url)];
    try {
      await a.createRun(newRun('r'));
      await Promise.all(
        Array.from({ length: 40 }, (_, i) => (i % 2 === 0 ? a : b).append([row('r', i + 1, message(`m${i + 1}`), i % 2 === 0 ? 'root' : 'root/w')])),
      );
      expect((await b.journal('r')).map((r) => r.seq)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
      expect((await refusal(b.append([row('r', 41, message('x')), row('r', 7, message('taken'))]))).kind).toBe('conflict');
      expect(await a.journal('r')).toHaveLength(40);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('carries on across a server restart: calls made while it is down wait for it, nothing is lost', async () => {
    const url = await postgres.server().createDatabase();
    const store = openPostgresStore(url, { reconnectMs: 30_000 });
    try {
      await store.createRun(newRun('r'));
      await store.append([row('r', 1, message('before'))]);
      const restarted = postgres.server().restart({ downMs: 300 });
      // Issued while the server goes down and comes back.
      const appended = store.append([row('r', 2, message('during'))]);
      await restarted;
      await appended;
      await store.append([row('r', 3, message('after'))]);
      expect((await store.journal('r')).map((r) => r.record)).toEqual([message('before'), message('during'), message('after')]);
      expect(await store.renew('r', me('first'), 1000)).toBe(true);
    } finally {
      await store.close();
    }
  });

  it('names an unreachable server in one line, without its password', async () => {
    const store = openPostgresStore(`postgres://exarch:hunter2-password@127.0.0.1:1/nowhere`, { reconnectMs: 0 });
    try {
      const error = await refusal(store.listRuns());
      expect(error.kind).toBe('unreadable');
      expect(error.message).toMatch(/^the run store postgres:\/\/exarch:\*\*\*@127\.0\.0\.1:1\/nowhere cannot be opened \(.+\)$/);
      expect(error.message).not.toContain('hunter2');
    } finally {
      await store.close();
    }
  });
});

/** The journal's lifetime row counts; the statistics collector reports them after a short delay. */
async function waitForStats(url: string): Promise<{ ins: number; upd: number; del: number }> {
  for (let i = 0; ; i++) {
    const rows = await query<{ ins: number; upd: number; del: number }>(
      url,
      "SELECT n_tup_ins::int AS ins, n_tup_upd::int AS upd, n_tup_del::int AS del FROM pg_stat_user_tables WHERE relname = 'journal'",
    );
    const stats = rows[0];
    if (stats && stats.ins > 0) return stats;
    if (i > 100) throw new Error('no statistics for the journal');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
