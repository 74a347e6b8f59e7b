import { stringifyBounded } from '../engine/nesting.js';
import { mayClaim, reportedStatus } from './memoryStore.js';
import type { PostgresConnection } from './postgresConnection.js';
import { LET_GO_WITH_TOTALS, LIST_RUN_ROWS, LIST_RUNS, ownerOf, RUN_COLUMNS, type RunColumns, TOTALS, type TotalsColumns } from './postgresSchema.js';
import { spreadWaiting } from './postgresWorkerQueries.js';
import type { ClaimResult, NewRun, RunListing, RunOwner, RunRow, RunStatus } from './runStore.js';
import { StoreError } from './storeError.js';
import { readRunColumns, readTotals, unreadableRun, type RunColumns as StoredRunColumns } from './storedRun.js';

export async function createRun(conn: PostgresConnection, run: NewRun): Promise<void> {
  const { id, task, cwd, startedAt, owner } = run;
  const options = conn.redactor.json(stringifyBounded(run.options));
  let attempts = 0;
  await conn.call(async () => {
    attempts++;
    try {
      await conn.pool.query(
        `INSERT INTO exarch.runs (id, task, cwd, options, started_at, status, owner_host, owner_pid, owner_token, lease_until)
         VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9)`,
        [id, conn.redactor.text(task), cwd, options, startedAt, owner.host, owner.pid, owner.token, conn.now() + run.leaseMs],
      );
    } catch (error) {
      const conflict = conn.conflict(error, `run ${id}`);
      // After a lost connection the first attempt may have committed: the run is then ours.
      if (conflict instanceof StoreError && attempts > 1 && (await getRun(conn, id))?.owner?.token === owner.token) return;
      throw conflict;
    }
  });
}

export async function getRun(conn: PostgresConnection, id: string): Promise<RunRow | undefined> {
  const { rows } = await conn.call(() => conn.pool.query<StoredRunColumns>(`SELECT ${RUN_COLUMNS} FROM exarch.runs AS r WHERE r.id = $1`, [id]));
  const r = rows[0];
  if (!r) return undefined;
  const read = readRunColumns(r);
  if (!read.ok) throw new StoreError('damaged', conn.file, `run ${id}: ${read.problem}`);
  return read.run;
}

export async function listRuns(conn: PostgresConnection): Promise<RunListing[]> {
  type Listed = StoredRunColumns & TotalsColumns & { journalDamaged?: boolean };
  let rows: Listed[];
  try {
    rows = (await conn.call(() => conn.pool.query<Listed>(LIST_RUNS))).rows;
  } catch (error) {
    // One journal record that is not JSON fails the sum of every run's totals: each run's are summed apart, so only its own run is unreadable.
    if (!(error instanceof StoreError) || error.kind !== 'damaged') throw error;
    rows = await listRunsApart(conn);
  }
  const now = conn.now();
  const runs = rows.map((r): RunListing => {
    const read = readRunColumns(r);
    if (!read.ok) return unreadableRun(r, read.problem);
    if (r.journalDamaged) return unreadableRun(r, 'its journal is not JSON');
    const totals = readTotals(r);
    if (!totals) return unreadableRun(r, 'its totals are not counts');
    const run = read.run;
    // A spread run has no process of its own: its sessions' jobs run it, one claim each.
    const status = run.status === 'running' && run.options['spread'] === true ? 'running' : reportedStatus(run, now);
    return { ...run, status, ...totals };
  });
  // One that asks for approvals is `waiting` once nothing in it can move without an answer.
  for (const [i, run] of runs.entries())
    if (run.status === 'running' && run.options['spread'] === true && run.options['approve'] !== undefined && (await spreadWaiting(conn, run.id)))
      runs[i] = { ...run, status: 'waiting' };
  return runs;
}

/** The runs, each one's totals summed on its own; a run whose journal cannot be summed is marked. */
async function listRunsApart(conn: PostgresConnection): Promise<(StoredRunColumns & TotalsColumns & { journalDamaged?: boolean })[]> {
  const { rows } = await conn.call(() => conn.pool.query<StoredRunColumns & TotalsColumns>(LIST_RUN_ROWS));
  const out: (StoredRunColumns & TotalsColumns & { journalDamaged?: boolean })[] = [];
  for (const r of rows) {
    if (r.agents !== null) {
      out.push(r);
      continue;
    }
    try {
      const { rows: totals } = await conn.call(() => conn.pool.query<TotalsColumns>(`SELECT ${TOTALS} FROM exarch.journal AS j WHERE j.run_id = $1`, [r.id]));
      out.push({ ...r, ...totals[0] });
    } catch (error) {
      if (!(error instanceof StoreError) || error.kind !== 'damaged') throw error;
      out.push({ ...r, journalDamaged: true });
    }
  }
  return out;
}

/** The run's row locked (FOR UPDATE) while the holder is judged: two claimants never both win. */
export async function claim(conn: PostgresConnection, runId: string, owner: RunOwner, leaseMs: number): Promise<ClaimResult> {
  return conn.call(() =>
    conn.transaction(async (client) => {
      const { rows } = await client.query<RunColumns>('SELECT * FROM exarch.runs WHERE id = $1 FOR UPDATE', [runId]);
      const run = rows[0];
      if (!run) throw new StoreError('unknown-run', conn.file, runId);
      const now = conn.now();
      const holder = ownerOf(run);
      const leaseUntil = Number(run.lease_until);
      if (holder !== null && !mayClaim(holder, leaseUntil, owner, now)) return { ok: false, holder, leaseUntil };
      await client.query(
        `UPDATE exarch.runs SET status = 'running', owner_host = $2, owner_pid = $3, owner_token = $4, lease_until = $5, ended_at = NULL,
           agents = NULL, requests = NULL, input_tokens = NULL, output_tokens = NULL, cache_creation_input_tokens = NULL, cache_read_input_tokens = NULL
         WHERE id = $1`,
        [runId, owner.host, owner.pid, owner.token, now + leaseMs],
      );
      return { ok: true } as const;
    }),
  );
}

export async function renew(conn: PostgresConnection, runId: string, owner: RunOwner, leaseMs: number): Promise<boolean> {
  const result = await conn.call(() =>
    conn.pool.query('UPDATE exarch.runs SET lease_until = $3 WHERE id = $1 AND owner_token = $2', [runId, owner.token, conn.now() + leaseMs]),
  );
  return result.rowCount === 1;
}

/** Lets go of the run and writes its totals (summed by the server), so `listRuns` need not sum them again. */
export async function release(conn: PostgresConnection, runId: string, owner: RunOwner, status: RunStatus): Promise<void> {
  await conn.call(() =>
    conn.pool.query(`UPDATE exarch.runs AS r SET status = $3, ended_at = $4, ${LET_GO_WITH_TOTALS} WHERE r.id = $1 AND r.owner_token = $2`, [
      runId,
      owner.token,
      status,
      status === 'running' ? null : conn.now(),
    ]),
  );
}

/**
 * Ends a run whose sessions ran as jobs of their own (no process holds the run as a whole): sets
 * its status and writes its totals, as `release` does. A run already ended is left as it is.
 */
export async function endRun(conn: PostgresConnection, runId: string, status: RunStatus): Promise<void> {
  await conn.call(() =>
    conn.pool.query(
      `UPDATE exarch.runs AS r SET status = $2, ended_at = $3, ${LET_GO_WITH_TOTALS} WHERE r.id = $1 AND r.status NOT IN ('done', 'capped', 'failed')`,
      [runId, status, conn.now()],
    ),
  );
}
