import type { Stats } from 'node:fs';

/**
 * What a file that is not a regular one is, for a refusal ("it is a FIFO"): shared by the
 * workspace tools and by every file exarch opens by name (see regularFile.ts).
 */
export function fileKind(stats: Stats): string {
  if (stats.isDirectory()) return 'a directory';
  if (stats.isFIFO()) return 'a FIFO';
  if (stats.isSocket()) return 'a socket';
  if (stats.isCharacterDevice()) return 'a character device';
  if (stats.isBlockDevice()) return 'a block device';
  if (stats.isSymbolicLink()) return 'a symlink';
  return 'an unknown kind of file';
}
