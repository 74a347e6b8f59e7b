import { randomBytes } from 'node:crypto';
import { constants, type Stats } from 'node:fs';
import { type FileHandle, open, realpath, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { defineTool, type Tool } from '../defineTool.js';
import { fileKind } from '../../engine/fs/fileKind.js';
import { at, changed, createDirs, keepOwner, locate, ownerOf, type Location, type OpenDir, type Owner } from './openInside.js';
import { errorCode, fsError, quote, WorkspaceError } from './paths.js';
import type { ProtectedPaths } from './protectedPaths.js';

const NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const NONBLOCK = constants.O_NONBLOCK ?? 0;
/** Opens an existing target only to check it: no O_TRUNC, no O_CREAT, and O_NONBLOCK so a FIFO without a reader fails (ENXIO) rather than waits. */
const CHECK_FLAGS = constants.O_WRONLY | NOFOLLOW | NONBLOCK;
/** The new content goes to a file made here and now: O_EXCL, so it is never an existing file, link or FIFO. */
const TEMP_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NOFOLLOW | NONBLOCK;

const input = z.object({
  path: z.string().min(1).describe('File path relative to the working directory.'),
  content: z.string().describe('The complete new content of the file.'),
});

/** `protection`: the paths it refuses to write (exarch's state, git's hooks and config); none without. */
export function writeFileTool(root: string, protection?: ProtectedPaths): Tool {
  return defineTool({
    name: 'write_file',
    // Writes the whole file from its input (a fresh file renamed over the old one, no append mode): a second run leaves the
    // same bytes as the first, so a call in flight at a crash is run again rather than answered as unknown.
    idempotent: true,
    description:
      'Create or overwrite a file in the working directory with `content` (the whole file). Missing parent directories are ' +
      'created. Paths outside the working directory are refused.',
    input,
    run: ({ path: shown, content }, { signal }) => writeText(root, shown, content, signal, protection),
  });
}

async function writeText(root: string, shown: string, content: string, signal: AbortSignal, protection: ProtectedPaths | undefined): Promise<string> {
  signal.throwIfAborted();
  const location = await locate(root, shown);
  try {
    // Before any directory is made: where the walk found the file to be, every symlink on the way followed.
    if (protection !== undefined) {
      const found = location.found;
      const real =
        found.kind === 'entry' ? path.join(found.dir.real, found.name) : found.kind === 'missing' ? path.join(found.dir.real, ...found.rest) : undefined;
      const refusal = real === undefined ? undefined : protection.refusal(await realpath(root), real, shown);
      if (refusal !== undefined) throw refusal;
    }
    const target = await prepareTarget(location, shown);
    signal.throwIfAborted();
    const bytes = Buffer.from(content, 'utf8');
    await replaceFile(target, bytes, shown);
    return `wrote ${bytes.length} bytes to ${location.display}`;
  } finally {
    await location.release();
  }
}

interface Target {
  /** The directory the file is (to be) in, held open. */
  readonly dir: OpenDir;
  readonly name: string;
  /** The existing file's permission bits, kept by the new file; undefined for a new file. */
  readonly mode: number | undefined;
  /** Who the file belongs to: the existing file's owner, or a new one's directory's (see `replaceFile`). */
  readonly owner: Owner;
}

/** Where the file goes: its directory by descriptor (made if missing), and what is there now, refused unless it is a regular file. */
async function prepareTarget(location: Location, shown: string): Promise<Target> {
  const found = location.found;
  switch (found.kind) {
    case 'dir':
      throw new WorkspaceError(
        'wrong-type',
        found.isRoot ? `${quote(shown)} is the working directory itself, not a file` : `${quote(shown)} is a directory, not a file`,
      );
    case 'blocked':
      throw new WorkspaceError('not-found', `cannot write ${quote(shown)}: a part of its directory path is a file`);
    case 'missing': {
      const name = found.rest.at(-1);
      // `x/..` in a symlink's target: that path has no file to create.
      if (name === undefined || found.rest.includes('..')) throw new WorkspaceError('not-found', `no such file: ${shown}`);
      const dir = await createDirs(location, found.dir, found.rest.slice(0, -1), shown);
      return { dir, name, mode: undefined, owner: ownerOf(await dir.handle.stat()) };
    }
    case 'entry': {
      const existing = await existingFile(found.dir, found.name, found.stats, shown);
      return { dir: found.dir, name: found.name, mode: existing.mode & 0o777, owner: ownerOf(existing) };
    }
  }
}

/**
 * Refuses a target that is not a regular file without ever waiting on it: lstat first (a device is
 * never opened), then an O_NONBLOCK open that writes nothing, checked by fstat on the descriptor
 * (an open also says whether this process may write the file at all).
 */
async function existingFile(dir: OpenDir, name: string, stats: Stats, shown: string): Promise<Stats> {
  if (!stats.isFile()) throw notRegular(shown, fileKind(stats));
  let handle: FileHandle;
  try {
    handle = await open(at(dir, name), CHECK_FLAGS);
  } catch (error) {
    const code = errorCode(error);
    // ENXIO: a FIFO with no reader (it replaced the file since lstat).
    if (code === 'ENXIO') throw notRegular(shown, 'a FIFO');
    if (code === 'ELOOP') throw changed(shown);
    throw fsError(error, shown);
  }
  try {
    const opened = await handle.stat();
    if (!opened.isFile()) throw notRegular(shown, fileKind(opened));
    return opened;
  } finally {
    await handle.close();
  }
}

/**
 * Writes `bytes` to a new file in the same directory and renames it over the name.
 *
 * Why replace rather than write in place: a file with more than one hard link may be a link to a
 * file outside the working directory, and writing into it would change that file. A rename
 * changes only the directory entry inside the working directory: the other names keep the old
 * content, whatever the link count is and whenever a link appears. It is also atomic (a reader
 * never sees half a file; a crash leaves the old one) and never opens the old file for writing,
 * so it cannot block on one. The cost: the file gets a new inode (hard links inside the workspace
 * are split), and the directory must be writable. Its owner would become this process's user: run
 * as root, exarch gives it the old file's owner, or a new file its directory's (`keepOwner`).
 */
async function replaceFile(target: Target, bytes: Buffer, shown: string): Promise<void> {
  const temp = `.exarch-write-${randomBytes(6).toString('hex')}.tmp`;
  const handle = await open(at(target.dir, temp), TEMP_FLAGS, target.mode ?? 0o666).catch((error: unknown) => {
    throw fsError(error, shown);
  });
  try {
    try {
      await handle.writeFile(bytes);
      await keepOwner(handle, target.owner);
      // The open's mode went through the umask; an existing file keeps its own bits exactly (after
      // a chown, which clears set-id bits).
      if (target.mode !== undefined) await handle.chmod(target.mode);
    } finally {
      await handle.close();
    }
    await rename(at(target.dir, temp), at(target.dir, target.name));
  } catch (error) {
    await unlink(at(target.dir, temp)).catch(() => undefined);
    // A directory that appeared under the name since it was checked.
    if (errorCode(error) === 'EISDIR') throw new WorkspaceError('wrong-type', `${quote(shown)} is a directory, not a file`);
    throw fsError(error, shown);
  }
}

function notRegular(shown: string, kind: string): WorkspaceError {
  return new WorkspaceError('refused', `refused: ${quote(shown)} is ${kind}, not a regular file; write_file only writes regular files`);
}
