import { spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { unixSocketFilter } from './seccompFilter.js';
import { ShellSandboxError } from './shellSandboxError.js';
import { anyLimit, DEFAULT_SHELL_LIMITS, effectiveLimits, hardLimits, prlimitOptions, type ShellLimits } from './shellLimits.js';
import { type ShellUser, userLabel } from './shellUser.js';
import { systemBinary } from './systemBinary.js';

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
 * Started as `user` (when exarch is root), bubblewrap runs without root, in a user namespace of
 * its own; `limits` are set by prlimit, inside, on the shell and what it starts (shellLimits.ts).
 */
export type ShellSandbox =
  | {
      readonly kind: 'bubblewrap';
      readonly bwrap: string;
      readonly network: boolean;
      readonly limits?: SandboxLimits;
      readonly user?: ShellUser;
      /** What to keep from a command starting now in the working directory `cwd` (its real path). */
      readonly shield?: (cwd: string) => SandboxShield;
    }
  | { readonly kind: 'none' };

/** The limits of each command, and how they are set. */
interface SandboxLimits {
  /** What was asked for: what the model is told (the tool's description depends on the options alone, so a recording replays on another machine). */
  readonly asked: ShellLimits;
  /** What each command gets: what was asked for, capped at exarch's own hard limits. */
  readonly limits: ShellLimits;
  /** prlimit's path and options, to run before `/bin/sh` inside the sandbox; none when nothing is limited. */
  readonly command: readonly string[];
}

export { ShellSandboxError } from './shellSandboxError.js';

type Probe = { path: string } | { reason: string; trial?: true };

/**
 * The trial's outcome for each uid bubblewrap is started as (the user namespace it needs may be
 * refused to one and not another) and working directory (whose PATH entries do not count).
 */
const probed = new Map<string, Probe>();

/** What the sandbox is set up with beyond the network. */
export interface SandboxSetup {
  /** Each command's limits (default: DEFAULT_SHELL_LIMITS). */
  readonly limits?: ShellLimits;
  /** The user bubblewrap and the command run as (default: exarch's own). */
  readonly user?: ShellUser;
  /** The working directory: bubblewrap and prlimit are never found inside it, whatever PATH says (default: exarch's own). */
  readonly workdir?: string;
}

/**
 * The bubblewrap sandbox, once bubblewrap is found and shown to work here, as `setup.user` (a
 * container without user namespaces may have the binary and still refuse), and prlimit found for
 * the limits; throws ShellSandboxError saying what to do.
 */
export function bubblewrapSandbox(
  network: boolean,
  env: NodeJS.ProcessEnv = process.env,
  setup: SandboxSetup = {},
): Extract<ShellSandbox, { kind: 'bubblewrap' }> {
  const { user } = setup;
  const workdir = setup.workdir ?? process.cwd();
  const key = `${user?.uid ?? process.getuid?.() ?? 0}:${workdir}`;
  const probe = probed.get(key) ?? probeBubblewrap(env, undefined, user, workdir);
  probed.set(key, probe);
  if ('reason' in probe) {
    throw new ShellSandboxError(
      user !== undefined && probe.trial === true
        ? `run_shell runs commands in a bubblewrap sandbox as ${userLabel(user)}, and ${probe.reason}: started without root, bubblewrap needs ` +
            'unprivileged user namespaces (user.max_user_namespaces); pass --shell-user root to run them as root in the sandbox'
        : `run_shell runs commands in a bubblewrap sandbox, and ${probe.reason}: install it (apt-get install bubblewrap) ` +
            'or pass --allow-shell=unsandboxed to run commands without a sandbox',
    );
  }
  const limits = sandboxLimits(setup.limits ?? DEFAULT_SHELL_LIMITS, env, workdir);
  return { kind: 'bubblewrap', bwrap: probe.path, network, limits, ...(user === undefined ? {} : { user }) };
}

/** The limits a command gets here, and the prlimit command that sets them (found once needed). */
function sandboxLimits(asked: ShellLimits, env: NodeJS.ProcessEnv, workdir: string): SandboxLimits {
  const hard = hardLimits();
  const limits = effectiveLimits(asked, hard);
  if (!anyLimit(limits)) return { asked, limits, command: [] };
  const prlimit = systemBinary('prlimit', { workdir, env });
  if (prlimit === undefined) {
    throw new ShellSandboxError(
      'run_shell limits each sandboxed command with prlimit, and prlimit (util-linux) was not found: install it (apt-get install util-linux), ' +
        'or pass --shell-limits with every limit unlimited',
    );
  }
  return { asked, limits, command: [prlimit, ...prlimitOptions(limits, hard), '--'] };
}

/**
 * Finds bubblewrap (in `candidates`, by default the system's directories, then on PATH outside
 * `workdir`: see systemBinary.ts) and tries it once, as `user` when given. Exported for its tests,
 * which pass stand-ins for bubblewrap as `candidates`.
 */
export function probeBubblewrap(env: NodeJS.ProcessEnv, candidates?: readonly string[], user?: ShellUser, workdir: string = process.cwd()): Probe {
  if (process.platform !== 'linux') return { reason: `bubblewrap is Linux-only (this is ${process.platform})` };
  const path = systemBinary('bwrap', { workdir, env, ...(candidates === undefined ? {} : { candidates }) });
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
      ...(user === undefined ? {} : { uid: user.uid, gid: user.gid }),
    });
    if (trial.status !== 0)
      return {
        reason: `bubblewrap at ${path} cannot start a sandbox here (${(trial.stderr || trial.error?.message || 'no reason given').trim().split('\n')[0]})`,
        trial: true,
      };
  } finally {
    if (fd !== undefined) closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
  return { path };
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
  /** Files /dev/null is bound over, read-only: they read as empty and cannot be changed. */
  readonly hiddenFiles: readonly string[];
  /**
   * Paths inside the working directory that did not exist when the command started and must not
   * exist after it (git's `commondir`, say): nothing can be bound over a missing file, so exarch
   * removes any of them the command made, once it and its PID namespace are gone.
   */
  readonly mustStayAbsent: readonly string[];
}

const NO_SHIELD: SandboxShield = { pinned: [], readOnly: [], hidden: [], hiddenFiles: [], mustStayAbsent: [] };

/** bubblewrap's mounts for `shield`, to come after the working directory's own. */
function shieldArgs(shield: SandboxShield): string[] {
  return [
    ...shield.pinned.flatMap((dir) => ['--bind', dir, dir]),
    ...shield.readOnly.flatMap((p) => ['--ro-bind', p, p]),
    ...shield.hidden.flatMap((dir) => ['--tmpfs', dir, '--remount-ro', dir]),
    ...shield.hiddenFiles.flatMap((file) => ['--ro-bind', '/dev/null', file]),
  ];
}

/** The descriptor bubblewrap reads the seccomp program from (see seccompFilter.ts). */
const SECCOMP_FD = 3;

/** The descriptor bubblewrap writes what it started to (`{"child-pid": N, …}`: the host pid of the sandbox's init). */
const INFO_FD = 4;

/**
 * bubblewrap's arguments for a command working in `cwd` (mounts in order: later ones sit on top).
 * With `seccomp`, bubblewrap loads the program it reads from fd SECCOMP_FD; `shield` adds the
 * protected and hidden paths; with `info`, bubblewrap says on fd INFO_FD what it started.
 */
export function sandboxArgs(cwd: string, network: boolean, seccomp = false, shield: SandboxShield = NO_SHIELD, info = false): string[] {
  return [
    ...(seccomp ? ['--seccomp', String(SECCOMP_FD)] : []),
    ...(info ? ['--info-fd', String(INFO_FD)] : []),
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
