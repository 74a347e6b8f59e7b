/** Types of postgresCluster.mjs: a real PostgreSQL server started by the project (tests and benchmarks). */

/** The directory holding initdb, pg_ctl and postgres: the newest Debian version installed. */
export declare const POSTGRES_BIN: string | undefined;

export interface PostgresServer {
  /** `postgres://exarch@127.0.0.1:PORT/postgres` (trust authentication on loopback). */
  readonly url: string;
  readonly port: number;
  /** A new empty database on this server; its URL. */
  createDatabase(): Promise<string>;
  /**
   * A login role with this password, and a new database it owns; the database's URL, without the
   * password. On a server started with `passwords`, the role must give it (SCRAM).
   */
  createRole(name: string, password: string): Promise<string>;
  /** Stops the server at once (as a crash would: no checkpoint), then starts it again on the same port. */
  restart(options?: { readonly downMs?: number }): Promise<void>;
  /** Stops the server and deletes its data directory. */
  stop(): void;
}

/**
 * Starts a server on 127.0.0.1 in a temporary cluster. Requires `POSTGRES_BIN`. `durable`: keep
 * the server's own fsync (tests turn it off for speed). `passwords`: roles other than `exarch`
 * authenticate with their password (see `createRole`); otherwise every role is trusted.
 */
export declare function startPostgres(options?: { readonly durable?: boolean; readonly passwords?: boolean }): Promise<PostgresServer>;
