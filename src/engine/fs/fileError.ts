import { ExarchError } from '../exarchError.js';

/**
 * Why a file exarch opens by name could not be used:
 *
 * - `missing`: there is no such file.
 * - `not-regular`: a directory, FIFO, socket, device (or, where exarch names the file itself, a
 *   symlink): refused without waiting on it.
 * - `too-large`: larger than exarch reads of that kind of file (the limit is in the message).
 * - `no-space`: the disk (ENOSPC) or the user's quota (EDQUOT) is full.
 * - `size-limit`: the process's file-size limit (EFBIG, `ulimit -f`) is reached.
 * - `read-only`: a read-only file system (EROFS).
 * - `denied`: no permission (EACCES, EPERM), as in a directory the user cannot write.
 * - `path`: a part of the path is a file, not a directory.
 * - `io`: any other failure of the system, in its own words.
 *
 * `no-space`, `size-limit`, `read-only` and `denied` are the resource faults: once the disk has
 * room, the limit is raised or the directory is writable, the same write succeeds.
 */
export type FileErrorKind = 'missing' | 'not-regular' | 'too-large' | 'no-space' | 'size-limit' | 'read-only' | 'denied' | 'path' | 'io';

/**
 * A file exarch reads or writes by name (a session log, a trace, a recording, a config, the
 * viewer's page) that could not be used. The message is one line naming the file, what it is to
 * exarch and the cause (`cannot write the session log /x/root.jsonl: no space left on the device
 * (ENOSPC)`); `reason` is the cause alone, for messages that word the rest their own way.
 */
export class FileError extends ExarchError<FileErrorKind> {
  constructor(
    kind: FileErrorKind,
    /** The file as it was named. */
    readonly file: string,
    /** The cause, as the end of a sentence: `it is a FIFO, not a regular file`. */
    readonly reason: string,
    /** What the file is to exarch, as in `the session log` (empty: the file's name says it), and whether it was being read or written. */
    readonly role: { readonly what: string; readonly writing: boolean },
    /** The system's error code (`ENOSPC`), when there was one. */
    readonly code?: string,
    options?: ErrorOptions,
  ) {
    super(kind, `cannot ${role.writing ? 'write' : 'read'} ${role.what === '' ? '' : `${role.what} `}${oneLine(file)}: ${reason}`, options);
  }
}

/** A file system's failure (an `ErrnoException`) on `file` as a `FileError`; a `FileError` is returned as it is. */
export function fileErrorOf(error: unknown, file: string, role: FileError['role']): FileError {
  if (error instanceof FileError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  const options = { cause: error };
  const as = (kind: FileErrorKind, reason: string): FileError => new FileError(kind, file, reason, role, code, options);
  switch (code) {
    case 'ENOENT':
      return as('missing', 'no such file');
    case 'ENOTDIR':
    case 'EEXIST':
      return as('path', 'a part of the path is a file');
    case 'EISDIR':
      return as('not-regular', 'it is a directory, not a regular file');
    case 'ENOSPC':
      return as('no-space', 'no space left on the device (ENOSPC)');
    case 'EDQUOT':
      return as('no-space', 'the disk quota is used up (EDQUOT)');
    case 'EFBIG':
      return as('size-limit', 'the file-size limit is reached (EFBIG; see ulimit -f)');
    case 'EROFS':
      return as('read-only', 'the file system is read-only (EROFS)');
    case 'EACCES':
    case 'EPERM':
      return as('denied', 'permission denied');
    default:
      return as('io', oneLine(error instanceof Error ? error.message : String(error)));
  }
}

/** A path or a system's message may hold a newline; the message stays one line. */
function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ');
}
