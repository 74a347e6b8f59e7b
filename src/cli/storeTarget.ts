import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { ExarchError } from '../engine/exarchError.js';
import { redactUrl } from '../engine/urlSecrets.js';
import { isPostgresUrl } from '../store/postgresUrl.js';
import type { RunStore } from '../store/runStore.js';
import { DEFAULT_STORE_PATH, openSqliteStore } from '../store/sqliteStore.js';
import { isInside, realAsFarAsItExists } from '../tools/workspace/paths.js';

/** Where a command keeps its runs: `--store FILE` (SQLite, the default) or `--db postgres://…`. */
export interface StoreTarget {
  /** The SQLite file (default .exarch/exarch.db under the working directory). */
  readonly store?: string;
  /** A PostgreSQL URL: the store a pool of workers shares. */
  readonly db?: string;
  /**
   * `db` came from `EXARCH_DB_URL`, not from `--db`: the commands exarch prints for the person to
   * run next leave it out (the variable gives it to them too), so no URL is shown at all.
   */
  readonly dbFromEnv?: boolean;
}

/** The variable every command's `--db` defaults to: a URL with a password need never be on a command line. */
export const DB_URL_VARIABLE = 'EXARCH_DB_URL';

/**
 * Where a command keeps its runs: `--store` or `--db` as given; with neither, `EXARCH_DB_URL` when
 * it is set (and not empty), else the default SQLite file. An explicit flag always wins.
 */
export function storeTargetOf(flags: { readonly store?: string | undefined; readonly db?: string | undefined }, env: NodeJS.ProcessEnv): StoreTarget {
  if (flags.store !== undefined || flags.db !== undefined)
    return { ...(flags.store === undefined ? {} : { store: flags.store }), ...(flags.db === undefined ? {} : { db: flags.db }) };
  const fromEnv = env[DB_URL_VARIABLE];
  return fromEnv === undefined || fromEnv === '' ? {} : { db: fromEnv, dbFromEnv: true };
}

/** A store as a command holds it: `file` is what messages name (a path, or the URL without its password). */
export type OpenedStore = RunStore & { readonly file: string };

/** A mistake in naming the store: the CLI reports it as a usage error. */
export class StoreTargetError extends ExarchError<'store-target'> {
  constructor(message: string) {
    super('store-target', message);
  }
}

/** Checks `--store`/`--db` before anything opens: both, or a `--db` that is no Postgres URL, is one line. */
export function checkTarget(target: StoreTarget): void {
  if (target.store !== undefined && target.db !== undefined) throw new StoreTargetError('--store and --db cannot be used together');
  if (target.db !== undefined && !isPostgresUrl(target.db))
    throw new StoreTargetError(
      `${target.dbFromEnv ? DB_URL_VARIABLE : '--db'} takes a PostgreSQL URL (postgres://user@host:port/database), got '${redactUrl(target.db)}'`,
    );
}

/**
 * Refuses a `--store` file (`file`, absolute) that lies in the run's working directory `workdir`
 * but not under its `.exarch/`, when the run's agents may write there (`--allow-write`,
 * `--allow-shell`). `.exarch/` is protected whole, and such a store's file alone is: its
 * `-journal` (approvals answered `always`, which a resume obeys, are not signed) and the file
 * itself before it exists are not, and an agent could plant or change them. Compared as real
 * paths (a symlink into the working directory counts as inside).
 */
export function checkStoreApart(file: string, shown: string, workdir: string, agentsWrite: boolean): void {
  if (!agentsWrite) return;
  const real = realAsFarAsItExists(file);
  if (!isInside(realAsFarAsItExists(workdir), real) || isInside(realAsFarAsItExists(join(workdir, '.exarch')), real)) return;
  throw new StoreTargetError(
    `--store ${shown} is in the working directory, where agents that may write (--allow-write, --allow-shell) could change what a resume reads: keep it under .exarch/ or outside the working directory`,
  );
}

/** The store at `--db URL`, `--store FILE`, or `.exarch/exarch.db` under the working directory. */
export async function openStore(cwd: string, target: StoreTarget): Promise<OpenedStore> {
  checkTarget(target);
  if (target.db !== undefined) return openPostgres(target.db);
  return openSqliteStore(storeName(cwd, target));
}

/**
 * The store for a command that only reads it (`runs`, `resume`, `view`): undefined when there is
 * no SQLite file yet, which such a command must not create. A Postgres server is always there (its
 * schema is made on first use, as for any command).
 */
export async function openExistingStore(cwd: string, target: StoreTarget): Promise<OpenedStore | undefined> {
  checkTarget(target);
  if (target.db !== undefined) return openPostgres(target.db);
  return existsSync(storeName(cwd, target)) ? openStore(cwd, target) : undefined;
}

/** What messages call the store: the SQLite path, or the URL without its secrets. */
export function storeName(cwd: string, target: StoreTarget): string {
  if (target.db !== undefined) return redactUrl(target.db);
  return resolve(cwd, target.store ?? DEFAULT_STORE_PATH);
}

/** pg is loaded only by a command given `--db`. */
async function openPostgres(url: string): Promise<OpenedStore> {
  const { openPostgresStore } = await import('../store/postgresStore.js');
  return openPostgresStore(url);
}
