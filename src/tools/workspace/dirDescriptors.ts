import { constants, existsSync, openSync } from 'node:fs';

/**
 * Directories walked by descriptor, synchronously (for the work done around each sandboxed
 * command): each level opened O_NOFOLLOW relative to the descriptor of the one above, as
 * `/proc/self/fd/N/name` (see openInside.ts, which does the same asynchronously for the tools).
 * A level that is a symlink, or becomes one meanwhile, is refused (ELOOP) rather than followed.
 */

const DIR_FLAGS = constants.O_RDONLY | (constants.O_DIRECTORY ?? 0) | (constants.O_NOFOLLOW ?? 0);

/** Whether the kernel offers /proc/self/fd (Linux): without it nothing here can be done safely. */
export const BY_DESCRIPTOR = process.platform === 'linux' && existsSync('/proc/self/fd');

/** `name` in the directory held open as `fd`, as a path the kernel resolves from the descriptor. */
export function inDir(fd: number, name: string): string {
  return `/proc/self/fd/${fd}/${name}`;
}

/** Opens the directory `p` (a path, or `inDir(fd, name)`), refusing a symlink; throws as openSync does. */
export function openDirNoFollow(p: string): number {
  return openSync(p, DIR_FLAGS);
}
