import pg from 'pg';
import { Redactor } from '../engine/redact.js';
import { redactUrl, urlSecrets } from '../engine/urlSecrets.js';
import type { StoreOptions } from './memoryStore.js';
import { MIGRATION_LOCK, MIGRATIONS, POSTGRES_SCHEMA_VERSION } from './postgresSchema.js';
import type { JournalRow } from './runStore.js';
import { StoreError } from './storeError.js';
import { parseJson, readJournalRow } from './storedRun.js';

/** Options of a Postgres store besides the clock and redactor both stores take. */
export interface PostgresStoreOptions extends StoreOptions {
  /** Connections kept open (default 4). */
  readonly poolSize?: number;
  /**
   * How long a call keeps retrying while the server cannot be reached (a restart, a failover)
   * before it fails; default 60 s. 0: fail at once. The first use is never retried.
   */
  readonly reconnectMs?: number;
}

/** Error codes that mean the connection, not the statement, failed: the call is tried again. */
const CONNECTION_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  '57P01',
  '57P02',
  '57P03',
  '08000',
  '08001',
  '08003',
  '08004',
  '08006',
]);

/** Whether `error` is a lost or refused connection (the server restarting), not a refusal of the statement. */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && CONNECTION_CODES.has(code)) return true;
  return /Connection terminated|connection timeout|Client has encountered a connection error/i.test(error.message);
}

/**
 * A store's way to its server: the pool; the schema made or checked once, before any statement;
 * statements tried again while the server cannot be reached; transactions on one client; and what
 * pg's errors mean to a store. Each concern of the store (its runs, journal, leases, steering, spans,
 * the queries of its workers) writes its SQL through it.
 */
export class PostgresConnection {
  /** The URL without its secrets (`redactUrl`): what messages name. */
  readonly file: string;
  readonly pool: pg.Pool;
  readonly now: () => number;
  readonly redactor: Redactor;
  private readonly reconnectMs: number;
  private ready: Promise<void> | undefined;
  private closed = false;

  constructor(url: string, options: PostgresStoreOptions = {}) {
    this.file = redactUrl(url);
    this.now = options.now ?? Date.now;
    // The URL's own secrets too: an error that quotes it is stored without them.
    this.redactor = options.redactor ?? Redactor.fromEnv(process.env, urlSecrets(url));
    this.reconnectMs = options.reconnectMs ?? 60_000;
    this.pool = new pg.Pool({ Client: ClosingClient, connectionString: url, max: options.poolSize ?? 4, connectionTimeoutMillis: 10_000 });
    // An idle connection the server dropped (a restart) is an event, not a crash: the pool
    // discards it and the next query opens a new one.
    this.pool.on('error', () => {});
  }

  /**
   * Creates the schema, or checks it, once; every call waits for it. Not retried: a server that
   * cannot be reached when a store is first used is one line at once, not a minute's wait.
   */
  schema(): Promise<void> {
    this.ready ??= this.migrate().catch((error: unknown) => {
      this.ready = undefined;
      throw this.failure(error);
    });
    return this.ready;
  }

  private async migrate(): Promise<void> {
    await this.transaction(async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
      await client.query('CREATE SCHEMA IF NOT EXISTS exarch');
      await client.query('CREATE TABLE IF NOT EXISTS exarch.schema_version (version INTEGER NOT NULL)');
      const { rows } = await client.query<{ version: number }>('SELECT version FROM exarch.schema_version');
      const version = rows[0]?.version ?? 0;
      if (version > POSTGRES_SCHEMA_VERSION) throw new StoreError('newer-schema', this.file, `schema ${version}; this exarch reads ${POSTGRES_SCHEMA_VERSION}`);
      if (version === POSTGRES_SCHEMA_VERSION) return;
      for (let step = version + 1; step <= POSTGRES_SCHEMA_VERSION; step++) await client.query(MIGRATIONS[step] ?? '');
      if (rows.length === 0) await client.query('INSERT INTO exarch.schema_version (version) VALUES ($1)', [POSTGRES_SCHEMA_VERSION]);
      else await client.query('UPDATE exarch.schema_version SET version = $1', [POSTGRES_SCHEMA_VERSION]);
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }

  /** A statement after the schema is ready, tried again while the server cannot be reached. */
  async call<T>(fn: () => Promise<T>): Promise<T> {
    await this.schema();
    try {
      return await this.retrying(fn);
    } catch (error) {
      throw this.failure(error);
    }
  }

  private async retrying<T>(fn: () => Promise<T>): Promise<T> {
    const deadline = Date.now() + this.reconnectMs;
    for (let pause = 50; ; pause = Math.min(pause * 2, 1000)) {
      try {
        return await fn();
      } catch (error) {
        if (this.closed || !isConnectionError(error) || Date.now() + pause > deadline) throw error;
        await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  /**
   * `fn` in a transaction on one client of the pool. A client checked out of the pool has lost the
   * pool's 'error' listener: a server that goes away (a restart, a killed backend) then emits
   * 'error' on it, and an event nobody hears ends the process, every run of a worker with it. Heard
   * here, it only marks the connection lost: the statement in flight, or the next one, fails with a
   * connection error, which the caller's retry (`retrying`) or the worker's lease takes up.
   */
  async transaction<T>(fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let lost: Error | undefined;
    const onError = (error: Error): void => {
      lost ??= error;
    };
    client.on('error', onError);
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      const result = await fn(client);
      await client.query('COMMIT');
      return result;
    } catch (error) {
      broken = isConnectionError(error) && error instanceof Error ? error : lost;
      if (broken === undefined) await client.query('ROLLBACK').catch(() => {});
      throw error;
    } finally {
      client.off('error', onError);
      // A connection that failed is not handed out again (release gives the pool's listener back first).
      client.release(broken ?? lost);
    }
  }

  /** Journal rows as pg returns them, read back; one that cannot be is `damaged`, naming it. */
  journalRows(runId: string, rows: readonly { seq: number; session: unknown; ts: unknown; body: unknown }[]): JournalRow[] {
    return rows.map((r) => {
      const parsed = typeof r.body === 'string' ? parseJson(r.body) : undefined;
      const read = parsed ? readJournalRow(runId, r.seq, r.session, r.ts, parsed.value) : { problem: `journal record ${r.seq}: it is not JSON` };
      if ('problem' in read) throw new StoreError('damaged', this.file, `run ${runId}: ${read.problem}`);
      return read.row;
    });
  }

  /** A key taken is the caller's conflict; anything else, as Postgres said. */
  conflict(error: unknown, what: string): unknown {
    if (error instanceof pg.DatabaseError && error.code === '23505') return new StoreError('conflict', this.file, what, { cause: error });
    return error;
  }

  /** A server that cannot be reached (after the retries), or refuses us, is one line naming it. */
  private failure(error: unknown): unknown {
    if (error instanceof StoreError) return error;
    // pg's words when the server asks for a password it was not given (SCRAM), or cannot use.
    if (error instanceof Error && /^SASL: .*client password must be/.test(error.message))
      return new StoreError('unreadable', this.file, 'the server asks for a password: give it in PGPASSWORD, a PGPASSFILE, or the URL', { cause: error });
    if (error instanceof Error && error.message.startsWith('SASL: ')) return new StoreError('unreadable', this.file, error.message, { cause: error });
    // A query that reads journal records as JSON met one that is not: a record written by something other than exarch.
    if (error instanceof pg.DatabaseError && error.code === '22P02')
      return new StoreError('damaged', this.file, 'a journal record is not JSON', { cause: error });
    if (isConnectionError(error) || (error instanceof pg.DatabaseError && /^(28|3D)/.test(error.code ?? ''))) {
      return new StoreError('unreadable', this.file, error instanceof Error ? error.message : String(error), { cause: error });
    }
    return error;
  }
}

/**
 * pg's client, closing its socket when it fails to connect. pg leaves the socket of a client that
 * gave up during authentication open (it had no password to answer the server's SCRAM challenge
 * with): the server holds it for its authentication_timeout, a minute, and the command that
 * already said why it stops waits for it to exit.
 */
class ClosingClient extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: (err: Error) => void): void;
  override connect(callback?: (err: Error) => void): Promise<pg.Client> | undefined {
    if (callback === undefined)
      return super.connect().catch((error: unknown) => {
        this.connection.stream.destroy();
        throw error;
      });
    super.connect((error: Error, ...rest: unknown[]) => {
      if (error) this.connection.stream.destroy();
      (callback as (error: Error, ...rest: unknown[]) => void)(error, ...rest);
    });
  }
}
