import { resolve } from 'node:path';
import { redactUrl } from '../engine/urlSecrets.js';
import type { CliRunRecord } from './runRecord.js';
import { checkStoreApart, checkTarget, storeName, StoreTargetError, type StoreTarget } from './storeTarget.js';
import { UsageError } from './usageError.js';

/** `--ui-port N`: a port number, given with `--ui`. */
export function uiPort(ui: boolean, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!ui) throw new UsageError('--ui-port needs --ui');
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port < 1 || port > 65535) throw new UsageError(`--ui-port must be a port number, got '${raw}'`);
  return port;
}

/** What `run`, `resume` and a worker that takes such a run say, on stderr, of a run whose shell commands have no sandbox. */
export const UNSANDBOXED_NOTE = '--allow-shell=unsandboxed: shell commands run without a sandbox, with your full access to files, processes and network';
/** `UNSANDBOXED_NOTE` as `run` and `resume` write it. */
export const UNSANDBOXED_WARNING = `exarch: ${UNSANDBOXED_NOTE}\n`;

/**
 * This process's files in the working directory that agents may not change: the SQLite store (with
 * its WAL and shared memory), unless there is none or it is a database server, and the files named.
 */
export function ownFiles(cwd: string, target: StoreTarget | undefined, files: readonly (string | undefined)[]): string[] {
  const store = target === undefined || target.db !== undefined ? [] : [storeName(cwd, target)];
  return [
    ...store.flatMap((file) => [file, `${file}-wal`, `${file}-shm`]),
    ...files.filter((file): file is string => file !== undefined).map((file) => resolve(cwd, file)),
  ];
}

/** A Postgres store as a command was given it: `--db URL`, or `EXARCH_DB_URL`. */
export type PostgresTarget = StoreTarget & { readonly db: string };

/**
 * `--store FILE` or `--db URL` as the commands that answer a run must be given them: '' for the
 * default store and for `EXARCH_DB_URL` (which gives it to them as well); a `--db` URL with its
 * secrets masked (the person puts back what they typed, or sets EXARCH_DB_URL).
 */
export function targetFlags(target: StoreTarget): string {
  if (target.db !== undefined) return target.dbFromEnv ? '' : ` --db ${redactUrl(target.db)}`;
  return target.store === undefined ? '' : ` --store ${target.store}`;
}

/** `--store` and `--db` checked before anything opens: a mistake in them is a usage error. */
export function usableTarget(target: { readonly store?: string; readonly db?: string }): void {
  try {
    checkTarget(target);
  } catch (error) {
    if (error instanceof StoreTargetError) throw new UsageError(error.message);
    throw error;
  }
}

/** A `--store` the run's agents could reach (`checkStoreApart`), as a usage error. */
export function storeApart(cwd: string, target: StoreTarget, workdir: string, record: Pick<CliRunRecord, 'allowWrite' | 'allowShell'>): void {
  if (target.store === undefined || target.db !== undefined) return;
  const writes = record.allowWrite || record.allowShell !== false;
  try {
    checkStoreApart(storeName(cwd, target), target.store, workdir, writes);
  } catch (error) {
    if (error instanceof StoreTargetError) throw new UsageError(error.message);
    throw error;
  }
}
