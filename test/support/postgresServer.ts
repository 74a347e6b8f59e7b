import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll } from 'vitest';

/**
 * A real PostgreSQL server for tests: Debian's binaries, a fresh cluster in a temporary data
 * directory (initdb), listening on 127.0.0.1 only at a free port, stopped and deleted afterwards.
 * initdb refuses to run as root (CI is root), so there the cluster belongs to `nobody` and every
 * server command runs through `runuser`.
 */

/** The directory holding initdb, pg_ctl and postgres: the newest Debian version installed. */
const POSTGRES_BIN: string | undefined = findBin();

function findBin(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(base, versions[0], 'bin');
}

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
 * One server for a test file: started before its tests, stopped after them. `available` is
 * `postgresAvailable(file)` (the caller skips its Postgres tests without it); `server()` is the
 * running server, for use inside those tests only.
 */
export function postgresForFile(file: string): { readonly available: boolean; server(): PostgresServer } {
  const available = postgresAvailable(file);
  let started: PostgresServer | undefined;
  beforeAll(async () => {
    if (available) started = await startPostgres();
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

export interface PostgresServer {
  /** `postgres://exarch@127.0.0.1:PORT/postgres` (trust authentication on loopback). */
  readonly url: string;
  readonly port: number;
  /** A new empty database on this server; its URL. */
  createDatabase(): Promise<string>;
  /** Stops the server at once (as a crash would: no checkpoint), then starts it again on the same port. */
  restart(options?: { readonly downMs?: number }): Promise<void>;
  /** Stops the server and deletes its data directory. */
  stop(): void;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let databases = 0;

/** Starts a server (see the note above). Requires `POSTGRES_BIN`. */
async function startPostgres(): Promise<PostgresServer> {
  const bin = POSTGRES_BIN;
  if (bin === undefined) throw new Error('PostgreSQL is not installed');
  const dir = mkdtempSync(join(tmpdir(), 'exarch-pg-'));
  const data = join(dir, 'data');
  const log = join(dir, 'server.log');
  const root = process.getuid?.() === 0;
  if (root) {
    const uid = Number(execFileSync('id', ['-u', 'nobody'], { encoding: 'utf8' }).trim());
    const gid = Number(execFileSync('id', ['-g', 'nobody'], { encoding: 'utf8' }).trim());
    chownSync(dir, uid, gid);
  }
  const run = (command: string, args: readonly string[]): void => {
    const [file, argv] = root ? ['runuser', ['-u', 'nobody', '--', join(bin, command), ...args]] : [join(bin, command), [...args]];
    // cwd: nobody may not be able to read the test's working directory.
    const result = spawnSync(file as string, argv as string[], { cwd: dir, encoding: 'utf8', env: { ...process.env, LC_ALL: 'C.UTF-8' } });
    if (result.status !== 0) {
      const serverLog = existsSync(log) ? readFileSync(log, 'utf8').slice(-2000) : '';
      throw new Error(`${command} ${args.join(' ')} failed (${result.status ?? result.signal}):\n${result.stdout}${result.stderr}${serverLog}`);
    }
  };
  run('initdb', ['-D', data, '-U', 'exarch', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  let port = 0;
  const start = async (): Promise<void> => {
    // Another process may take the port between freePort and the server's bind: try a few.
    for (let attempt = 0; ; attempt++) {
      if (port === 0) port = await freePort();
      const options = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories= -c fsync=off -c max_connections=300`;
      try {
        run('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', '-o', options, 'start']);
        return;
      } catch (error) {
        if (attempt >= 3) throw error;
        port = 0;
      }
    }
  };
  await start();
  const url = (database: string): string => `postgres://exarch@127.0.0.1:${port}/${database}`;
  let stopped = false;
  return {
    get url() {
      return url('postgres');
    },
    get port() {
      return port;
    },
    async createDatabase() {
      const name = `t${process.pid}_${++databases}`;
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      try {
        await client.query(`CREATE DATABASE ${name}`);
      } finally {
        await client.end();
      }
      return url(name);
    },
    async restart(options = {}) {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      if (options.downMs) await new Promise((resolve) => setTimeout(resolve, options.downMs));
      const keep = port;
      await start();
      if (port !== keep) throw new Error(`the restarted server took port ${port}, not ${keep}`);
    },
    stop() {
      if (stopped) return;
      stopped = true;
      try {
        run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}
