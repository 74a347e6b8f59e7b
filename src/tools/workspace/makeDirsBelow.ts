import { closeSync, constants, existsSync, fchownSync, fstatSync, mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { errorCode } from './paths.js';

const DIR_FLAGS = constants.O_RDONLY | (constants.O_DIRECTORY ?? 0) | (constants.O_NOFOLLOW ?? 0);
const BY_DESCRIPTOR = process.platform === 'linux' && existsSync('/proc/self/fd');

/**
 * Makes the directory `target` below `root` (a real directory), and the missing ones between, one
 * level at a time, each made and then opened relative to the descriptor of the one above
 * (`/proc/self/fd/N/name`, as openInside.ts walks): a level that is a symlink, or becomes one
 * meanwhile, or is not a directory, stops it there. `mkdirSync(target, { recursive: true })`
 * followed any symlink on the way, so a `core.hooksPath` of `link/a/b` with `link -> /etc` made
 * `/etc/a/b`, as root. What is made here belongs to the owner of the directory it is made in (when
 * exarch is root: a directory made in someone's project stays theirs to change).
 *
 * Returns whether `target` is now a directory reached that way. Without /proc/self/fd (off Linux,
 * where there is no sandbox to protect it for either) nothing is made.
 */
export function makeDirsBelow(root: string, target: string): boolean {
  const relative = path.relative(root, target);
  if (!BY_DESCRIPTOR || relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) return false;
  let fd: number;
  try {
    fd = openSync(root, DIR_FLAGS);
  } catch {
    return false;
  }
  try {
    for (const name of relative.split(path.sep)) {
      const here = `/proc/self/fd/${fd}/${name}`;
      let made = false;
      try {
        mkdirSync(here, 0o777);
        made = true;
      } catch (error) {
        // There already (a directory, or something the open below refuses), or not ours to make.
        if (errorCode(error) !== 'EEXIST') return false;
      }
      // O_NOFOLLOW: a symlink, there before or swapped in since the mkdir, is refused (ELOOP).
      const next = openSync(here, DIR_FLAGS);
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
