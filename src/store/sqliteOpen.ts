import Database from 'better-sqlite3';
import { closeSync, readSync } from 'node:fs';
import { FileError } from '../engine/fs/fileError.js';
import { makeDirs } from '../engine/fs/makeDirs.js';
import { openRegular } from '../engine/fs/regularFile.js';
import { dirname } from 'node:path';
import { StoreError } from './storeError.js';
import { EXARCH_APPLICATION_ID, MIGRATIONS, SCHEMA_VERSION } from './sqliteSchema.js';
import { openFailure } from './sqliteFailures.js';

const WAL_SIZE_LIMIT_BYTES = 64 * 1024 * 1024;

/** How long a write waits for another process's transaction before SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;

const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Checks an existing file read-only, then opens it read-write and brings its schema up to date.
 * Nothing is written to a file before it has been found to be an exarch database (or empty).
 */
export function openChecked(file: string): Database.Database {
  const head = readHead(file);
  if (head !== undefined && head.size > 0) inspect(file, head.bytes);
  let db: Database.Database;
  try {
    if (head === undefined) makeDirs(dirname(file));
    db = new Database(file, { timeout: BUSY_TIMEOUT_MS });
  } catch (error) {
    throw openFailure(error, file);
  }
  try {
    migrate(db, file);
    // After the migration's commit: until then nothing but the checked transaction writes.
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    // Checkpoints run on a worker thread (see WalCheckpointer); after one, a WAL larger than this
    // is cut back.
    db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    return db;
  } catch (error) {
    db.close();
    throw openFailure(error, file);
  }
}

/** The files SQLite keeps beside a database: each, if it is there, must be a regular file too. */
const SIDE_FILES = ['-wal', '-shm', '-journal'];

/**
 * The file's size and first 100 bytes (SQLite's header, or fewer for a shorter file); undefined
 * if there is none (a new store). The file, and the files SQLite keeps beside it, are opened
 * without waiting and checked on their descriptors (regularFile.ts): a FIFO, a device or a
 * directory given as the store, or put where its WAL goes, is refused before SQLite opens it.
 */
function readHead(file: string): { size: number; bytes: Buffer } | undefined {
  for (const side of SIDE_FILES) {
    try {
      closeSync(openRegular(`${file}${side}`, 'read', { what: '' }).fd);
    } catch (error) {
      if (!(error instanceof FileError && error.kind === 'missing')) throw openFailure(error, file);
    }
  }
  let opened: ReturnType<typeof openRegular>;
  try {
    opened = openRegular(file, 'read', { what: '' });
  } catch (error) {
    if (error instanceof FileError && error.kind === 'missing') return undefined;
    throw openFailure(error, file);
  }
  try {
    const head = Buffer.alloc(100);
    return { size: opened.stats.size, bytes: head.subarray(0, readSync(opened.fd, head, 0, head.length, 0)) };
  } catch (error) {
    throw openFailure(error, file);
  } finally {
    closeSync(opened.fd);
  }
}

/** The read-only checks: SQLite's header, our application id, a schema we know, pages intact. */
function inspect(file: string, head: Buffer): void {
  if (!head.subarray(0, SQLITE_MAGIC.length).equals(SQLITE_MAGIC)) throw new StoreError('not-exarch', file, 'not a SQLite file');
  if (head.length < 100) throw new StoreError('corrupt', file, 'truncated inside its header');
  let db: Database.Database | undefined;
  try {
    db = new Database(file, { readonly: true, fileMustExist: true, timeout: BUSY_TIMEOUT_MS });
    checkMarks(db, file);
    const problems = (db.pragma('quick_check(1)') as { quick_check: string }[]).flatMap((row) => row.quick_check.split('\n'));
    const problem = problems.find((line) => line !== 'ok' && !line.startsWith('***'));
    if (problem !== undefined) throw new StoreError('corrupt', file, problem);
  } catch (error) {
    throw openFailure(error, file);
  } finally {
    db?.close();
  }
}

/** Throws unless the database is ours at a schema we read, or is empty and unmarked (ours to set up). */
function checkMarks(db: Database.Database, file: string): void {
  const applicationId = db.pragma('application_id', { simple: true }) as number;
  const version = db.pragma('user_version', { simple: true }) as number;
  if (applicationId !== EXARCH_APPLICATION_ID) {
    const empty = applicationId === 0 && version === 0 && db.prepare('SELECT 1 FROM sqlite_schema LIMIT 1').get() === undefined;
    if (!empty) throw new StoreError('not-exarch', file);
  }
  if (version > SCHEMA_VERSION) throw new StoreError('newer-schema', file, `schema ${version}; this exarch reads ${SCHEMA_VERSION}`);
}

/** Checks again under the write lock (another process may have created it meanwhile), then runs the missing steps. */
function migrate(db: Database.Database, file: string): void {
  db.transaction(() => {
    checkMarks(db, file);
    const version = db.pragma('user_version', { simple: true }) as number;
    if (version === SCHEMA_VERSION) return;
    for (let step = version + 1; step <= SCHEMA_VERSION; step++) db.exec(MIGRATIONS[step] ?? '');
    db.pragma(`application_id = ${EXARCH_APPLICATION_ID}`);
    db.pragma(`user_version = ${SCHEMA_VERSION}`);
  }).immediate();
}
