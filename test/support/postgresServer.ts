import { afterAll, beforeAll } from 'vitest';
import { POSTGRES_BIN, startPostgres, type PostgresServer } from '../../scripts/postgresCluster.mjs';

/**
 * A real PostgreSQL server for a test file (scripts/postgresCluster.mjs starts it): skipped with
 * one line where PostgreSQL is not installed, required under CI.
 */

export type { PostgresServer };

const onCi = (process.env['CI'] ?? '') !== '' && process.env['CI'] !== '0' && process.env['CI']?.toLowerCase() !== 'false';

/**
 * Whether this file's Postgres tests run: without the binaries, one line on stderr locally (and
 * the caller skips), an error under CI, where they are required.
 */
function postgresAvailable(file: string): boolean {
  if (POSTGRES_BIN !== undefined) return true;
  if (onCi) throw new Error(`${file} needs PostgreSQL under CI (apt-get install postgresql)`);
  process.stderr.write(`skipping ${file}: PostgreSQL not found under /usr/lib/postgresql (apt-get install postgresql)\n`);
  return false;
}

/**
 * One server for a test file: started before its tests, stopped after them (`passwords`: see
 * `startPostgres`). `available` is
 * `postgresAvailable(file)` (the caller skips its Postgres tests without it); `server()` is the
 * running server, for use inside those tests only.
 */
export function postgresForFile(file: string, options: { readonly passwords?: boolean } = {}): { readonly available: boolean; server(): PostgresServer } {
  const available = postgresAvailable(file);
  let started: PostgresServer | undefined;
  beforeAll(async () => {
    if (available) started = await startPostgres(options);
  }, 120_000);
  afterAll(() => started?.stop(), 120_000);
  return {
    available,
    server: () => {
      if (!started) throw new Error(`${file}: the Postgres server is not running (used outside the file's Postgres tests?)`);
      return started;
    },
  };
}
