import Database from 'better-sqlite3';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest, type ServerPlan } from '../../support/anthropicServer.js';
import { call, exarch, lastUserText, stream } from '../../support/cliHarness.js';
import { expectNoInternalText, expectOneLine } from '../../support/oneLine.js';

/**
 * Issue 37, "internal error text never reaches a user", the run store: one run's row or journal
 * damaged in the SQLite file (which an agent with a shell can write: it lies in the workspace)
 * used to break `exarch runs` and `exarch resume` for the whole store with JavaScript's own words
 * (`Unexpected token … is not valid JSON`, `Cannot read properties of null`). Now `runs` lists
 * every other run and marks that one `unreadable`, with why, in one line; `resume` and `view` of it
 * are one line; the other runs are resumed as before. Through the real CLI, the file damaged with
 * SQLite itself, as an agent would.
 */

const runIdOf = (stderr: string): string => /^exarch: run (\S+) started$/m.exec(stderr)?.[1] ?? '';

/** The root reads a.txt when its task says so (its call waits for approval), and answers otherwise. */
const root = [
  (r: ReceivedRequest): ServerPlan =>
    lastUserText(r).startsWith('Read') ? stream({ toolCalls: [call('read_file', { path: 'a.txt' })] }) : stream({ text: 'done' }),
  stream({ text: 'a.txt says hello' }),
];

interface Store {
  readonly cwd: string;
  readonly server: AnthropicTestServer;
  /** Two finished runs and one waiting for the approval of its read_file call. */
  readonly first: string;
  readonly second: string;
  readonly waiting: string;
  readonly callId: string;
}

let store: Store;
const db = (): string => join(store.cwd, '.exarch', 'exarch.db');
const pristine = (): string => join(store.cwd, 'pristine.db');

beforeAll(async () => {
  // The store lives across the file's tests (workdir() would remove it after the first).
  const cwd = mkdtempSync(join(tmpdir(), 'exarch-damaged-'));
  writeFileSync(join(cwd, 'a.txt'), 'hello\n');
  const server = await startAnthropicServer(historyHandler({ root }));
  const first = await exarch(['run', 'Say done'], { server, cwd });
  const second = await exarch(['run', 'Say done again'], { server, cwd });
  const waiting = await exarch(['run', '--approve', 'read_file', 'Read a.txt'], { server, cwd });
  expect([first.code, second.code, waiting.code]).toEqual([0, 0, 4]);
  const callId = /^ {2}(toolu_\S+) {2}read_file/m.exec(waiting.stderr)?.[1] ?? '';
  expect(callId).not.toBe('');
  store = { cwd, server, first: runIdOf(first.stderr), second: runIdOf(second.stderr), waiting: runIdOf(waiting.stderr), callId };
  // Each case starts from this copy (the CLI checkpoints the WAL into the file as it closes).
  copyFileSync(db(), pristine());
  return async () => {
    await server.close();
    rmSync(cwd, { recursive: true, force: true });
  };
});

/** The store as the runs left it, then `sql` run on the file (with `params`). */
function damage(sql: string, ...params: unknown[]): void {
  rmSync(`${db()}-wal`, { force: true });
  rmSync(`${db()}-shm`, { force: true });
  copyFileSync(pristine(), db());
  const file = new Database(db());
  try {
    file.prepare(sql).run(...params);
  } finally {
    file.close();
  }
}

/** Where a run's bursts are (see sqliteStore.ts: a run's number times 2^32, plus the seq). */
const BURSTS_OF = 'key >= (SELECT num FROM runs WHERE id = @id) * 4294967296 AND key < ((SELECT num FROM runs WHERE id = @id) + 1) * 4294967296';

describe('one run of the store damaged', () => {
  const rowDamages: [string, string, string, unknown?][] = [
    ['options that are not JSON', 'UPDATE runs SET options = \'{"tools": [\' WHERE id = ?', 'its options are not JSON'],
    ['options that are JSON null', "UPDATE runs SET options = 'null' WHERE id = ?", 'its options are not a JSON object'],
    ['options of the wrong shape', 'UPDATE runs SET options = \'{"tools": 5, "model": ["x"]}\' WHERE id = ?', 'its options do not list its tools'],
    ['options of 17 million characters', "UPDATE runs SET options = '\"' || hex(zeroblob(8500000)) || '\"' WHERE id = ?", 'its options are longer than'],
    ['a status no exarch writes', "UPDATE runs SET status = 'rogue' WHERE id = ?", 'its status is not one of'],
    ['a start time that is text', "UPDATE runs SET started_at = 'yesterday' WHERE id = ?", 'its start time is not a number'],
    ['a task that is a blob', "UPDATE runs SET task = x'00ff' WHERE id = ?", 'its task is not text'],
    ['an owner pid that is text', "UPDATE runs SET owner_token = 't', owner_pid = 'x' WHERE id = ?", 'its owner is not'],
  ];

  it('a run number that is text: its journal is not looked for elsewhere; resume and view of it are one line', async () => {
    const { cwd, waiting, second } = store;
    damage("UPDATE runs SET num = 'x' WHERE id = ?", waiting);
    for (const command of [
      ['resume', waiting],
      ['view', waiting],
    ]) {
      const refused = await exarch(command, { cwd, env: { ANTHROPIC_API_KEY: 'unused' } });
      expect(refused.code, refused.stderr).toBe(1);
      expectOneLine(refused.stderr, new RegExp(`holds a damaged record \\(run ${waiting}: its number is not a count\\)`));
    }
    expect((await exarch(['view', second], { cwd })).code).toBe(0);
  });

  it.each(rowDamages)('%s: runs lists the others and marks it, resume and view of it are one line each', async (_what, sql, problem) => {
    const { cwd, first, second, waiting } = store;
    damage(sql, first);
    const runs = await exarch(['runs'], { cwd });
    expect(runs.code).toBe(0);
    expect(runs.stdout).toMatch(new RegExp(`^${second} .* done .* Say done again$`, 'm'));
    expect(runs.stdout).toMatch(new RegExp(`^${waiting} .* waiting .* Read a\\.txt$`, 'm'));
    expect(runs.stdout).toMatch(new RegExp(`^${first} .* unreadable `, 'm'));
    expectOneLine(runs.stderr, new RegExp(`run ${first} cannot be read back .*\\(${problem}`));

    for (const command of [
      ['resume', first],
      ['view', first],
    ]) {
      const refused = await exarch(command, { cwd });
      expect(refused.code, refused.stderr).toBe(1);
      expect(refused.stdout).toBe('');
      expectOneLine(refused.stderr, new RegExp(`holds a damaged record \\(run ${first}: ${problem}`));
    }
    // The others are read as before.
    const viewed = await exarch(['view', second], { cwd });
    expect(viewed.code, viewed.stderr).toBe(0);
  });

  it('with one run damaged, another is approved and resumed to its answer', async () => {
    const { cwd, server, first, waiting, callId } = store;
    damage("UPDATE runs SET options = 'not json' WHERE id = ?", first);
    expect((await exarch(['approve', waiting, callId], { cwd })).code).toBe(0);
    const resumed = await exarch(['resume', waiting], { server, cwd });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stdout).toBe('a.txt says hello\n');
    expectNoInternalText(resumed.stderr);
  });

  const journalDamages: [string, string, string][] = [
    ['a burst that is not JSON', `UPDATE bursts SET records = '[["root", 1, {' WHERE ${BURSTS_OF}`, 'its journal is not JSON'],
    ['a burst that is JSON but no list', `UPDATE bursts SET records = '{"a": 1}' WHERE ${BURSTS_OF}`, 'its journal is not a list of records'],
    [
      'a record without its fields',
      `UPDATE bursts SET records = '[["root", 1, {"type": "usage"}]]' WHERE ${BURSTS_OF}`,
      'journal record \\d+ \\(session root\\): request is missing',
    ],
    [
      'a record of no known type',
      `UPDATE bursts SET records = '[["root", 1, {"type": "teleport"}]]' WHERE ${BURSTS_OF}`,
      'journal record \\d+ \\(session root\\): type is not one of',
    ],
    [
      'a record that is not [session, time, record]',
      `UPDATE bursts SET records = '[5]' WHERE ${BURSTS_OF}`,
      'journal record \\d+: not \\[session, time, record\\]',
    ],
  ];

  it.each(journalDamages)('%s in the waiting run: resume and view of it are one line each; runs lists every run', async (_what, sql, problem) => {
    const { cwd, first, second, waiting } = store;
    damage(sql, { id: waiting });
    const runs = await exarch(['runs'], { cwd });
    expect(runs.code).toBe(0);
    for (const id of [first, second, waiting]) expect(runs.stdout).toMatch(new RegExp(`^${id} `, 'm'));
    expectNoInternalText(runs.stderr);
    for (const command of [
      ['resume', waiting],
      ['view', waiting],
    ]) {
      const refused = await exarch(command, { cwd, env: { ANTHROPIC_API_KEY: 'unused' } });
      expect(refused.code, refused.stderr).toBe(1);
      expectOneLine(refused.stderr, new RegExp(`holds a damaged record \\(run ${waiting}: ${problem}`));
    }
  });

  it('a journal that is not JSON in a run whose totals are summed from it: runs marks that run, and lists the others', async () => {
    const { cwd, first, second, waiting } = store;
    damage(`UPDATE bursts SET records = 'oops' WHERE ${BURSTS_OF}`, { id: waiting });
    const file = new Database(db());
    // Totals are kept on a run's row once it is released; a run still held (or left by a crash) is summed from its journal.
    file.prepare('UPDATE runs SET agents = NULL WHERE id = ?').run(waiting);
    file.close();
    const runs = await exarch(['runs'], { cwd });
    expect(runs.code).toBe(0);
    expect(runs.stdout).toMatch(new RegExp(`^${waiting} .* unreadable `, 'm'));
    for (const id of [first, second]) expect(runs.stdout).toMatch(new RegExp(`^${id} .* done `, 'm'));
    expectOneLine(runs.stderr, new RegExp(`run ${waiting} cannot be read back .*\\(its journal is not JSON\\)`));
  });

  it('records each readable that make no run (a session without its session record): resume is one line', async () => {
    const { cwd, waiting } = store;
    damage(`UPDATE bursts SET records = '[["root", 1, {"type": "queued", "text": "hi"}]]' WHERE ${BURSTS_OF}`, { id: waiting });
    const refused = await exarch(['resume', waiting], { cwd, env: { ANTHROPIC_API_KEY: 'unused' } });
    expect(refused.code, refused.stderr).toBe(1);
    expectOneLine(refused.stderr, new RegExp(`run ${waiting} cannot be taken up: its journal does not make sense`));
  });
});
