// What a durable system's run wrote, measured from outside it: the helpers of the systems' `written`
// (systems/exarch-durable.mjs and the other durable systems), so every durable row counts alike.
import { readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';

/** Bytes this process has handed to write(2) so far (Linux); undefined where /proc/self/io is missing. */
export function bytesWritten() {
  let io;
  try {
    io = readFileSync('/proc/self/io', 'utf8');
  } catch {
    return undefined;
  }
  const wchar = /^wchar:\s*(\d+)$/m.exec(io)?.[1];
  return wchar === undefined ? undefined : Number(wchar);
}

/** A file's size, 0 when it does not exist. */
export function sizeOf(file) {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** The PostgreSQL database of this cell (bench/run.mjs makes a fresh one per cell), or a clear error. */
export function cellDatabase() {
  const url = process.env.EXARCH_BENCH_POSTGRES;
  if (!url) throw new Error('no PostgreSQL database: run the Postgres systems through bench/run.mjs, which starts a server');
  return url;
}

/**
 * What one run writes to PostgreSQL: `run()` resolves with `{ counts, id }` (the run's or thread's
 * id); `rowsOf(id)` is the SQL that sums its rows, `SELECT … AS n, … AS bytes`, with `$1` the id.
 * Resolves with the counts, `journalRows` and `journalBytes` (the rows and their payload bytes), and
 * `walBytes`: what the server appended to its write-ahead log meanwhile (pg_current_wal_insert_lsn
 * before and after: every row, index entry and commit record the run caused; the cell is alone on its
 * server while it runs, but for the server's own background work). Throws if the run stored nothing.
 */
export async function postgresWritten(url, run, rowsOf) {
  // Loaded here: the SQLite systems never need it.
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const lsn = async () => (await client.query('SELECT pg_current_wal_insert_lsn() AS lsn')).rows[0].lsn;
    const before = await lsn();
    const { counts, id } = await run();
    const after = await lsn();
    const walBytes = Number((await client.query('SELECT pg_wal_lsn_diff($1, $2) AS n', [after, before])).rows[0].n);
    const rows = (await client.query(rowsOf, [id])).rows[0];
    const [n, bytes] = [Number(rows?.n ?? 0), Number(rows?.bytes ?? 0)];
    if (!(n > 0 && bytes > 0)) throw new Error(`${id} stored ${n} rows (${bytes} bytes) in PostgreSQL`);
    return { counts, journalRows: n, journalBytes: bytes, walBytes };
  } finally {
    await client.end();
  }
}

/** Where a durable system makes its files: the cell's own directory, which bench/run.mjs removes after the cell. */
export function benchTmp() {
  return process.env.EXARCH_BENCH_TMP || tmpdir();
}
