import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import { openPostgresStore, type PostgresRunStore } from '../../../src/store/postgresStore.js';
import type { Queued } from '../../../src/store/jobStore.js';
import type { JournalRow, NewRun, RunOwner } from '../../../src/store/runStore.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { query } from '../../support/storedRuns.js';
import { startBoss } from '../../../src/workers/runQueue.js';
import { requeueSpreadRun } from '../../../src/workers/spreadResume.js';

/**
 * The Postgres store's side of sessions run as jobs of their own (issue 18): several writers on
 * one run's journal, one session's records read back, a claim per session, cancels asked from
 * elsewhere. The oracles read the server with a connection of their own.
 */

const postgres = postgresForFile('test/e2e/store/postgresStore.sessions.test.ts');

const HOST = hostname();
const owner = (token: string, pid = process.pid): RunOwner => ({ host: HOST, pid, token });
const newRun = (id: string): NewRun => ({ id, task: 'task', cwd: '/work', options: { tools: [] }, startedAt: 1, owner: owner('submitter'), leaseMs: 0 });
const note = (text: string): JournalRecord => ({ type: 'queued', text });
/** A row as a session's journal makes it: its own seq, which a shared append replaces. */
const row = (session: string, record: JournalRecord, seq = 1): JournalRow => ({ runId: 'r', seq, session, ts: 1, record });
/** A queue whose insert runs `sql` on the connection it is given: what a commit's jobs do in its transaction. */
const inTransaction = (sql: string): Queued => ({ queue: { insert: (_jobs, { db }) => db.executeSql(sql, []) }, jobs: [] });
const outcome = (text: string): JournalRecord => ({
  type: 'outcome',
  outcome: 'replied',
  text,
  usage: { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
  totalUsage: { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 },
});

async function withStores<T>(count: number, fn: (stores: PostgresRunStore[], url: string) => Promise<T>): Promise<T> {
  const url = await postgres.server().createDatabase();
  const stores = Array.from({ length: count }, () => openPostgresStore(url));
  try {
    return await fn(stores, url);
  } finally {
    await Promise.all(stores.map((store) => store.close()));
  }
}

describe.skipIf(!postgres.available)('postgres store: sessions as jobs', () => {
  it('takes shared appends to one run from several stores at once: seq 1, 2, 3, … with no gap, each writer’s rows in its order', async () => {
    await withStores(4, async (stores, url) => {
      await stores[0]?.createRun(newRun('r'));
      await Promise.all(
        stores.map(async (store, writer) => {
          // Every writer numbers its rows 1, 2, …: the store gives them the run's next numbers.
          for (let burst = 0; burst < 25; burst++)
            await store.commit([row(`root/w${writer}`, note(`${burst}a`)), row(`root/w${writer}`, note(`${burst}b`), 2)]);
        }),
      );
      const rows = await query<{ seq: number; session: string; body: string }>(
        url,
        "SELECT seq, session, body FROM exarch.journal WHERE run_id = 'r' ORDER BY seq",
      );
      expect(rows.map((r) => r.seq)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1));
      for (let writer = 0; writer < 4; writer++) {
        const texts = rows.filter((r) => r.session === `root/w${writer}`).map((r) => (JSON.parse(r.body) as { text: string }).text);
        expect(texts).toEqual(Array.from({ length: 25 }, (_, burst) => [`${burst}a`, `${burst}b`]).flat());
      }
      // A burst's rows are consecutive: no other writer's row lands inside one.
      for (let i = 0; i < rows.length; i += 2) expect(rows[i]?.session).toBe(rows[i + 1]?.session);
    });
  });

  it('a shared append after appends numbered by a process of its own (a run resumed whole) goes on after them; one to an unknown run is refused', async () => {
    await withStores(1, async ([store], url) => {
      if (!store) throw new Error('no store');
      await store.createRun(newRun('r'));
      await store.commit([row('root', note('spread'))]);
      await store.append([row('root', note('whole 2'), 2), row('root', note('whole 3'), 3)]);
      await store.commit([row('root', note('spread again'))]);
      expect(await query(url, "SELECT seq, body FROM exarch.journal WHERE run_id = 'r' ORDER BY seq")).toEqual(
        ['spread', 'whole 2', 'whole 3', 'spread again'].map((text, i) => ({ seq: i + 1, body: JSON.stringify(note(text)) })),
      );
      await expect(store.commit([{ ...row('root', note('lost')), runId: 'nope' }])).rejects.toMatchObject({ kind: 'unknown-run' });
      expect(await query(url, "SELECT count(*)::int AS n FROM exarch.journal WHERE run_id = 'nope'")).toEqual([{ n: 0 }]);
    });
  });

  it('a follower reading past its last seq while writers append misses no row', async () => {
    await withStores(3, async ([follower, ...writers]) => {
      if (!follower) throw new Error('no follower');
      await follower.createRun(newRun('r'));
      let writing = true;
      const written = Promise.all(
        writers.map(async (store, writer) => {
          for (let n = 0; n < 60; n++) await store.commit([row(`root/w${writer}`, note(String(n)))]);
        }),
      ).finally(() => (writing = false));
      const seen: number[] = [];
      while (writing || seen.length < 120) {
        for (const r of await follower.journalAfter('r', seen.at(-1) ?? 0)) seen.push(r.seq);
        if (!writing && seen.length >= 120) break;
      }
      await written;
      expect(seen).toEqual(Array.from({ length: 120 }, (_, i) => i + 1));
    });
  });

  it('writes a shared append and what it starts in one transaction: a failure in either writes neither', async () => {
    await withStores(1, async ([store], url) => {
      if (!store) throw new Error('no store');
      await store.createRun(newRun('r'));
      await query(url, 'CREATE TABLE public.started (session TEXT NOT NULL)');
      await store.commit([row('root', note('spawned'))], inTransaction("INSERT INTO public.started VALUES ('root/a')"));
      await expect(store.commit([row('root', note('lost'))], inTransaction('INSERT INTO public.nowhere VALUES (1)'))).rejects.toThrow(/nowhere/);
      expect(await query(url, "SELECT body FROM exarch.journal WHERE run_id = 'r' ORDER BY seq")).toEqual([{ body: JSON.stringify(note('spawned')) }]);
      expect(await query(url, 'SELECT session FROM public.started')).toEqual([{ session: 'root/a' }]);
    });
  });

  it("reads one session's records, or its whole subtree, and the outcomes of the sessions asked about, of several runs in one statement", async () => {
    await withStores(1, async ([store]) => {
      if (!store) throw new Error('no store');
      await store.createRun(newRun('r'));
      await store.createRun(newRun('q'));
      await store.commit([
        { ...row('root/a', outcome('q: a done')), runId: 'q' },
        { ...row('root/b', note('q: b working')), runId: 'q' },
      ]);
      await store.commit([row('root', note('r1')), row('root/a', note('a1')), row('root/ab', note('ab1')), row('root/a/x', note('ax1'))]);
      await store.commit([row('root/a', outcome('a done')), row('root/ab', outcome('ab done')), row('root', note('r2'))]);
      const texts = (rows: readonly JournalRow[]): string[] => rows.map((r) => `${r.session}:${r.record.type === 'queued' ? r.record.text : r.record.type}`);
      expect(texts(await store.sessionJournal('r', 'root'))).toEqual(['root:r1', 'root:r2']);
      // `root/ab` is not below `root/a`: a prefix of the id is not enough.
      expect(texts(await store.sessionJournal('r', 'root/a', { subtree: true }))).toEqual(['root/a:a1', 'root/a/x:ax1', 'root/a:outcome']);
      const of = (runId: string, ...sessions: string[]) => sessions.map((session) => ({ runId, session }));
      expect(texts(await store.outcomes(of('r', 'root/a', 'root/a/x')))).toEqual(['root/a:outcome']);
      // Two runs at once: each outcome with its run; a session of one run is not the same-named one of another.
      const both = await store.outcomes([...of('r', 'root/a', 'root/ab'), ...of('q', 'root/a', 'root/b')]);
      expect(both.map((r) => `${r.runId}:${r.session}:${r.record.type === 'outcome' ? r.record.text : r.record.type}`).sort()).toEqual([
        'q:root/a:q: a done',
        'r:root/a:a done',
        'r:root/ab:ab done',
      ]);
      expect(await store.outcomes(of('q', 'root/ab'))).toEqual([]);
      expect(await store.outcomes([])).toEqual([]);
    });
  });

  it('lets exactly one of several claimants take a session; a live holder keeps it, a released or dead one lets it go', async () => {
    await withStores(3, async (stores, url) => {
      await stores[0]?.createRun(newRun('r'));
      const results = await Promise.all(stores.map((store, i) => store.claimSession('r', 'root/a', owner(`t${i}`), 60_000, `job-${i}`)));
      expect(results.filter((r) => r.ok)).toHaveLength(1);
      const winner = results.findIndex((r) => r.ok);
      const other = stores[(winner + 1) % 3] as PostgresRunStore;
      // The refused learn whose job holds it: the same job offered again is told apart from any other.
      const refused = await other.claimSession('r', 'root/a', owner('late'), 60_000, 'job-late');
      expect(refused).toEqual({ ok: false, holder: owner(`t${winner}`), leaseUntil: expect.any(Number), job: `job-${winner}` });
      // Another session of the same run is free.
      expect(await other.claimSession('r', 'root/b', owner('late'), 60_000)).toEqual({ ok: true });
      await stores[winner]?.releaseSession('r', 'root/a', owner(`t${winner}`));
      expect(await other.claimSession('r', 'root/a', owner('late'), 60_000)).toEqual({ ok: true });
      // A holder whose process is gone (on this host) loses it at once, lease or not.
      await other.claimSession('r', 'root/c', owner('ghost', 2 ** 22 + 7), 60_000);
      expect(await other.claimSession('r', 'root/c', owner('next'), 60_000)).toEqual({ ok: true });
      // Renewing, of any runs and tokens at once, reports the leases no longer held by their token.
      await stores[0]?.createRun(newRun('q'));
      await other.claimSession('q', 'root/a', owner('other-run'), 1_000);
      const lease = (runId: string, session: string, token: string) => ({ runId, session, token });
      expect(
        await other.renewSessions(
          [lease('r', 'root/a', 'late'), lease('r', 'root/c', 'late'), lease('q', 'root/a', 'other-run'), lease('q', 'root/a', 'late')],
          60_000,
        ),
      ).toEqual([lease('r', 'root/c', 'late'), lease('q', 'root/a', 'late')]);
      const leases = await query<{ run_id: string; lease_until: string }>(
        url,
        "SELECT run_id, lease_until FROM exarch.sessions WHERE owner_token IN ('late', 'other-run') AND session = 'root/a' ORDER BY run_id",
      );
      // Both renewed to a minute from now, the other run's 1 s lease included.
      expect(leases.map((l) => l.run_id)).toEqual(['q', 'r']);
      for (const l of leases) expect(Number(l.lease_until)).toBeGreaterThan(Date.now() + 30_000);
    });
  });

  it('keeps the first cancel asked of a session, before it ever ran or while it runs', async () => {
    await withStores(1, async ([store]) => {
      if (!store) throw new Error('no store');
      await store.createRun(newRun('r'));
      await store.requestCancel('r', 'root/a', 'parent cancelled');
      await store.requestCancel('r', 'root/a', 'second thoughts');
      await store.claimSession('r', 'root/b', owner('t'), 60_000);
      await store.requestCancel('r', 'root/b', 'stop');
      expect(await store.cancelRequests('r', ['root/a', 'root/b', 'root/c'])).toEqual(
        new Map([
          ['root/a', 'parent cancelled'],
          ['root/b', 'stop'],
        ]),
      );
    });
  });

  it("tells the watch what was asked of sessions of several runs in one statement: a session's own, or any below a subtree it keeps", async () => {
    await withStores(1, async ([store]) => {
      if (!store) throw new Error('no store');
      await store.createRun(newRun('r'));
      await store.createRun(newRun('q'));
      await store.requestCancel('r', 'root/a', 'stop a');
      await store.requestCancel('r', 'root/b/deep', 'stop deep');
      await store.requestCancel('r', 'root/bb', 'not below root/b');
      await store.requestCancel('q', 'root/a', 'stop q a');
      const signals = await store.sessionSignals([
        { runId: 'r', session: 'root/a', subtree: false },
        { runId: 'r', session: 'root/b', subtree: true },
        { runId: 'q', session: 'root/a', subtree: false },
        { runId: 'q', session: 'root/z', subtree: false },
      ]);
      expect(signals.map((s) => `${s.runId}:${s.session}:${s.cancel}`).sort()).toEqual(['q:root/a:stop q a', 'r:root/a:stop a', 'r:root/b/deep:stop deep']);
      expect(await store.sessionSignals([])).toEqual([]);
    });
  });

  it('resuming a spread run queues each session that has not ended, once, root first; a budgeted subtree through the session that keeps it', async () => {
    await withStores(1, async ([store], url) => {
      if (!store) throw new Error('no store');
      await store.createRun(newRun('r'));
      const spawn = (id: string, budget?: { tokens: number }): JournalRecord => ({
        type: 'spawn',
        name: id.split('/').at(-1) ?? id,
        id,
        actorId: id,
        task: 'work',
        ...(budget ? { budget } : {}),
      });
      await store.commit([
        row('root', note('root began')),
        row('root', spawn('root/done')),
        row('root', spawn('root/open')),
        row('root', spawn('root/never')),
        row('root', spawn('root/lead', { tokens: 100 })),
      ]);
      await store.commit([row('root/done', note('did')), row('root/done', outcome('done'))]);
      await store.commit([row('root/open', note('working')), row('root/open', spawn('root/open/deep'))]);
      await store.commit([row('root/lead', spawn('root/lead/x')), row('root/lead/x', note('inside'))]);
      const boss = await startBoss(url);
      try {
        expect(await requeueSpreadRun(store, boss, 'r')).toEqual(['root', 'root/open', 'root/never', 'root/lead', 'root/open/deep']);
      } finally {
        await boss.stop({ graceful: false, wait: true });
      }
      const jobs = await query<{ session: string }>(url, "SELECT data ->> 'session' AS session FROM pgboss.job WHERE name = 'exarch-runs' ORDER BY session");
      expect(jobs.map((j) => j.session)).toEqual(['root', 'root/lead', 'root/never', 'root/open', 'root/open/deep']);
      // What started each session, read back for a wake that carries none.
      const spawns = await store.spawnsOf('r', ['root/lead', 'root/lead/x', 'root/nobody']);
      expect(spawns.map((r) => [r.session, r.record.type === 'spawn' ? r.record.id : ''])).toEqual([
        ['root', 'root/lead'],
        ['root/lead', 'root/lead/x'],
      ]);
    });
  });
});
