import { randomBytes } from 'node:crypto';
import { closeSync, constants, existsSync, fstatSync, linkSync, mkdirSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import path from 'node:path';
import { ExarchError } from '../engine/exarchError.js';
import { makeDirs } from '../engine/fs/makeDirs.js';
import { describeError } from '../engine/model/errors.js';
import { exarchStateDir } from '../engine/stateDir.js';
import { isInside } from '../tools/workspace/paths.js';

/**
 * The person's key that signs the CLI's run records (see recordSeal.ts): 32 random bytes, as hex,
 * in `run-key` in exarch's state directory (`exarchStateDir`), made on first use. The directory is
 * made 0700 and the file 0600; both are opened without following a symlink, and refused unless
 * this user owns them and no one else can write them (or, the key, read it). Sandboxed commands
 * cannot see the directory at all (a tmpfs covers it).
 */

const KEY_FILE = 'run-key';
const KEY_BYTES = 32;
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;
const DIRECTORY = constants.O_DIRECTORY ?? 0;
/** Linux: later steps go by the directory's descriptor (`/proc/self/fd/N/name`), so a directory swapped for a symlink meanwhile is not followed. */
const BY_DESCRIPTOR = process.platform === 'linux' && existsSync('/proc/self/fd');

/** The key cannot be read or made: one line saying where and why. */
class RunKeyError extends ExarchError<'run-key'> {
  constructor(message: string) {
    super('run-key', message);
  }
}

/** The directory the key is in, for this environment. */
export function runKeyDir(env: NodeJS.ProcessEnv): string {
  return exarchStateDir(env);
}

/** The key file, for messages. */
export function runKeyFile(env: NodeJS.ProcessEnv): string {
  return path.join(runKeyDir(env), KEY_FILE);
}

/**
 * Makes exarch's state directory (0700) if it is missing, so that a sandbox can hide it before a key
 * is ever made in it. Best effort: a directory that cannot be made holds no key to hide.
 */
export function prepareKeyDir(env: NodeJS.ProcessEnv): void {
  try {
    makeKeyDir(runKeyDir(env));
  } catch {
    // Reported by the command that needs the key, if one does.
  }
}

/**
 * Refuses a key directory inside the working directory `cwd` (its tools could read the key there) or
 * around it (the sandbox's mask over the directory would hide the working directory too).
 */
export function checkKeyApart(env: NodeJS.ProcessEnv, cwd: string): void {
  const dir = runKeyDir(env);
  if (isInside(cwd, dir) || isInside(dir, cwd))
    throw new RunKeyError(
      `exarch's state directory ${dir} and the working directory ${cwd} overlap: set EXARCH_STATE_DIR to a directory apart from it, where agents cannot reach its key`,
    );
}

/**
 * The person's key, for a run in `cwd`: read, or with `create` made if there is none. Undefined
 * when there is none and `create` is false. Throws RunKeyError when it cannot be used.
 */
export function runKey(env: NodeJS.ProcessEnv, create: boolean, cwd: string): Buffer | undefined {
  checkKeyApart(env, cwd);
  const dir = runKeyDir(env);
  const file = path.join(dir, KEY_FILE);
  if (create) {
    try {
      makeKeyDir(dir);
    } catch (error) {
      throw new RunKeyError(`cannot make ${dir} for exarch's key: ${reason(error)} (set EXARCH_STATE_DIR to a directory of yours, or run with --no-store)`);
    }
  } else if (!existsSync(dir)) return undefined;
  let dirFd: number;
  try {
    dirFd = openSync(dir, constants.O_RDONLY | DIRECTORY | NOFOLLOW);
  } catch (error) {
    throw new RunKeyError(`cannot open ${dir}, which holds exarch's key: ${reason(error)}`);
  }
  try {
    checkOwned(fstatSync(dirFd), dir, 0o022, 'writable by others');
    const at = (name: string): string => (BY_DESCRIPTOR ? `/proc/self/fd/${dirFd}/${name}` : path.join(dir, name));
    const key = readKey(at(KEY_FILE), file);
    if (key !== undefined || !create) return key;
    makeKey(at, file);
    const made = readKey(at(KEY_FILE), file);
    if (made === undefined) throw new RunKeyError(`exarch's key ${file} vanished as it was made`);
    return made;
  } finally {
    closeSync(dirFd);
  }
}

/** The directory, made 0700 if missing (its parents as any directory is); an existing one is checked by `runKey`. */
function makeKeyDir(dir: string): void {
  makeDirs(path.dirname(dir));
  try {
    // The mode goes through the umask, which can only take bits away from 0700.
    mkdirSync(dir, { mode: 0o700 });
  } catch (error) {
    // There already (or a file or symlink is, which the open in runKey refuses).
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
  }
}

/** The key's bytes, or undefined when there is no key file. */
function readKey(where: string, file: string): Buffer | undefined {
  let fd: number;
  try {
    fd = openSync(where, constants.O_RDONLY | NOFOLLOW);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    if (code === 'ELOOP') throw new RunKeyError(`exarch's key ${file} is a symlink; remove it (runs signed with the old key can then no longer be resumed)`);
    throw new RunKeyError(`cannot read exarch's key ${file}: ${reason(error)}`);
  }
  try {
    const stats = fstatSync(fd);
    if (!stats.isFile()) throw new RunKeyError(`exarch's key ${file} is not a regular file`);
    checkOwned(stats, file, 0o077, 'readable or writable by others');
    const text = Buffer.alloc(KEY_BYTES * 2 + 2);
    const length = readSync(fd, text, 0, text.length, 0);
    const hex = text.subarray(0, length).toString('latin1').trim();
    if (!/^[0-9a-f]{64}$/.test(hex)) throw new RunKeyError(`exarch's key ${file} is not a key exarch made (expected ${KEY_BYTES} bytes as hex)`);
    return Buffer.from(hex, 'hex');
  } finally {
    closeSync(fd);
  }
}

/**
 * A new key, made whole under a temporary name and linked to its own: link(2) fails if another
 * process made one meanwhile (its key is then the key), and nobody ever reads half a key.
 */
function makeKey(at: (name: string) => string, file: string): void {
  const temp = `${KEY_FILE}.${randomBytes(6).toString('hex')}.tmp`;
  let fd: number;
  try {
    fd = openSync(at(temp), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | NOFOLLOW, 0o600);
  } catch (error) {
    throw new RunKeyError(`cannot make exarch's key ${file}: ${reason(error)}`);
  }
  try {
    try {
      writeSync(fd, `${randomBytes(KEY_BYTES).toString('hex')}\n`);
    } finally {
      closeSync(fd);
    }
    linkSync(at(temp), at(KEY_FILE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw new RunKeyError(`cannot make exarch's key ${file}: ${reason(error)}`);
  } finally {
    try {
      unlinkSync(at(temp));
    } catch {
      // Gone already.
    }
  }
}

/** Refuses what another user owns, or what `bits` of its mode let others at. */
function checkOwned(stats: { uid: number; mode: number }, where: string, bits: number, what: string): void {
  const uid = process.getuid?.();
  if (uid !== undefined && stats.uid !== uid)
    throw new RunKeyError(`${where} belongs to another user (uid ${stats.uid}); exarch keeps its key only where you alone can change it`);
  if ((stats.mode & bits) !== 0)
    throw new RunKeyError(`${where} is ${what} (mode ${(stats.mode & 0o777).toString(8)}); chmod ${bits === 0o077 ? '600' : '700'} it`);
}

function reason(error: unknown): string {
  const code = (error as NodeJS.ErrnoException).code;
  if (code === 'ENOTDIR' || code === 'EEXIST') return 'a part of the path is a file';
  if (code === 'ELOOP') return 'it is a symlink';
  if (code === 'EACCES' || code === 'EPERM') return 'permission denied';
  return describeError(error);
}
