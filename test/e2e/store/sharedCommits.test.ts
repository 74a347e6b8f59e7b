import { hostname } from 'node:os';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import type { JobQueue, QueuedJob } from '../../../src/store/jobStore.js';
import { openPostgresStore, type PostgresRunStore } from '../../../src/store/postgresStore.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import { StoreError } from '../../../src/store/storeError.js';
import { postgresForFile } from '../../support/postgresServer.js';

/**
 * Group commit for spread runs' sessions (issue 40): the `commit`s a worker's sessions ask for in
 * one turn go in one transaction. Real Postgres; the oracles read the tables with their own
 * connection: a group shares one `burst` key, each run's rows are numbered in the order asked.
 */

const postgres = postgresForFile('test/e2e/store/sharedCommits.test.ts');
const opened: { store: PostgresRunStore; client: pg.Client }[] = [];
afterEach(async () => {
  for (const { store, client } of opened.splice(0)) {
    await store.close();
    await client.end();
  }
});

async function fresh(): Promise<{ store: PostgresRunStore; client: pg.Client; url: string }> {
  const url = await postgres.server().createDatabase();
  const store = openPostgresStore(url);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  opened.push({ store, client });
  for (const id of ['run-a', 'run-b']) {
    await store.createRun({
      id,
      task: `task ${id}`,
      cwd: '/work',
      options: { tools: [], spread: true },
      startedAt: 1,
      owner: { host: hostname(), pid: process.pid, token: 't' },
      leaseMs: 60_000,
    });
  }
  await client.query('CREATE TABLE test_jobs (name text, run text)');
  return { store, client, url };
}

const note = (text: string): JournalRecord => ({ type: 'queued', text });
/** A session's rows as a job hands them over: its own seqs, which a shared commit numbers anew. */
const rows = (runId: string, session: string, ...texts: string[]): JournalRow[] =>
  texts.map((text, i) => ({ runId, seq: i + 1, session, ts: 1, record: note(text) }));

/** A queue that writes its jobs into `test_jobs` with the commit's own connection. */
const queue = (fail = false): JobQueue => ({
  insert: async (jobs: QueuedJob[], { db }) => {
    if (fail) throw new Error('the queue refused');
    for (const job of jobs) await db.executeSql('INSERT INTO test_jobs (name, run) VALUES ($1, $2)', [job.name, String((job.data as { run: string }).run)]);
  },
});

async function journal(client: pg.Client): Promise<{ run_id: string; seq: number; session: string; body: string; burst: string }[]> {
  return (await client.query('SELECT run_id, seq, session, body, burst FROM exarch.journal ORDER BY run_id, seq')).rows;
}

describe.skipIf(!postgres.available)('shared commits: the sessions of a worker commit together', () => {
  it('commits asked for in one turn, of two runs and several sessions, with their jobs: one transaction, each run numbered in order', async () => {
    const { store, client } = await fresh();
    const jobs = queue();
    await Promise.all([
      store.commit(rows('run-a', 'root', 'a1', 'a2')),
      store.commit(rows('run-b', 'root', 'b1'), { queue: jobs, jobs: [{ name: 'wake', data: { run: 'run-b' } }] }),
      store.commit(rows('run-a', 'root/x', 'a3')),
      store.commit(rows('run-b', 'root/y', 'b2', 'b3'), { queue: jobs, jobs: [{ name: 'spawn', data: { run: 'run-b' } }] }),
    ]);
    const written = await journal(client);
    expect(written.map((row) => [row.run_id, row.seq, row.session, JSON.parse(row.body).text])).toEqual([
      ['run-a', 1, 'root', 'a1'],
      ['run-a', 2, 'root', 'a2'],
      ['run-a', 3, 'root/x', 'a3'],
      ['run-b', 1, 'root', 'b1'],
      ['run-b', 2, 'root/y', 'b2'],
      ['run-b', 3, 'root/y', 'b3'],
    ]);
    expect(new Set(written.map((row) => row.burst)).size).toBe(1);
    expect((await client.query('SELECT name FROM test_jobs ORDER BY name')).rows.map((row) => row.name)).toEqual(['spawn', 'wake']);

    // A turn later: a new group, numbered after the first.
    await store.commit(rows('run-a', 'root', 'a4'));
    const later = await journal(client);
    expect(later.filter((row) => row.run_id === 'run-a').map((row) => row.seq)).toEqual([1, 2, 3, 4]);
    expect(new Set(later.map((row) => row.burst)).size).toBe(2);
  });

  it("a run that is gone fails its sessions' commits alone; the others of the group are committed once", async () => {
    const { store, client } = await fresh();
    const results = await Promise.allSettled([
      store.commit(rows('run-a', 'root', 'a1')),
      store.commit(rows('run-gone', 'root', 'g1')),
      store.commit(rows('run-b', 'root', 'b1')),
    ]);
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    const refused = (results[1] as PromiseRejectedResult).reason;
    expect(refused).toBeInstanceOf(StoreError);
    expect((refused as StoreError).kind).toBe('unknown-run');
    expect((await journal(client)).map((row) => `${row.run_id}#${row.seq}`)).toEqual(['run-a#1', 'run-b#1']);
  });

  it('four workers committing groups of the same runs at once, in every order: no deadlock, each run numbered without a gap', async () => {
    const { store: first, client, url } = await fresh();
    const runs = ['run-a', 'run-b', 'run-c', 'run-d', 'run-e', 'run-f'];
    for (const id of runs.slice(2)) {
      await first.createRun({
        id,
        task: id,
        cwd: '/work',
        options: { tools: [], spread: true },
        startedAt: 1,
        owner: { host: hostname(), pid: process.pid, token: 't' },
        leaseMs: 60_000,
      });
    }
    const workers = [first];
    for (let i = 1; i < 4; i++) {
      const other = openPostgresStore(url);
      opened.push({ store: other, client: { end: async () => undefined } as unknown as pg.Client });
      workers.push(other);
    }
    // Each worker, each round, a group of a few of the runs (a different few, from a seeded
    // shuffle), with a job each that its queue takes a moment to insert: the runs' counters stay
    // locked to the commit while the other workers' groups ask for them.
    const slow: JobQueue = {
      insert: async (jobs, { db }) => {
        await db.executeSql('SELECT pg_sleep(0.002)', []);
        for (const job of jobs) await db.executeSql('INSERT INTO test_jobs (name, run) VALUES ($1, $2)', [job.name, 'x']);
      },
    };
    let seed = 7;
    const next = (): number => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31);
    const rounds = 40;
    const asked: Promise<void>[] = [];
    for (let round = 0; round < rounds; round++) {
      workers.forEach((worker, w) => {
        const few = [...runs].sort(() => next() - 2 ** 30).slice(0, 2 + (next() % 3));
        for (const run of few) asked.push(worker.commit(rows(run, `w${w}`, `${round}`), { queue: slow, jobs: [{ name: 'wake', data: {} }] }));
      });
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    const settled = await Promise.allSettled(asked);
    expect(settled.filter((result) => result.status === 'rejected').map((result) => String((result as PromiseRejectedResult).reason))).toEqual([]);
    const seqs = (await client.query('SELECT run_id, array_agg(seq ORDER BY seq) AS seqs FROM exarch.journal GROUP BY run_id ORDER BY run_id')).rows;
    for (const { seqs: own } of seqs) expect(own).toEqual(Array.from({ length: own.length }, (_, i) => i + 1));
    expect(seqs.reduce((n, { seqs: own }) => n + own.length, 0)).toBe(asked.length);
  });

  it('a job the queue refuses: nothing of the group is committed, rows or jobs, and every commit of it is refused', async () => {
    const { store, client } = await fresh();
    const results = await Promise.allSettled([
      store.commit(rows('run-a', 'root', 'a1'), { queue: queue(), jobs: [{ name: 'wake', data: { run: 'run-a' } }] }),
      store.commit(rows('run-b', 'root', 'b1'), { queue: queue(true), jobs: [{ name: 'spawn', data: { run: 'run-b' } }] }),
    ]);
    expect(results.map((result) => result.status)).toEqual(['rejected', 'rejected']);
    expect(await journal(client)).toEqual([]);
    expect((await client.query('SELECT count(*)::int AS n FROM test_jobs')).rows[0]?.n).toBe(0);
  });
});
