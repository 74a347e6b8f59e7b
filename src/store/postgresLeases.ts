import type { SessionClaim, SessionLease } from './jobStore.js';
import { mayClaim } from './memoryStore.js';
import type { PostgresConnection } from './postgresConnection.js';
import { ownerOf, type RunColumns } from './postgresSchema.js';
import type { RunOwner } from './runStore.js';

/** Lets go of a session (`$1`, `$2`) if the token `$3` holds it. */
export const RELEASE_SESSION =
  'UPDATE exarch.sessions SET owner_host = NULL, owner_pid = NULL, owner_token = NULL, lease_until = 0 WHERE run_id = $1 AND session = $2 AND owner_token = $3';

/**
 * Takes one session of a run for `owner`, as `claim` takes a run: when no live process holds it
 * (no owner, its lease expired, or on the same host its process is gone). `job` (the queue's id
 * of the job it is taken for) is kept with the claim: a refused claimant learns whether it is
 * that job again, offered while its holder may be dead.
 */
export async function claimSession(
  conn: PostgresConnection,
  runId: string,
  session: string,
  owner: RunOwner,
  leaseMs: number,
  job?: string,
): Promise<SessionClaim> {
  return conn.call(async () => {
    for (;;) {
      const now = conn.now();
      // The usual case in one statement: a session no one holds, or whose lease ran out.
      const taken = await conn.pool.query(
        `INSERT INTO exarch.sessions (run_id, session, owner_host, owner_pid, owner_token, lease_until, job) VALUES ($1, $2, $3, $4, $5, $6, $8)
         ON CONFLICT (run_id, session) DO UPDATE SET owner_host = EXCLUDED.owner_host, owner_pid = EXCLUDED.owner_pid,
           owner_token = EXCLUDED.owner_token, lease_until = EXCLUDED.lease_until, job = EXCLUDED.job
         WHERE exarch.sessions.owner_token IS NULL OR exarch.sessions.owner_token = EXCLUDED.owner_token OR exarch.sessions.lease_until <= $7
         RETURNING 1`,
        [runId, session, owner.host, owner.pid, owner.token, now + leaseMs, now, job ?? null],
      );
      if (taken.rows.length > 0) return { ok: true } as const;
      // Held under a lease: still ours to take if its holder's process (on this host) is gone.
      const { rows } = await conn.pool.query<Pick<RunColumns, 'owner_host' | 'owner_pid' | 'owner_token' | 'lease_until'> & { job: string | null }>(
        'SELECT owner_host, owner_pid, owner_token, lease_until, job FROM exarch.sessions WHERE run_id = $1 AND session = $2',
        [runId, session],
      );
      const row = rows[0];
      const holder = row ? ownerOf(row) : null;
      // Let go of in between: asked again.
      if (!row || holder === null) continue;
      const leaseUntil = Number(row.lease_until);
      if (!mayClaim(holder, leaseUntil, owner, now)) return { ok: false, holder, leaseUntil, ...(row.job === null ? {} : { job: row.job }) };
      const moved = await conn.pool.query(
        'UPDATE exarch.sessions SET owner_host = $3, owner_pid = $4, owner_token = $5, lease_until = $6, job = $8 WHERE run_id = $1 AND session = $2 AND owner_token = $7',
        [runId, session, owner.host, owner.pid, owner.token, now + leaseMs, holder.token, job ?? null],
      );
      if (moved.rowCount === 1) return { ok: true } as const;
    }
  });
}

/**
 * Extends these leases (of any runs, each held by its job's token) in one statement; returns those
 * no longer held by their token. One statement however many: a worker renews every session it
 * holds together.
 */
export async function renewSessions(conn: PostgresConnection, leases: readonly SessionLease[], leaseMs: number): Promise<SessionLease[]> {
  if (leases.length === 0) return [];
  const { rows } = await conn.call(() =>
    conn.pool.query<{ run_id: string; session: string; token: string }>(
      `UPDATE exarch.sessions AS s SET lease_until = $4
       FROM unnest($1::text[], $2::text[], $3::text[]) AS w(run_id, session, token)
       WHERE s.run_id = w.run_id AND s.session = w.session AND s.owner_token = w.token
       RETURNING s.run_id, s.session, s.owner_token AS token`,
      [leases.map((l) => l.runId), leases.map((l) => l.session), leases.map((l) => l.token), conn.now() + leaseMs],
    ),
  );
  const key = (runId: string, session: string, token: string): string => JSON.stringify([runId, session, token]);
  const held = new Set(rows.map((r) => key(r.run_id, r.session, r.token)));
  return leases.filter((lease) => !held.has(key(lease.runId, lease.session, lease.token)));
}

/** Lets go of a session `owner` holds. */
export async function releaseSession(conn: PostgresConnection, runId: string, session: string, owner: RunOwner): Promise<void> {
  await conn.call(() => conn.pool.query(RELEASE_SESSION, [runId, session, owner.token]));
}
