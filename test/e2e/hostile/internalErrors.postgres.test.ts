import { hostname } from 'node:os';
import { describe, expect, it } from 'vitest';
import { openPostgresStore } from '../../../src/store/postgresStore.js';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import type { NewRun } from '../../../src/store/runStore.js';
import { exarch, workdir } from '../../support/cliHarness.js';
import { expectOneLine } from '../../support/oneLine.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { query } from '../../support/storedRuns.js';

/**
 * Issue 37, the run store's rows read back, in PostgreSQL as in SQLite (internalErrors.store.test.ts):
 * one run whose `options` or journal record is damaged (written by anything but exarch) is
 * listed by `exarch runs --db` as unreadable, with the others as before; `view` of it is one line.
 * A journal record that is not JSON used to fail the server's JSON cast of every run's totals.
 */

const postgres = postgresForFile('test/e2e/hostile/internalErrors.postgres.test.ts');

const newRun = (id: string, task: string): NewRun => ({
  id,
  task,
  cwd: '/work',
  options: { tools: [], model: 'claude-sonnet-5-5' },
  startedAt: Date.UTC(2026, 0, 1),
  owner: { host: hostname(), pid: 1, token: id },
  leaseMs: 60_000,
});
const session: JournalRecord = { type: 'session', agent: { name: 'root', path: ['root'], depth: 0, id: 'root' }, task: 'x' };
const tokens = { inputTokens: 10, outputTokens: 5, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
const usage: JournalRecord = { type: 'usage', request: tokens, session: tokens, stopReason: 'end_turn' };

/** Three runs, none released (their totals are summed from their journals); the first damaged by `damage`. */
async function storeWith(damage: string): Promise<{ db: string; ids: string[] }> {
  const db = await postgres.server().createDatabase();
  const store = openPostgresStore(db);
  const ids = ['01AAAAAAAAAAAAAAAAAAAAAAAA', '01BBBBBBBBBBBBBBBBBBBBBBBB', '01CCCCCCCCCCCCCCCCCCCCCCCC'];
  try {
    for (const [i, id] of ids.entries()) {
      await store.createRun(newRun(id, `task ${i}`));
      await store.append([
        { runId: id, seq: 1, session: 'root', ts: 1, record: session },
        { runId: id, seq: 2, session: 'root', ts: 2, record: usage },
      ]);
    }
  } finally {
    await store.close();
  }
  await query(db, damage, [ids[0]]);
  return { db, ids };
}

describe.skipIf(!postgres.available)('one run of a Postgres store damaged', () => {
  it.each([
    ['options that are not JSON', "UPDATE exarch.runs SET options = '{oops' WHERE id = $1", 'its options are not JSON'],
    ['options without tools', 'UPDATE exarch.runs SET options = \'{"model": 5}\' WHERE id = $1', 'its options do not list its tools'],
    // The totals are summed from `usage` records, cast to JSON by the server.
    [
      'a journal record that is not JSON',
      "UPDATE exarch.journal SET body = '{\"type\": \"usa' WHERE run_id = $1 AND type = 'usage'",
      'its journal is not JSON',
    ],
  ])('%s: runs --db lists the others and marks it; view of it is one line', async (_what, sql, problem) => {
    const { db, ids } = await storeWith(sql);
    const [damaged, ...others] = ids;
    const cwd = workdir();
    const runs = await exarch(['runs', '--db', db], { cwd });
    expect(runs.code, runs.stderr).toBe(0);
    expect(runs.stdout).toMatch(new RegExp(`^${damaged} .* unreadable `, 'm'));
    for (const id of others) expect(runs.stdout).toMatch(new RegExp(`^${id} .* (running|interrupted) `, 'm'));
    expectOneLine(runs.stderr, new RegExp(`run ${damaged} cannot be read back .*\\(${problem}`));
    const view = await exarch(['view', damaged ?? '', '--db', db], { cwd });
    expect(view.code).toBe(1);
    expectOneLine(view.stderr, /holds a damaged record \(/);
  });
});
