import { closeSync, constants, fstatSync, ftruncateSync, lstatSync, openSync, readSync, statSync, unlinkSync, writeSync, type Stats } from 'node:fs';
import { FileError, fileErrorOf } from './fileError.js';
import { fileKind } from './fileKind.js';

/**
 * Every file exarch opens by name (session logs, traces, recordings, the agents' config, the
 * viewer's page, the run store's header) is opened here, as the workspace tools open theirs
 * (src/tools/workspace/openInside.ts):
 *
 * - With O_NONBLOCK, so that no open waits: a FIFO opened for reading waits for a writer, and for
 *   writing for a reader, a device may wait for ever; a process stuck in such an open runs no
 *   JavaScript, so not even Ctrl-C or SIGTERM end it. Here the open returns at once (a FIFO
 *   without a reader answers ENXIO) and the descriptor is checked with `fstat`: anything but a
 *   regular file is refused. The check is on what was opened, not a `stat` of the name before the
 *   open, which a command in the sandbox could win by swapping the file in between.
 * - Reads are bounded: a file larger than the caller's limit is refused by its size before a byte
 *   is read, and a read stops one byte past the limit (a file that grows meanwhile, a /proc file
 *   whose size says 0). The descriptor stays non-blocking, so a file whose read would wait
 *   answers EAGAIN and is refused.
 * - Writes leave whole data or none: a write that fails part way (a full disk, a file-size limit)
 *   is cut back to where it began, so a JSONL file never ends in half a line.
 *
 * Synchronous, like the callers were: each call is an open, an fstat and reads or writes of a
 * regular file, none of which can wait on another process.
 */

const NONBLOCK = constants.O_NONBLOCK ?? 0;
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

/** How a file is opened: `append` and `write` create it; `write` then empties it (after it was found to be a regular file). */
export type OpenFor = 'read' | 'append' | 'write';

const FLAGS: Readonly<Record<OpenFor, number>> = {
  read: constants.O_RDONLY | NONBLOCK,
  append: constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | NONBLOCK,
  write: constants.O_WRONLY | constants.O_CREAT | NONBLOCK,
};

/** What the file is to exarch, for messages (`the session log`; empty when its name says it). */
export interface FileRole {
  readonly what: string;
}

export interface OpenOptions extends FileRole {
  /**
   * Refuse a symlink as the file itself (O_NOFOLLOW): for files exarch names itself (a session
   * log in its log directory), where a symlink can only have been planted. A path the user gave
   * may be one.
   */
  readonly noFollow?: boolean;
}

/** A regular file held open: its descriptor (closed by the caller) and its `fstat`. */
export interface RegularFile {
  readonly fd: number;
  readonly stats: Stats;
  /** This open created the file (it did not exist before). */
  readonly created: boolean;
}

/**
 * Opens `file` without waiting and checks, on the descriptor, that it is a regular file;
 * anything else is closed and refused with a `FileError` (`not-regular`), as is every failure of
 * the open (`missing`, `denied`, …). What the name leads to is looked at first, and a device,
 * FIFO, socket or directory is refused before any open: opening some devices does something
 * (arming a watchdog, rewinding a tape) even without a read. The descriptor is then checked to be
 * that same file, so one swapped in between is refused as well.
 */
export function openRegular(file: string, how: OpenFor, options: OpenOptions): RegularFile {
  const role = { what: options.what, writing: how !== 'read' };
  const flags = FLAGS[how] | (options.noFollow ? NOFOLLOW : 0);
  let before: Stats | undefined;
  try {
    before = options.noFollow ? lstatSync(file) : statSync(file);
  } catch (error) {
    // Missing: a write makes it; a read reports it from the open below, as any other failure.
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw openFailure(error, file, role, options.noFollow === true);
  }
  if (before && !before.isFile() && !(options.noFollow && before.isSymbolicLink())) {
    throw new FileError('not-regular', file, `it is ${fileKind(before)}, not a regular file`, role);
  }
  let fd: number;
  let created = false;
  try {
    if (how !== 'write') fd = openSync(file, flags, 0o666);
    else {
      // Exclusive first, to know whether this open made the file (a failed write removes only a file it made).
      try {
        fd = openSync(file, flags | constants.O_EXCL, 0o666);
        created = true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
        // There already (or a symlink to a file yet to be made, which this open then makes).
        fd = openSync(file, flags, 0o666);
      }
    }
  } catch (error) {
    throw openFailure(error, file, role, options.noFollow === true);
  }
  let stats: Stats;
  try {
    stats = fstatSync(fd);
  } catch (error) {
    closeQuietly(fd);
    throw fileErrorOf(error, file, role);
  }
  if (!stats.isFile()) {
    closeQuietly(fd);
    throw new FileError('not-regular', file, `it is ${fileKind(stats)}, not a regular file`, role);
  }
  // Another file than the one looked at (the name was swapped meanwhile): not the file that was checked.
  if (before?.isFile() && (before.dev !== stats.dev || before.ino !== stats.ino)) {
    closeQuietly(fd);
    throw new FileError('not-regular', file, 'it was replaced while it was being opened', role);
  }
  return { fd, stats, created };
}

/**
 * The whole of `file`, at most `maxBytes` of it: a larger file is refused by its size
 * (`too-large`, the limit in the message) and never read.
 */
export function readRegular(file: string, maxBytes: number, role: FileRole): Buffer {
  const { fd, stats } = openRegular(file, 'read', role);
  const reading = { what: role.what, writing: false };
  try {
    if (stats.size > maxBytes) throw tooLarge(file, `it is ${formatBytes(stats.size)}`, maxBytes, reading);
    // One byte past the limit tells a file that is too large from one that is exactly at it; the
    // size may be wrong (a file that grows meanwhile, a /proc file that says 0), so the buffer grows.
    let buffer = Buffer.allocUnsafe(Math.min(maxBytes + 1, Math.max(stats.size + 1, 64 * 1024)));
    let total = 0;
    for (;;) {
      if (total === buffer.length) {
        if (total > maxBytes) throw tooLarge(file, 'it is', maxBytes, reading);
        const bigger = Buffer.allocUnsafe(Math.min(maxBytes + 1, buffer.length * 2));
        buffer.copy(bigger, 0, 0, total);
        buffer = bigger;
      }
      let read: number;
      try {
        read = readSync(fd, buffer, total, buffer.length - total, null);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'EAGAIN')
          throw new FileError('not-regular', file, 'reading it would wait (it is no ordinary file)', reading, 'EAGAIN');
        throw fileErrorOf(error, file, reading);
      }
      if (read === 0) break;
      total += read;
    }
    if (total > maxBytes) throw tooLarge(file, 'it is', maxBytes, reading);
    return buffer.subarray(0, total);
  } finally {
    closeQuietly(fd);
  }
}

/**
 * Appends `data` to `file` (made if missing). All of it or none: a write that fails part way is
 * cut back to the file's size before it, and the failure thrown as a `FileError`.
 */
export function appendRegular(file: string, data: string | Buffer, options: OpenOptions): void {
  const { fd, stats } = openRegular(file, 'append', options);
  try {
    writeWhole(fd, data, stats.size, file, options);
  } finally {
    closeQuietly(fd);
  }
}

/**
 * Makes `file` hold exactly `data` (made if missing, emptied if not). A write that fails leaves
 * no part of `data` behind: the file is emptied again, and removed if this call made it.
 */
export function writeRegular(file: string, data: string | Buffer, options: OpenOptions): void {
  const { fd, created } = openRegular(file, 'write', options);
  try {
    ftruncateSync(fd, 0);
    writeWhole(fd, data, 0, file, options);
  } catch (error) {
    if (created) {
      try {
        unlinkSync(file);
      } catch {
        // Emptied already; a file that cannot be removed stays empty.
      }
    }
    throw fileErrorOf(error, file, { what: options.what, writing: true });
  } finally {
    closeQuietly(fd);
  }
}

/** Writes all of `data` at the descriptor's position; on a failure, cuts the file back to `from` and throws. */
function writeWhole(fd: number, data: string | Buffer, from: number, file: string, role: FileRole): void {
  const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let done = 0;
  try {
    while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
  } catch (error) {
    if (done > 0) {
      try {
        ftruncateSync(fd, from);
      } catch {
        // Cutting back shrinks the file, which no full disk or size limit refuses; nothing else to try.
      }
    }
    throw fileErrorOf(error, file, { what: role.what, writing: true });
  }
}

/** A failed open, named: ENXIO is a FIFO without a reader (or a socket, a device without a driver); ELOOP under O_NOFOLLOW, a symlink. */
function openFailure(error: unknown, file: string, role: FileError['role'], noFollow: boolean): FileError {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENXIO' || code === 'ENODEV') {
    // stat never waits on a FIFO: it only names what the open refused.
    let kind = 'not a regular file';
    try {
      kind = `${fileKind(statSync(file))}, not a regular file`;
    } catch {
      // Gone meanwhile: the generic words.
    }
    return new FileError('not-regular', file, `it is ${kind}`, role, code, { cause: error });
  }
  if (code === 'ELOOP' && noFollow) return new FileError('not-regular', file, 'it is a symlink, not a regular file', role, code, { cause: error });
  return fileErrorOf(error, file, role);
}

/** `it is 300 MiB, over the limit of 256 MiB` (`size`: `it is 300 MiB`, or `it is` when the size is not known). */
function tooLarge(file: string, size: string, maxBytes: number, role: FileError['role']): FileError {
  return new FileError('too-large', file, `${size}${size === 'it is' ? '' : ','} over the limit of ${formatBytes(maxBytes)}`, role);
}

/** `256 MiB`, `1.5 KiB`, `12 bytes`. */
export function formatBytes(bytes: number): string {
  for (const [unit, size] of [
    ['GiB', 2 ** 30],
    ['MiB', 2 ** 20],
    ['KiB', 2 ** 10],
  ] as const) {
    if (bytes >= size) {
      const value = bytes / size;
      return `${Number.isInteger(value) ? value : value.toFixed(1)} ${unit}`;
    }
  }
  return `${bytes} byte${bytes === 1 ? '' : 's'}`;
}

function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // Nothing was left to write through it.
  }
}
