// A real PostgreSQL server started by the project, for the tests (test/support/postgresServer.ts)
// and the workers' benchmark (bench/workers.mjs): Debian's binaries, a fresh cluster in a temporary
// data directory (initdb), listening on 127.0.0.1 only at a free port, stopped and deleted
// afterwards. initdb refuses to run as root (CI is root), so there the cluster belongs to
// `nobody` and every server command runs through `runuser`. Plain JavaScript (typed by
// postgresCluster.d.mts) so that the benchmark, which runs on the built package, can use it too.
import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';

/** The directory holding initdb, pg_ctl and postgres: the newest Debian version installed. */
export const POSTGRES_BIN = findBin();

function findBin() {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => /^\d+$/.test(v) && existsSync(join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(b) - Number(a));
  return versions[0] === undefined ? undefined : join(base, versions[0], 'bin');
}

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

let databases = 0;

/** Starts a server (see the note above). Requires `POSTGRES_BIN`. */
export async function startPostgres(options = {}) {
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
  const run = (command, args) => {
    const [file, argv] = root ? ['runuser', ['-u', 'nobody', '--', join(bin, command), ...args]] : [join(bin, command), [...args]];
    // cwd: nobody may not be able to read the caller's working directory.
    const result = spawnSync(file, argv, { cwd: dir, encoding: 'utf8', env: { ...process.env, LC_ALL: 'C.UTF-8' } });
    if (result.status !== 0) {
      const serverLog = existsSync(log) ? readFileSync(log, 'utf8').slice(-2000) : '';
      throw new Error(`${command} ${args.join(' ')} failed (${result.status ?? result.signal}):\n${result.stdout}${result.stderr}${serverLog}`);
    }
  };
  run('initdb', ['-D', data, '-U', 'exarch', '--auth=trust', '-E', 'UTF8', '--no-sync']);
  // `passwords`: the roles made with createRole must give their password (SCRAM) on loopback;
  // the `exarch` superuser the tests and the benchmark use still needs none.
  if (options.passwords) {
    writeFileSync(join(data, 'pg_hba.conf'), 'host all exarch 127.0.0.1/32 trust\nhost all all 127.0.0.1/32 scram-sha-256\n');
  }
  // Tests trade durability for speed; a benchmark of the store's cost keeps the server's own.
  const durability = options.durable ? '' : ' -c fsync=off';
  let port = 0;
  const start = async () => {
    // Another process may take the port between freePort and the server's bind: try a few.
    for (let attempt = 0; ; attempt++) {
      if (port === 0) port = await freePort();
      const serverOptions = `-c listen_addresses=127.0.0.1 -p ${port} -c unix_socket_directories=${durability} -c max_connections=300`;
      try {
        run('pg_ctl', ['-D', data, '-l', log, '-w', '-t', '60', '-o', serverOptions, 'start']);
        return;
      } catch (error) {
        if (attempt >= 3) throw error;
        port = 0;
      }
    }
  };
  await start();
  const url = (database) => `postgres://exarch@127.0.0.1:${port}/${database}`;
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
    async createRole(name, password) {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`createRole: '${name}' is not a plain role name`);
      const database = `${name}_${process.pid}_${++databases}`;
      const client = new pg.Client({ connectionString: url('postgres') });
      await client.connect();
      try {
        await client.query(`CREATE ROLE ${name} LOGIN PASSWORD ${client.escapeLiteral(password)}`);
        await client.query(`CREATE DATABASE ${database} OWNER ${name}`);
      } finally {
        await client.end();
      }
      return `postgres://${name}@127.0.0.1:${port}/${database}`;
    },
    async restart(restartOptions = {}) {
      run('pg_ctl', ['-D', data, '-m', 'immediate', '-w', 'stop']);
      if (restartOptions.downMs) await new Promise((resolve) => setTimeout(resolve, restartOptions.downMs));
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
