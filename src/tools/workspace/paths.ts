import { realpathSync } from 'node:fs';
import { lstat, readlink, realpath } from 'node:fs/promises';
import path from 'node:path';
import { ExarchError } from '../../engine/exarchError.js';
import { isWellFormedText } from '../../engine/wellFormed.js';

/**
 * Confinement: every path a workspace tool touches is relative to the working directory (the
 * root) and must really be inside it — after `..` is applied and after every symlink along the
 * way is followed, dangling ones included.
 */

/**
 * Why a workspace tool could not do what the model asked:
 *
 * - `refused`: what confinement forbids (a path outside the root, or one that leads out through a
 *   symlink, an absolute path, a NUL; a file that changed under the tool; writing a non-file).
 * - `not-found`: no such file or directory.
 * - `wrong-type`: a directory where a file is wanted, or the other way round; not a regular or
 *   not a text file.
 * - `invalid-input`: an argument the tool cannot use (a regular expression, a glob, an offset).
 * - `io`: anything else the file system or the process said (permission denied, a symlink loop).
 */
export type WorkspaceErrorKind = 'refused' | 'not-found' | 'wrong-type' | 'invalid-input' | 'io';

/** A refusal or a file-system fault, as one line for the model. */
export class WorkspaceError extends ExarchError<WorkspaceErrorKind> {
  constructor(kind: WorkspaceErrorKind, message: string) {
    super(kind, message);
  }
}

export interface ResolvedPath {
  /** As shown to the model: relative to the root, `/`-separated, `.` for the root itself. */
  readonly display: string;
  /** The real absolute location, every symlink resolved; inside `rootReal`. Tools operate on this. */
  readonly real: string;
  /** The root's real absolute location. */
  readonly rootReal: string;
}

/** Symlinks followed while resolving a path whose tail does not exist yet (the kernel's own limit is 40). */
const MAX_LINK_HOPS = 40;

/**
 * Resolves `input` (relative to `root`) to its real location, refusing absolute paths, `..`
 * escapes and symlinks that lead outside the root. The path need not exist: its existing part is
 * resolved with `realpath` and the rest is appended, so a file can be created there.
 */
export async function resolveInside(root: string, input: string): Promise<ResolvedPath> {
  const shown = input === '' ? '.' : input;
  if (shown.includes('\0')) throw new WorkspaceError('refused', `refused: ${quote(shown)} contains a NUL character`);
  // A lone surrogate has no UTF-8 form: the file system would be handed U+FFFD, a file the model did not name.
  if (!isWellFormedText(shown))
    throw new WorkspaceError('refused', `refused: ${quote(shown)} holds a lone surrogate (half of a UTF-16 pair), which no file name can hold`);
  if (path.isAbsolute(shown)) {
    throw new WorkspaceError('refused', `refused: ${quote(shown)} is an absolute path; use a path relative to the working directory`);
  }
  const lexical = path.resolve(root, shown);
  if (!isInside(root, lexical)) throw new WorkspaceError('refused', `refused: ${quote(shown)} is outside the working directory`);
  const rootReal = await realRoot(root);
  const real = await realLocation(path.resolve(rootReal, path.relative(root, lexical)), shown, 0);
  if (!isInside(rootReal, real)) {
    throw new WorkspaceError('refused', `refused: ${quote(shown)} leads outside the working directory through a symlink`);
  }
  return { display: displayPath(root, lexical), real, rootReal };
}

/** `child` is `parent` or lies below it. */
export function isInside(parent: string, child: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (rel !== '..' && !rel.startsWith(`..${path.sep}`) && !path.isAbsolute(rel));
}

/**
 * `p` with its longest existing part resolved (symlinks and all) and the rest appended as it is:
 * where a file that does not exist yet would be, as a real path.
 */
export function realAsFarAsItExists(p: string): string {
  const missing: string[] = [];
  for (let at = path.resolve(p); ; at = path.dirname(at)) {
    try {
      return path.join(realpathSync(at), ...missing);
    } catch {
      if (path.dirname(at) === at) return path.resolve(p);
      missing.unshift(path.basename(at));
    }
  }
}

/** `abs` relative to `root`, `/`-separated, `.` for the root. */
function displayPath(root: string, abs: string): string {
  const rel = path.relative(root, abs);
  return rel === '' ? '.' : rel.split(path.sep).join('/');
}

/** `child` (a `/`-separated relative path) below the displayed path `parent`. */
export function joinDisplay(parent: string, child: string): string {
  return parent === '.' ? child : `${parent.replace(/\/+$/, '')}/${child}`;
}

export function quote(text: string): string {
  return `'${text}'`;
}

async function realRoot(root: string): Promise<string> {
  try {
    return await realpath(root);
  } catch (error) {
    throw new WorkspaceError('io', `the working directory ${root} is not accessible (${errorCode(error) ?? 'unknown error'})`);
  }
}

/** Like `realpath`, but for a path whose tail may not exist (a dangling symlink is followed to its target). */
async function realLocation(abs: string, shown: string, hops: number): Promise<string> {
  if (hops > MAX_LINK_HOPS) throw new WorkspaceError('io', `cannot resolve ${quote(shown)}: too many levels of symlinks`);
  try {
    return await realpath(abs);
  } catch (error) {
    if (errorCode(error) === 'ELOOP') throw new WorkspaceError('io', `cannot resolve ${quote(shown)}: too many levels of symlinks`);
    if (!isMissing(error)) throw fsError(error, shown);
  }
  const parent = path.dirname(abs);
  if (parent === abs) return abs;
  const realParent = await realLocation(parent, shown, hops);
  const candidate = path.join(realParent, path.basename(abs));
  let isLink: boolean;
  try {
    isLink = (await lstat(candidate)).isSymbolicLink();
  } catch (error) {
    if (isMissing(error)) return candidate;
    throw fsError(error, shown);
  }
  if (!isLink) return candidate;
  // A dangling symlink: where it points decides, since writing through it would create its target.
  return realLocation(path.resolve(realParent, await readlink(candidate)), shown, hops + 1);
}

export function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null || !('code' in error)) return undefined;
  const code = (error as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

function isMissing(error: unknown): boolean {
  const code = errorCode(error);
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** A one-line error for a failed file-system call on the path the model named. */
export function fsError(error: unknown, shown: string): Error {
  if (error instanceof WorkspaceError) return error;
  // Not a file-system fault (an abort, a bug): pass it on as it is.
  if (error instanceof Error && errorCode(error) === undefined) return error;
  switch (errorCode(error)) {
    case 'ENOENT':
      return new WorkspaceError('not-found', `no such file: ${shown}`);
    case 'ENOTDIR':
      return new WorkspaceError('not-found', `no such file: ${shown} (a part of the path is a file, not a directory)`);
    case 'EISDIR':
      return new WorkspaceError('wrong-type', `${quote(shown)} is a directory`);
    case 'EACCES':
    case 'EPERM':
      return new WorkspaceError('io', `permission denied: ${shown}`);
    case 'ELOOP':
      return new WorkspaceError('refused', `refused: ${quote(shown)} is a symlink that changed while it was being used`);
    case 'EEXIST':
      return new WorkspaceError('wrong-type', `cannot create ${quote(shown)}: a part of the path exists and is not a directory`);
    default: {
      const message = error instanceof Error ? error.message : String(error);
      return new WorkspaceError('io', `${shown}: ${message}`);
    }
  }
}
