import { spawnSync } from 'node:child_process';
import { statSync } from 'node:fs';
import { ShellSandboxError } from './shellSandboxError.js';
import { systemBinary } from './systemBinary.js';

/**
 * Who runs a sandboxed command when exarch runs as root. Dropping every capability is not enough:
 * root still owns `/etc/shadow` and `/root/.ssh`, and the read-only file system lets an owner read
 * them. A user namespace does not help either, since the one root makes maps its inside uid to
 * root outside. Only another uid does: bubblewrap is started as that user (it then makes its own
 * user namespace, as for anyone without root), and the file system judges the command as that user.
 */
export interface ShellUser {
  readonly uid: number;
  readonly gid: number;
  /** From the user database; none for a uid without an entry. */
  readonly name?: string;
  /** HOME for its commands: its home directory when there is one, else the sandbox's private /tmp. */
  readonly home: string;
}

/** Who runs the commands, as worked out for one working directory. */
export interface ShellIdentity {
  /** Undefined: exarch's own user (exarch is not root, or root was asked for by name). */
  readonly user?: ShellUser;
  /** The commands may write in the working directory. */
  readonly canWrite: boolean;
  /** What the person should know, one line (said on stderr by the CLI); none when exarch is not root. */
  readonly note?: string;
}

/** The uid Debian, Fedora and the kernel's overflow id give `nobody`. */
const NOBODY = 65534;

/** A user name or a uid as `--shell-user` takes it. */
export const SHELL_USER_PATTERN = /^(?:\d{1,10}|[A-Za-z_][A-Za-z0-9_.-]{0,31}\$?)$/;

interface PasswdEntry {
  readonly name: string;
  readonly uid: number;
  readonly gid: number;
  readonly home: string;
}

/**
 * A user from the user database (`getent passwd`, so that LDAP and other NSS sources count), by
 * name or uid; undefined when there is none (or no getent). `workdir`: the working directory,
 * where getent is never taken from (systemBinary.ts).
 */
export function lookUpUser(key: string | number, workdir: string): PasswdEntry | undefined {
  const getent = systemBinary('getent', { workdir });
  if (getent === undefined) return undefined;
  const found = spawnSync(getent, ['passwd', String(key)], { encoding: 'utf8', timeout: 10_000 });
  if (found.status !== 0 || typeof found.stdout !== 'string') return undefined;
  const [name, , uid, gid, , home] = (found.stdout.split('\n')[0] ?? '').split(':');
  if (name === undefined || home === undefined || !/^\d+$/.test(uid ?? '') || !/^\d+$/.test(gid ?? '')) return undefined;
  return { name, uid: Number(uid), gid: Number(gid), home };
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function userFrom(uid: number, fallbackGid: number, entry: PasswdEntry | undefined): ShellUser {
  // A home that is not there (nobody's /nonexistent) would make every tool that keeps a cache fail.
  const home = entry !== undefined && entry.home !== '/' && isDirectory(entry.home) ? entry.home : '/tmp';
  return { uid, gid: entry?.gid ?? fallbackGid, ...(entry === undefined ? {} : { name: entry.name }), home };
}

/** `alice (uid 1000)`, or `uid 1234` for one the user database does not know. */
export function userLabel(user: Pick<ShellUser, 'uid' | 'name'>): string {
  return user.name === undefined ? `uid ${user.uid}` : `${user.name} (uid ${user.uid})`;
}

/**
 * Who runs sandboxed commands in `cwd` (a real path), given `requested` (`--shell-user`: a name,
 * a uid, or root). As root, by default: the working directory's owner when that is not root (root
 * running exarch in /home/alice/project), else `nobody`. Throws ShellSandboxError for a user that
 * does not exist, for another user when exarch is not root, and for a user who cannot even enter
 * the working directory (every command would fail).
 */
export function shellIdentity(cwd: string, requested?: string | number): ShellIdentity {
  const self = process.getuid?.() ?? 0;
  const asked = requested === undefined ? undefined : String(requested);
  if (asked !== undefined && !SHELL_USER_PATTERN.test(asked)) {
    throw new ShellSandboxError(`--shell-user takes a user name or a uid, got '${asked}'`);
  }
  const entry = asked === undefined ? undefined : lookUpUser(asked, cwd);
  if (asked !== undefined && entry === undefined && !/^\d+$/.test(asked)) throw new ShellSandboxError(`--shell-user: there is no user named '${asked}' here`);
  const askedUid = asked === undefined ? undefined : (entry?.uid ?? Number(asked));
  if (self !== 0) {
    if (askedUid !== undefined && askedUid !== self) {
      throw new ShellSandboxError(`--shell-user ${asked}: exarch runs as uid ${self}, and only root can run commands as another user`);
    }
    return { canWrite: true };
  }
  if (askedUid === 0) {
    return {
      canWrite: true,
      note: '--shell-user root: shell commands run as root in the sandbox: they can read every file on this machine (/etc/shadow, /root/.ssh), and no process limit applies',
    };
  }
  const owner = statSync(cwd);
  const user =
    askedUid !== undefined
      ? userFrom(askedUid, askedUid, entry)
      : owner.uid !== 0
        ? userFrom(owner.uid, owner.gid, lookUpUser(owner.uid, cwd))
        : userFrom(NOBODY, NOBODY, lookUpUser(NOBODY, cwd));
  const access = accessOf(user, cwd);
  const label = userLabel(user);
  if (access === 'none') {
    throw new ShellSandboxError(
      `shell commands would run as ${label}, who cannot enter the working directory ${cwd}: pass --shell-user with a user who can (--shell-user root: as root)`,
    );
  }
  const canWrite = access === 'write';
  const choose = '; --shell-user NAME|UID runs them as another user (root too)';
  let note: string;
  if (askedUid !== undefined) note = `shell commands run as ${label}${canWrite ? '' : ', who cannot write in the working directory'}`;
  else if (owner.uid !== 0) note = `shell commands run as ${label}, the owner of the working directory${canWrite ? '' : ', who cannot write in it'}${choose}`;
  else note = `shell commands run as ${label}, not root: the working directory is root's${canWrite ? '' : ', so they cannot write in it'}${choose}`;
  return { user, canWrite, note };
}

/**
 * What `user` may do in `dir`, asked of the kernel (permissions, ACLs) by a shell started as that
 * user: enter it, and write in it.
 */
function accessOf(user: ShellUser, dir: string): 'write' | 'read' | 'none' {
  const probe = spawnSync('/bin/sh', ['-c', 'cd -- "$1" 2>/dev/null || exit 3; [ -w . ] || exit 4; exit 0', 'sh', dir], {
    uid: user.uid,
    gid: user.gid,
    cwd: '/',
    env: { PATH: '/usr/bin:/bin' },
    stdio: 'ignore',
    timeout: 10_000,
  });
  if (probe.status === 0) return 'write';
  if (probe.status === 4) return 'read';
  if (probe.status === 3) return 'none';
  throw new ShellSandboxError(
    `could not check what ${userLabel(user)} may do in ${dir} (${probe.error?.message ?? `exit ${String(probe.status ?? probe.signal)}`})`,
  );
}

/**
 * Whether `user` can reach `dir` (search permission on every directory above it, by owner, group or
 * other bits: the sandbox runs it without supplementary groups). bubblewrap, started as that user,
 * cannot mount over a path it cannot reach, nor can the command read one: such a path needs no
 * hiding from it.
 */
export function canReach(dir: string, user: Pick<ShellUser, 'uid' | 'gid'>): boolean {
  const parts = dir.split('/').filter(Boolean);
  for (let i = 0; i < parts.length; i++) {
    const above = `/${parts.slice(0, i).join('/')}`;
    let stats: ReturnType<typeof statSync>;
    try {
      stats = statSync(above);
    } catch {
      return false;
    }
    const bit = stats.uid === user.uid ? 0o100 : stats.gid === user.gid ? 0o010 : 0o001;
    if ((stats.mode & bit) === 0) return false;
  }
  return true;
}
