import { constants, existsSync, type Stats } from 'node:fs';
import { lstat, mkdir, open, readlink, realpath, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { errorCode, fsError, isInside, quote, resolveInside, WorkspaceError } from './paths.js';

/**
 * Opening a workspace path by descriptor, so that what is checked is what is used.
 *
 * `resolveInside` checks a path by name (realpath, lstat), and the file was then opened by that
 * name later: a directory swapped for a symlink in between sent the open outside the working
 * directory. Here the path is walked one component at a time, each directory opened with
 * O_NOFOLLOW | O_DIRECTORY *relative to the descriptor of the one before* — openat(2), which Node
 * lacks, done as `/proc/self/fd/N/name`: the kernel takes /proc/self/fd/N to the open directory
 * itself, not to its path, and O_NOFOLLOW / lstat / mkdir / rename act on `name` alone. Whatever
 * is swapped meanwhile, every step starts inside a directory already known to be inside the root.
 * (Chosen over "open, then check realpath of /proc/self/fd/N": that check comes after the open, and
 * an O_CREAT open that lands outside has already created a file there.)
 *
 * Symlinks are still followed when they stay inside: their targets are walked the same way, `..`
 * going back up the stack of open directories and refused above the root. Off Linux (no
 * /proc/self/fd) the same walk goes by real paths: symlinks out are refused, but a swap between
 * two steps is not caught.
 *
 * Every open here is O_NONBLOCK, so none can wait forever (a FIFO, a device); callers fstat the
 * descriptor before using it.
 */

const MAX_LINK_HOPS = 40;
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const DIRECTORY = constants.O_DIRECTORY ?? 0;
const NONBLOCK = constants.O_NONBLOCK ?? 0;
const DIR_FLAGS = constants.O_RDONLY | DIRECTORY | NOFOLLOW | NONBLOCK;
const BY_DESCRIPTOR = process.platform === 'linux' && existsSync('/proc/self/fd');

/** A directory held open: later steps start from its descriptor, never from its path. */
export interface OpenDir {
  readonly handle: FileHandle;
  /** Its real path when it was opened, for messages and for code that still goes by path. */
  readonly real: string;
}

type Found =
  /** The path is a directory (the root itself when `isRoot`). */
  | { readonly kind: 'dir'; readonly dir: OpenDir; readonly isRoot: boolean }
  /** The path is `name` in `dir`, which is neither a directory nor a symlink; `stats` from lstat (the caller fstats what it opens). */
  | { readonly kind: 'entry'; readonly dir: OpenDir; readonly name: string; readonly stats: Stats }
  /** `dir` exists and `rest` (one or more components) below it does not. */
  | { readonly kind: 'missing'; readonly dir: OpenDir; readonly rest: readonly string[] }
  /** A part of the path that must be a directory is a file (or another non-directory). */
  | { readonly kind: 'blocked' };

export interface Location {
  /** The path as shown to the model: relative to the root, `/`-separated. */
  readonly display: string;
  readonly found: Found;
  /** Keeps `dir` open until `release` (a directory made by `createDirs`). */
  hold(dir: OpenDir): void;
  /** Closes every directory the location holds. */
  release(): Promise<void>;
}

/** `name` inside `dir`, as a path the kernel resolves from the descriptor (no name given: the directory itself). */
export function at(dir: OpenDir, name?: string): string {
  const base = BY_DESCRIPTOR ? `/proc/self/fd/${dir.handle.fd}` : dir.real;
  return name === undefined ? base : `${base}/${name}`;
}

/**
 * Finds `input` below `root`, holding open every directory on the way. The refusals by name
 * (absolute, `..` out, NUL, a symlink out) come from `resolveInside`, so they read the same for
 * every tool; the walk then decides, by descriptor. Release the location when done.
 */
export async function locate(root: string, input: string): Promise<Location> {
  const shown = input === '' ? '.' : input;
  const checked = await resolveInside(root, shown).catch((error: unknown) => {
    // Its lstat-then-readlink can lose a race with a concurrent swap (the link gone or no longer a link).
    const code = errorCode(error);
    throw code === 'ENOENT' || code === 'EINVAL' ? changed(shown) : fsError(error, shown);
  });
  const held: OpenDir[] = [];
  const release = async (): Promise<void> => {
    await Promise.all(held.splice(0).map((dir) => dir.handle.close().catch(() => undefined)));
  };
  try {
    const rootDir = await openDir(checked.rootReal, checked.rootReal, shown);
    held.push(rootDir);
    const lexical = path.relative(root, path.resolve(root, shown));
    const found = await walk(rootDir, components(lexical.split(path.sep).join('/')), { root, rootReal: checked.rootReal, shown, held });
    return { display: checked.display, found, hold: (dir) => held.push(dir), release };
  } catch (error) {
    await release();
    throw error;
  }
}

interface Walk {
  readonly root: string;
  readonly rootReal: string;
  readonly shown: string;
  /** Every directory opened, closed by the location's release. */
  readonly held: OpenDir[];
}

async function walk(rootDir: OpenDir, queue: string[], context: Walk): Promise<Found> {
  const { shown } = context;
  // The directories from the root down to where the walk is: `..` pops, a symlink to an absolute path starts over.
  const stack: OpenDir[] = [rootDir];
  let hops = 0;
  for (;;) {
    const name = queue.shift();
    const top = stack.at(-1) ?? rootDir;
    if (name === undefined) return { kind: 'dir', dir: top, isRoot: stack.length === 1 };
    if (name === '..') {
      if (stack.length === 1) throw leadsOutside(shown);
      stack.pop();
      continue;
    }
    let stats: Stats;
    try {
      stats = await lstat(at(top, name));
    } catch (error) {
      if (errorCode(error) === 'ENOENT') return { kind: 'missing', dir: top, rest: [name, ...queue] };
      throw fsError(error, shown);
    }
    if (stats.isSymbolicLink()) {
      hops += 1;
      if (hops > MAX_LINK_HOPS) throw new WorkspaceError('io', `cannot resolve ${quote(shown)}: too many levels of symlinks`);
      const target = await readlink(at(top, name)).catch((error: unknown) => {
        throw errorCode(error) === 'EINVAL' ? changed(shown) : fsError(error, shown);
      });
      if (path.isAbsolute(target)) {
        const below = await belowRoot(target, context);
        if (below === undefined) throw leadsOutside(shown);
        stack.length = 1;
        queue.unshift(...below);
      } else {
        queue.unshift(...components(target));
      }
      continue;
    }
    if (stats.isDirectory()) {
      const dir = await openDir(at(top, name), path.join(top.real, name), shown);
      context.held.push(dir);
      stack.push(dir);
      continue;
    }
    if (queue.length === 0) return { kind: 'entry', dir: top, name, stats };
    return { kind: 'blocked' };
  }
}

/** Who a file or directory belongs to. */
export interface Owner {
  readonly uid: number;
  readonly gid: number;
}

export function ownerOf(stats: Stats): Owner {
  return { uid: stats.uid, gid: stats.gid };
}

/**
 * Gives what exarch just made (`handle`) to `owner`, when exarch runs as root: a file or directory
 * made by root in someone's workspace would be root's, and the commands that run as the
 * workspace's owner (see shellUser.ts) could then neither change it nor add to it. Without root,
 * what the process makes is its own user's, as everything else it writes.
 */
export async function keepOwner(handle: FileHandle, owner: Owner): Promise<void> {
  if (process.getuid?.() !== 0 || (owner.uid === 0 && owner.gid === 0)) return;
  await handle.chown(owner.uid, owner.gid);
}

/**
 * Makes the directories `names` below `dir`, one at a time, each opened by descriptor right
 * after it is made: one swapped for a symlink in between is refused, not followed. Each one made
 * here belongs to the owner of the directory it is made in (`keepOwner`).
 * Returns the last one (held by `location`).
 */
export async function createDirs(location: Location, dir: OpenDir, names: readonly string[], shown: string): Promise<OpenDir> {
  let current = dir;
  for (const name of names) {
    let made = true;
    try {
      await mkdir(at(current, name), 0o777);
    } catch (error) {
      // Made meanwhile by someone else: fine if it is a directory, which the open below checks.
      if (errorCode(error) !== 'EEXIST') throw fsError(error, shown);
      made = false;
    }
    const next = await openDir(at(current, name), path.join(current.real, name), shown);
    location.hold(next);
    if (made)
      await keepOwner(next.handle, ownerOf(await current.handle.stat())).catch((error: unknown) => {
        throw fsError(error, shown);
      });
    current = next;
  }
  return current;
}

/** One line for a path that changed between two steps of the walk (a race, or a concurrent edit). */
export function changed(shown: string): WorkspaceError {
  return new WorkspaceError('refused', `refused: ${quote(shown)} changed while it was being opened (a part of it was replaced, perhaps by a symlink)`);
}

function leadsOutside(shown: string): WorkspaceError {
  return new WorkspaceError('refused', `refused: ${quote(shown)} leads outside the working directory through a symlink`);
}

async function openDir(where: string, real: string, shown: string): Promise<OpenDir> {
  try {
    return { handle: await open(where, DIR_FLAGS), real };
  } catch (error) {
    // lstat said directory a moment ago: it has been replaced (O_NOFOLLOW | O_DIRECTORY on a symlink gives ENOTDIR or ELOOP).
    const code = errorCode(error);
    if (code === 'ENOTDIR' || code === 'ELOOP') throw changed(shown);
    throw fsError(error, shown);
  }
}

/** A path's components, without the empty and `.` ones (`..` is kept: it is walked). */
function components(relative: string): string[] {
  return relative.split('/').filter((part) => part !== '' && part !== '.');
}

/**
 * The components below the root of an absolute symlink target, or undefined when it is outside.
 * Compared by components, not normalised, so a `..` in the target is walked like the kernel would.
 */
async function belowRoot(target: string, context: Walk): Promise<string[] | undefined> {
  const parts = components(target);
  for (const base of [context.rootReal, context.root]) {
    const prefix = components(base);
    if (prefix.every((part, i) => parts[i] === part)) return parts.slice(prefix.length);
  }
  // It may name the root through a symlinked ancestor (/tmp → /private/tmp): the real location of its
  // longest existing head decides, and the missing rest (a file to create, its new directories) is walked as written.
  // Only a mapping to walk from the root; the walk below it is by descriptor as always.
  const real = await realHead(target);
  return real !== undefined && isInside(context.rootReal, real.head) ? [...components(path.relative(context.rootReal, real.head)), ...real.rest] : undefined;
}

/** The real path of the longest part of `target` that exists, and the components after it; undefined when no part resolves. */
async function realHead(target: string): Promise<{ head: string; rest: string[] } | undefined> {
  const rest: string[] = [];
  for (let head = target; ; head = path.dirname(head)) {
    const real = await realpath(head).catch(() => undefined);
    if (real !== undefined) return { head: real, rest: components(rest.join('/')) };
    if (path.dirname(head) === head) return undefined;
    rest.unshift(path.basename(head));
  }
}
