import { closeSync, lstatSync, renameSync, unlinkSync } from 'node:fs';
import path from 'node:path';
import { BY_DESCRIPTOR, inDir, openDirNoFollow } from './dirDescriptors.js';

/**
 * Removes those of `paths` (below `root`, a real directory) that exist now: files that must not
 * appear, such as a `.git/commondir` a sandboxed command wrote to send git, run later by the
 * person, to a config and hooks of the command's choosing. Each is reached by descriptor, never
 * through a symlink (dirDescriptors.ts): a symlink is itself unlinked, never followed, and a
 * directory on the way that is no longer one leaves that path alone (what is there is not what git
 * would read). A file or symlink is unlinked; a directory (git cannot read it as a file, but then
 * stops with an error) is renamed aside, next to where it was, rather than walked. Returns what was
 * removed, relative to `root`.
 */
export function removeAppeared(root: string, paths: readonly string[]): string[] {
  if (!BY_DESCRIPTOR) return [];
  const removed: string[] = [];
  for (const p of paths) {
    const relative = path.relative(root, p);
    if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) continue;
    if (removeOne(root, relative.split(path.sep))) removed.push(relative.split(path.sep).join('/'));
  }
  return removed;
}

function removeOne(root: string, parts: readonly string[]): boolean {
  const name = parts.at(-1);
  if (name === undefined) return false;
  let fd: number | undefined;
  try {
    fd = openDirNoFollow(root);
    for (const dir of parts.slice(0, -1)) {
      const next = openDirNoFollow(inDir(fd, dir));
      closeSync(fd);
      fd = next;
    }
    const at = inDir(fd, name);
    if (lstatSync(at).isDirectory()) renameSync(at, inDir(fd, `${name}.removed-by-exarch-${process.pid}-${Date.now()}`));
    else unlinkSync(at);
    return true;
  } catch {
    // Not there (the usual case), or nowhere git would look.
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
