import { closeSync, fchownSync, fstatSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { BY_DESCRIPTOR, inDir, openDirNoFollow } from './dirDescriptors.js';
import { errorCode } from './paths.js';

/**
 * Makes the directory `target` below `root` (a real directory), and the missing ones between, one
 * level at a time, each made and then opened by descriptor (dirDescriptors.ts): a level that is a
 * symlink, or becomes one meanwhile, or is not a directory, stops it there.
 * `mkdirSync(target, { recursive: true })` followed any symlink on the way, so a `core.hooksPath`
 * of `link/a/b` with `link -> /etc` made `/etc/a/b`, as root. What is made here belongs to the
 * owner of the directory it is made in (when exarch is root: a directory made in someone's project
 * stays theirs to change).
 *
 * Returns whether `target` is now a directory reached that way. Without /proc/self/fd (off Linux,
 * where there is no sandbox to protect it for either) nothing is made.
 */
export function makeDirsBelow(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  if (!BY_DESCRIPTOR || relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) return false;
  let fd: number;
  try {
    fd = openDirNoFollow(root);
  } catch {
    return false;
  }
  try {
    for (const name of relative.split(path.sep)) {
      let made = false;
      try {
        mkdirSync(inDir(fd, name), 0o777);
        made = true;
      } catch (error) {
        // There already (a directory, or something the open below refuses), or not ours to make.
        if (errorCode(error) !== 'EEXIST') return false;
      }
      const next = openDirNoFollow(inDir(fd, name));
      const above = fstatSync(fd);
      closeSync(fd);
      fd = next;
      if (made && process.getuid?.() === 0 && (above.uid !== 0 || above.gid !== 0)) fchownSync(fd, above.uid, above.gid);
    }
    return true;
  } catch {
    return false;
  } finally {
    closeSync(fd);
  }
}
