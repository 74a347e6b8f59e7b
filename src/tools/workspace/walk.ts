import type { Dirent } from 'node:fs';
import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { errorCode } from './paths.js';

/** Directories a recursive listing or search shows but never descends into. */
export const SKIPPED_DIRS: ReadonlySet<string> = new Set(['.git', 'node_modules']);

/**
 * Levels a walk descends at most, whatever depth was asked: a workspace can hold a tree thousands
 * of directories deep (made to trap a crawler), whose paths outgrow PATH_MAX; real trees are far
 * shallower, and a deeper part can still be listed by naming a directory inside it.
 */
export const WALK_MAX_DEPTH = 64;

type EntryKind = 'dir' | 'file' | 'symlink' | 'other';

export interface WalkEntry {
  /** Relative to the directory walked, `/`-separated. */
  readonly rel: string;
  readonly abs: string;
  readonly kind: EntryKind;
  /** 1 for the walked directory's own entries. */
  readonly depth: number;
  /** Set on a directory the walk did not descend into although the depth asked for allowed it. */
  readonly notDescended?: 'skipped' | 'unreadable' | 'too deep';
}

export interface WalkOptions {
  /** Levels to descend: 1 lists only the directory's own entries. */
  readonly maxDepth: number;
  readonly signal: AbortSignal;
}

/**
 * Depth-first, each directory's entries sorted by name, a directory's contents right after it.
 * Symlinks are reported but never followed, so the walk cannot leave the tree or loop.
 */
export async function* walk(dir: string, options: WalkOptions): AsyncGenerator<WalkEntry> {
  yield* walkBelow(dir, '', 1, options);
}

async function* walkBelow(dir: string, prefix: string, depth: number, options: WalkOptions): AsyncGenerator<WalkEntry> {
  options.signal.throwIfAborted();
  const entries = (await readdir(dir, { withFileTypes: true })).sort((a, b) => compareNames(a.name, b.name));
  for (const entry of entries) {
    options.signal.throwIfAborted();
    const rel = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    const abs = path.join(dir, entry.name);
    const kind = kindOf(entry);
    const descend = kind === 'dir' && depth < options.maxDepth;
    if (descend && SKIPPED_DIRS.has(entry.name)) {
      yield { rel, abs, kind, depth, notDescended: 'skipped' };
      continue;
    }
    if (descend && depth >= WALK_MAX_DEPTH) {
      yield { rel, abs, kind, depth, notDescended: 'too deep' };
      continue;
    }
    if (!descend) {
      yield { rel, abs, kind, depth };
      continue;
    }
    let below: AsyncGenerator<WalkEntry>;
    let first: IteratorResult<WalkEntry>;
    try {
      below = walkBelow(abs, rel, depth + 1, options);
      first = await below.next();
    } catch (error) {
      const code = errorCode(error);
      // Gone, forbidden, or out of the kernel's reach (a path past PATH_MAX, a loop): passed over, and said so.
      if (code === undefined || !UNREADABLE.has(code)) throw error;
      yield { rel, abs, kind, depth, notDescended: 'unreadable' };
      continue;
    }
    yield { rel, abs, kind, depth };
    if (first.done !== true) {
      yield first.value;
      yield* below;
    }
  }
}

const UNREADABLE: ReadonlySet<string> = new Set(['EACCES', 'EPERM', 'ENOENT', 'ENOTDIR', 'ENAMETOOLONG', 'ELOOP']);

function kindOf(entry: Dirent): EntryKind {
  if (entry.isSymbolicLink()) return 'symlink';
  if (entry.isDirectory()) return 'dir';
  if (entry.isFile()) return 'file';
  return 'other';
}

/** Code-unit order: stable across locales. */
function compareNames(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
