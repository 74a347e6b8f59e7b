import { homedir, userInfo } from 'node:os';
import path from 'node:path';

/**
 * Where a Postgres client finds its credentials besides a URL: libpq's variables (and pg's, which
 * reads the same) and the files they name. A sandboxed command gets none of them (shellEnvironment.ts,
 * protectedPaths.ts): with them, and the network (`--allow-network`), it could log in to the run
 * store and change a run record that a worker then obeys.
 */

/** libpq's variables (`PGPASSWORD`, `PGUSER`, `PGHOST`, `PGPASSFILE`, `PGSERVICE`…), and exarch's default `--db`. */
export function isPostgresVariable(name: string): boolean {
  return name.startsWith('PG') || name === 'EXARCH_DB_URL';
}

/**
 * The files a Postgres client would read credentials from, for a process with `env`: `.pgpass` and
 * `.pg_service.conf` in its home (as HOME says, and as the user database says, which libpq falls
 * back on), `$PGPASSFILE` and `$PGSERVICEFILE`. Absolute; whether they exist is for the caller.
 */
export function postgresCredentialFiles(env: NodeJS.ProcessEnv): string[] {
  const homes = new Set<string>();
  for (const home of [env['HOME'], homedir(), passwdHome()]) if (home !== undefined && path.isAbsolute(home)) homes.add(home);
  const named = [env['PGPASSFILE'], env['PGSERVICEFILE']].filter((file): file is string => file !== undefined && path.isAbsolute(file));
  return [...[...homes].flatMap((home) => [path.join(home, '.pgpass'), path.join(home, '.pg_service.conf')]), ...named];
}

function passwdHome(): string | undefined {
  try {
    return userInfo().homedir;
  } catch {
    return undefined;
  }
}
