import { accessSync, constants, realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import { isInside } from './paths.js';

/**
 * Where exarch finds the programs it runs itself on the host (git, getent, bubblewrap, prlimit).
 *
 * Not by PATH alone: under `npx` or `npm exec`, PATH starts with `<workspace>/node_modules/.bin`,
 * a directory the agents can write, so a `git` planted there would run on the host, outside any
 * sandbox, as exarch. The system's own directories come first; PATH is looked at after them, and
 * only its entries that are absolute (a relative one is relative to wherever exarch happens to run)
 * and lie outside the working directory, the entry and the program found in it both compared as
 * real paths (a symlink into the workspace counts as the workspace).
 */

/** The system's directories, searched in this order before PATH. */
const SYSTEM_BIN_DIRS: readonly string[] = ['/usr/bin', '/bin', '/usr/local/bin', '/usr/sbin', '/sbin'];

/** A PATH of the system's directories alone: for a program exarch runs that itself needs no other. */
export const SYSTEM_PATH = SYSTEM_BIN_DIRS.join(path.delimiter);

export interface SystemBinaryOptions {
  /** The working directory, whose programs never count: PATH entries inside it are skipped. */
  readonly workdir: string;
  /** Whose PATH is searched after the system's directories (default: exarch's own). */
  readonly env?: NodeJS.ProcessEnv;
  /** Files tried before PATH, in order (default: `name` in each of SYSTEM_BIN_DIRS). */
  readonly candidates?: readonly string[];
}

/**
 * The absolute path of the executable `name` (a bare name), found as this module says; undefined
 * when there is none.
 */
export function systemBinary(name: string, options: SystemBinaryOptions): string | undefined {
  const workdir = realOrUndefined(options.workdir) ?? path.resolve(options.workdir);
  const outside = (p: string): boolean => {
    const real = realOrUndefined(p);
    return real !== undefined && !isInside(workdir, real);
  };
  const candidates = options.candidates ?? SYSTEM_BIN_DIRS.map((dir) => path.join(dir, name));
  // The system's own directories are trusted as they are (a working directory of / or /usr has them inside).
  const found = candidates.find(isExecutableFile);
  if (found !== undefined) return found;
  const dirs = ((options.env ?? process.env)['PATH'] ?? '').split(path.delimiter).filter((dir) => path.isAbsolute(dir) && outside(dir));
  return dirs.map((dir) => path.join(dir, name)).find((file) => isExecutableFile(file) && outside(file));
}

function isExecutableFile(file: string): boolean {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

function realOrUndefined(p: string): string | undefined {
  try {
    return realpathSync(p);
  } catch {
    return undefined;
  }
}
