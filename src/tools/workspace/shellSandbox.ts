import { spawnSync } from 'node:child_process';
import { accessSync, closeSync, constants, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ExarchError } from '../../engine/exarchError.js';
import { unixSocketFilter } from './seccompFilter.js';

/**
 * How `run_shell` runs a command: inside bubblewrap (Linux, Debian's `bubblewrap`), or, when the
 * user asked for it by name, without any sandbox.
 *
 * Under bubblewrap the command sees the whole file system read-only, the working directory
 * read-write, a private `/tmp`, a fresh `/proc` in a new PID namespace (exarch's processes, and
 * their `/proc/PID/environ`, are out of reach), no network unless allowed, and no IPC with the
 * host. bubblewrap is the PID namespace's init: when the command exits, the kernel kills every
 * process left in it, `setsid` and double forks included. bubblewrap itself is started with the
 * command's environment (no credentials), since its own `/proc/1/environ` is readable inside.
 * Inside the working directory, what a later run or resume reads (exarch's state) and what git runs
 * (hooks, config) are read-only, and exarch's state directory is hidden (`shield`).
 */
export type ShellSandbox =
  | {
      readonly kind: 'bubblewrap';
      readonly bwrap: string;
      readonly network: boolean;
      /** What to keep from a command starting now in the working directory `cwd` (its real path). */
      readonly shield?: (cwd: string) => SandboxShield;
    }
  | { readonly kind: 'none' };

/** A sandbox was asked for and cannot be had. */
export class ShellSandboxError extends ExarchError<'sandbox-unavailable'> {
  constructor(message: string) {
    super('sandbox-unavailable', message);
  }
}

/** Where bubblewrap is looked for before PATH. */
const BWRAP_CANDIDATES = ['/usr/bin/bwrap', '/usr/local/bin/bwrap'];

let probed: { path: string } | { reason: string } | undefined;

/**
 * The bubblewrap sandbox, once bubblewrap is found and shown to work here (a container without
 * user namespaces may have the binary and still refuse); throws ShellSandboxError saying what to do.
 */
export function bubblewrapSandbox(network: boolean, env: NodeJS.ProcessEnv = process.env): Extract<ShellSandbox, { kind: 'bubblewrap' }> {
  probed ??= probeBubblewrap(env);
  if ('reason' in probed) {
    throw new ShellSandboxError(
      `run_shell runs commands in a bubblewrap sandbox, and ${probed.reason}: install it (apt-get install bubblewrap) ` +
        'or pass --allow-shell=unsandboxed to run commands without a sandbox',
    );
  }
  return { kind: 'bubblewrap', bwrap: probed.path, network };
}

/**
 * Finds bubblewrap (in `candidates`, then on PATH) and tries it once. Exported for its tests,
 * which pass stand-ins for bubblewrap as `candidates`.
 */
export function probeBubblewrap(env: NodeJS.ProcessEnv, candidates: readonly string[] = BWRAP_CANDIDATES): { path: string } | { reason: string } {
  if (process.platform !== 'linux') return { reason: `bubblewrap is Linux-only (this is ${process.platform})` };
  const dirs = (env['PATH'] ?? '').split(delimiter).filter(Boolean);
  const path = [...candidates, ...dirs.map((dir) => join(dir, 'bwrap'))].find(isExecutable);
  if (path === undefined) return { reason: 'bubblewrap (bwrap) was not found' };
  // The trial loads the seccomp program too, so a kernel that refuses it is found here, not mid-run.
  // (spawnSync cannot feed a pipe on fd 3, so the program goes through a file.)
  const filter = unixSocketFilter();
  const dir = mkdtempSync(join(tmpdir(), 'exarch-seccomp-'));
  let fd: number | undefined;
  try {
    if (filter !== undefined) {
      writeFileSync(join(dir, 'filter'), filter);
      fd = openSync(join(dir, 'filter'), 'r');
    }
    const trial = spawnSync(path, [...sandboxArgs('/', false, fd !== undefined), '/bin/true'], {
      stdio: ['ignore', 'pipe', 'pipe', ...(fd === undefined ? [] : [fd])],
      timeout: 10_000,
      encoding: 'utf8',
    });
    if (trial.status !== 0)
      return {
        reason: `bubblewrap at ${path} cannot start a sandbox here (${(trial.stderr || trial.error?.message || 'no reason given').trim().split('\n')[0]})`,
      };
  } finally {
    if (fd !== undefined) closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  return { path };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/**
 * What the sandbox keeps from a command besides the rest of the file system, as real paths that
 * exist now (see protectedPaths.ts): directories inside the working directory bound onto
 * themselves, writable, so that they cannot be renamed or removed (`pinned`, parents first); paths
 * inside it bound read-only (`readOnly`: a mount point cannot be renamed, removed or replaced by a
 * symlink either); directories an empty read-only tmpfs covers (`hidden`).
 */
export interface SandboxShield {
  readonly pinned: readonly string[];
  readonly readOnly: readonly string[];
  readonly hidden: readonly string[];
}

const NO_SHIELD: SandboxShield = { pinned: [], readOnly: [], hidden: [] };

/** bubblewrap's mounts for `shield`, to come after the working directory's own. */
function shieldArgs(shield: SandboxShield): string[] {
  return [
    ...shield.pinned.flatMap((dir) => ['--bind', dir, dir]),
    ...shield.readOnly.flatMap((p) => ['--ro-bind', p, p]),
    ...shield.hidden.flatMap((dir) => ['--tmpfs', dir, '--remount-ro', dir]),
  ];
}

/** The descriptor bubblewrap reads the seccomp program from (see seccompFilter.ts). */
const SECCOMP_FD = 3;

/**
 * bubblewrap's arguments for a command working in `cwd` (mounts in order: later ones sit on top).
 * With `seccomp`, bubblewrap loads the program it reads from fd SECCOMP_FD; `shield` adds the
 * protected and hidden paths.
 */
export function sandboxArgs(cwd: string, network: boolean, seccomp = false, shield: SandboxShield = NO_SHIELD): string[] {
  return [
    ...(seccomp ? ['--seccomp', String(SECCOMP_FD)] : []),
    '--ro-bind',
    '/',
    '/',
    '--dev',
    '/dev',
    '--proc',
    '/proc',
    '--tmpfs',
    '/tmp',
    // After /tmp, so a working directory under /tmp stays visible (and writable).
    '--bind',
    cwd,
    cwd,
    // On top of the working directory: exarch's state and git's hooks read-only, the key's directory hidden.
    ...shieldArgs(shield),
    '--chdir',
    cwd,
    '--unshare-pid',
    '--unshare-ipc',
    '--unshare-uts',
    ...(network ? [] : ['--unshare-net']),
    // Run as root (CI, containers), bubblewrap would keep root's capabilities inside: drop them all.
    '--cap-drop',
    'ALL',
    '--die-with-parent',
    // A new session: the command cannot push input into exarch's terminal (TIOCSTI).
    '--new-session',
  ];
}
