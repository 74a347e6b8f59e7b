import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { ExarchError } from '../engine/exarchError.js';
import { describeUrl, isPostgresUrl } from '../store/postgresUrl.js';
import type { RunStore } from '../store/runStore.js';
import { DEFAULT_STORE_PATH, openSqliteStore } from '../store/sqliteStore.js';

/** Where a command keeps its runs: `--store FILE` (SQLite, the default) or `--db postgres://…`. */
export interface StoreTarget {
  /** The SQLite file (default .exarch/exarch.db under the working directory). */
  readonly store?: string;
  /** A PostgreSQL URL: the store a pool of workers shares. */
  readonly db?: string;
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
    throw new StoreTargetError(`--db takes a PostgreSQL URL (postgres://user@host:port/database), got '${target.db}'`);
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

/** What messages call the store: the SQLite path, or the URL without its password. */
export function storeName(cwd: string, target: StoreTarget): string {
  if (target.db !== undefined) return describeUrl(target.db);
  return resolve(cwd, target.store ?? DEFAULT_STORE_PATH);
}

/** pg is loaded only by a command given `--db`. */
async function openPostgres(url: string): Promise<OpenedStore> {
  const { openPostgresStore } = await import('../store/postgresStore.js');
  return openPostgresStore(url);
}
