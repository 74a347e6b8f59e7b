import Database from 'better-sqlite3';
import { FileError } from '../engine/fs/fileError.js';
import { formatBytes, readRegular } from '../engine/fs/regularFile.js';
import { StoreError } from './storeError.js';

/**
 * A write SQLite could not make for want of room or permission, as the StoreError a user can act
 * on (`unwritable`); anything else as it is. SQLite says SQLITE_FULL for a full disk; a file-size
 * limit (EFBIG) and most other failed writes are SQLITE_IOERR_WRITE, which cannot tell them apart:
 * the limit, if this process has one, is named beside it.
 */
export function writeFailure(error: unknown, file: string): unknown {
  if (!(error instanceof Database.SqliteError)) return error;
  const { code } = error;
  const as = (detail: string): StoreError => new StoreError('unwritable', file, detail, { cause: error });
  if (code === 'SQLITE_FULL') return as('no space left on the device (SQLITE_FULL)');
  if (code.startsWith('SQLITE_READONLY')) return as(`the file or its directory is read-only (${code})`);
  if (code.startsWith('SQLITE_IOERR') || code === 'SQLITE_CANTOPEN') return as(`${error.message} (${code})${fileSizeLimit()}`);
  return error;
}

/** `; this process may write files of at most N (ulimit -f)` when it has such a limit, else ''. */
function fileSizeLimit(): string {
  try {
    const limits = readRegular('/proc/self/limits', 64 * 1024, { what: '' }).toString('utf8');
    const soft = /^Max file size\s+(\d+)/m.exec(limits)?.[1];
    return soft === undefined ? '' : `; this process may write files of at most ${formatBytes(Number(soft))} (ulimit -f)`;
  } catch {
    return '';
  }
}

/** SQLite's and the file system's failures while opening, as the StoreError a user can act on. */
export function openFailure(error: unknown, file: string): unknown {
  if (error instanceof StoreError) return error;
  // The store's own file, or one SQLite keeps beside it, is not a regular file (the path it names says which).
  if (error instanceof FileError)
    return new StoreError('unreadable', file, error.file === file ? error.reason : `${error.file}: ${error.reason}`, { cause: error });
  const message = error instanceof Error ? error.message : String(error);
  if (error instanceof Database.SqliteError && /^SQLITE_(CORRUPT|NOTADB)/.test(error.code)) return new StoreError('corrupt', file, message, { cause: error });
  if (error instanceof Database.SqliteError && !/^SQLITE_(CANTOPEN|IOERR|PERM|AUTH|READONLY)/.test(error.code)) return error;
  return new StoreError('unreadable', file, message, { cause: error });
}
