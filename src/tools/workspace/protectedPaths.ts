import { spawnSync } from 'node:child_process';
import { lstatSync, readdirSync, realpathSync, statSync, type Stats } from 'node:fs';
import path from 'node:path';
import { exarchStateDir } from '../../engine/stateDir.js';
import { makeDirsBelow } from './makeDirsBelow.js';
import { postgresCredentialFiles } from './postgresCredentials.js';
import { isInside, quote, realAsFarAsItExists, WorkspaceError } from './paths.js';
import type { SandboxShield } from './shellSandbox.js';
import { SYSTEM_PATH, systemBinary } from './systemBinary.js';

/**
 * What agents may not change in their working directory, however they try: what a later run or a
 * resume reads (exarch's own state: the run store and its WAL, logs, traces, recordings), and what
 * git runs for the person outside any sandbox (a repository's hooks and config). Read-only inside
 * the shell's sandbox (`shield`), refused by `write_file` (`refusal`). And directories a sandboxed
 * command may not even read (exarch's state directory, which holds the key that signs run records).
 *
 * Both are worked out again for each call, from the file system as it is then: a store's WAL, a
 * log directory or `.git` may appear during a run.
 */
export interface ProtectionOptions {
  /** Paths of exarch's own state (absolute, or relative to the root); `<root>/.exarch` is always one. */
  readonly state?: readonly string[];
  /** Directories sandboxed commands cannot see; exarch's state directory is always one. */
  readonly hidden?: readonly string[];
  /** Let agents change git's hooks and config (default false). */
  readonly allowGitHooks?: boolean;
}

/** Where exarch's files are under a working directory (the default store, logs, views). */
const EXARCH_DIR = '.exarch';

export class ProtectedPaths {
  private readonly root: string;
  private readonly state: readonly string[];
  private readonly hidden: readonly string[];
  private readonly allowGitHooks: boolean;

  constructor(root: string, options: ProtectionOptions = {}) {
    this.root = path.resolve(root);
    this.state = [path.join(this.root, EXARCH_DIR), ...(options.state ?? []).map((p) => path.resolve(this.root, p))];
    this.hidden = [exarchStateDir(), ...(options.hidden ?? [])].map((p) => path.resolve(p));
    this.allowGitHooks = options.allowGitHooks === true;
  }

  /**
   * What the sandbox of a command starting now keeps from it, `cwd` being the working directory's
   * real path: each protected path that exists inside it read-only, the directories between it and
   * such a path pinned (so that none of them can be renamed away and replaced), the hidden
   * directories and files that exist (the files a Postgres client reads credentials from), and
   * git's files that must not appear (`mustStayAbsent`).
   */
  shield(cwd: string): SandboxShield {
    const readOnly = new Set<string>();
    for (const p of this.state) {
      const real = existingReal(p);
      if (real !== undefined) readOnly.add(real);
    }
    const git = this.allowGitHooks ? undefined : gitPaths(cwd, true);
    for (const p of git?.paths ?? []) readOnly.add(p);
    // Only what lies inside the working directory: the rest of the file system is read-only
    // already, and /tmp is the sandbox's own (binding a host path there would show it).
    const inside = [...readOnly].filter((p) => p !== cwd && isInside(cwd, p));
    // A path inside another read-only one is read-only already.
    const kept = inside.filter((p) => !inside.some((other) => other !== p && isInside(other, p))).sort(byDepth);
    const pinned = new Set<string>();
    for (const p of kept) {
      for (let dir = path.dirname(p); dir !== cwd && isInside(cwd, dir); dir = path.dirname(dir)) pinned.add(dir);
    }
    const hidden = [...new Set(this.hidden.map(existingDirectory).filter((p): p is string => p !== undefined))];
    // A file in a hidden directory is hidden with it (and nothing could be bound in its read-only
    // tmpfs); one in /tmp, outside the working directory, is not seen: the sandbox's /tmp is its own.
    const hiddenFiles = postgresCredentialFiles(process.env)
      .map(existingFile)
      .filter((p): p is string => p !== undefined && !hidden.some((dir) => isInside(dir, p)) && (isInside(cwd, p) || !isInside('/tmp', p)));
    return {
      pinned: [...pinned].sort(byDepth),
      readOnly: kept,
      hidden,
      hiddenFiles: [...new Set(hiddenFiles)],
      mustStayAbsent: git?.absent ?? [],
    };
  }

  /**
   * Why `write_file` may not write `real` (a real path inside `rootReal`, as the tool resolved it),
   * as one line naming `shown`; undefined when it may.
   */
  refusal(rootReal: string, real: string, shown: string): WorkspaceError | undefined {
    const lexical = (p: string): string => existingReal(p) ?? (isInside(this.root, p) ? path.join(rootReal, path.relative(this.root, p)) : p);
    if ([...this.state, ...this.hidden].some((p) => isInside(lexical(p), real))) {
      return new WorkspaceError('refused', `refused: ${quote(shown)} is exarch's own state (its run store, logs and recordings), which agents may not change`);
    }
    if (this.allowGitHooks) return undefined;
    // Anything in a `.git` directory, at any depth: a repository write_file would make or change is one whose hooks and config git runs.
    const inGit = path.relative(rootReal, real).split(path.sep).includes('.git');
    if (inGit || gitPaths(rootReal, false).paths.some((p) => isInside(p, real))) {
      return new WorkspaceError(
        'refused',
        `refused: ${quote(shown)} is git's own (its hooks and config run commands outside any sandbox), which agents may not change unless the person allows it (--allow-git-hooks)`,
      );
    }
    return undefined;
  }
}

/**
 * The files in a git directory that decide where git reads its config and hooks from
 * (gitrepository-layout(5)): `config`; `config.worktree` (read with extensions.worktreeConfig);
 * `commondir`, which makes another directory the repository's common one, its config and hooks
 * included. Objects, refs and the index are data, and stay the agents'.
 */
const GIT_REDIRECTS = ['config', 'config.worktree', 'commondir'];

/** The same in a linked worktree's directory (`.git/worktrees/ID`), which git reads when run in that worktree (wherever it is). */
const WORKTREE_REDIRECTS = ['config.worktree', 'commondir'];

/**
 * The paths of the repository at `cwd` whose change would make git run a command for the person
 * (`paths`): its hooks, its config (core.hooksPath, core.fsmonitor, aliases, filters…) and the
 * other files that say where git reads config and hooks from (GIT_REDIRECTS), and the hooks
 * directory its config names (husky's `.husky`, say). Such a file that does not exist cannot be
 * bound read-only, so it must not appear (`absent`: removed after the command if it did, see
 * removeAppeared.ts). A `.git` file (a worktree's or submodule's
 * pointer) is one too: rewritten, it would name another repository. husky 9's hooks path
 * (`.husky/_`) brings the directory above it, whose scripts its stubs run. With `make`, a hooks
 * directory that is missing is made now, empty, so that it is the sandbox's to protect rather than
 * the agent's to create: inside the working directory only, never through a symlink
 * (makeDirsBelow.ts); one missing behind a symlink is not made, and so not protected.
 *
 * Not covered: a repository that did not exist when the command started (an agent's `git init` is
 * the agent's), submodules' own directories, and config files the config includes.
 */
function gitPaths(cwd: string, make: boolean): { paths: string[]; absent: string[] } {
  const dotGit = path.join(cwd, '.git');
  const stats = lstatOrUndefined(dotGit);
  if (stats === undefined) return { paths: [], absent: [] };
  if (stats.isFile()) return { paths: [dotGit], absent: [] };
  // A symlink in the working directory cannot be pinned; what it points to is the agent's to change.
  if (!stats.isDirectory()) return { paths: [], absent: [] };
  const paths: string[] = [];
  const absent: string[] = [];
  const redirects = [
    ...GIT_REDIRECTS.map((name) => path.join(dotGit, name)),
    ...linkedWorktrees(dotGit).flatMap((dir) => WORKTREE_REDIRECTS.map((name) => path.join(dir, name))),
  ];
  for (const p of redirects) (lstatOrUndefined(p) === undefined ? absent : paths).push(p);
  const hooksPath = configuredHooks(path.join(dotGit, 'config'), cwd);
  for (const hooks of [path.join(dotGit, 'hooks'), ...(hooksPath === undefined ? [] : [hooksPath])]) {
    // Not made through a symlink, nor when a file is in the way or exarch may not: git finds no hooks there either.
    if (make && lstatOrUndefined(hooks) === undefined) makeDirsBelow(cwd, hooks);
    // The sandbox can only bind what exists; write_file compares with what would be there (the
    // first command makes it), as far as it exists resolved.
    const real = make ? existingReal(hooks) : realAsFarAsItExists(hooks);
    if (real !== undefined) paths.push(real);
    // husky 9: core.hooksPath is `.husky/_`, whose stubs run `.husky/<hook>`, the scripts beside it.
    if (hooks === hooksPath && isHuskyStubs(hooks)) {
      const parent = make ? existingReal(path.dirname(hooks)) : realAsFarAsItExists(path.dirname(hooks));
      if (parent !== undefined && parent !== cwd) paths.push(parent);
    }
  }
  return { paths, absent };
}

/** The directories of the repository's linked worktrees (`.git/worktrees/ID`), symlinks left out. */
function linkedWorktrees(dotGit: string): string[] {
  let names: string[];
  try {
    names = readdirSync(path.join(dotGit, 'worktrees'));
  } catch {
    return [];
  }
  return names.map((name) => path.join(dotGit, 'worktrees', name)).filter((dir) => lstatOrUndefined(dir)?.isDirectory() === true);
}

/**
 * Whether a hooks directory is husky's stubs (husky 9 and later), which run the scripts of the
 * directory above it: named `_`, and either in `.husky` (husky's default) or holding husky's `h`
 * (which every stub sources), as `husky DIR` makes it elsewhere.
 */
function isHuskyStubs(hooks: string): boolean {
  if (path.basename(hooks) !== '_') return false;
  return path.basename(path.dirname(hooks)) === '.husky' || lstatOrUndefined(path.join(hooks, 'h'))?.isFile() === true;
}

/** `core.hooksPath` of a config file (includes followed, as git reads it), cached while the file is unchanged. */
const hooksPathCache = new Map<string, { readonly stamp: string; readonly value: string | undefined }>();

function configuredHooks(config: string, worktree: string): string | undefined {
  const stats = statOrUndefined(config);
  if (stats === undefined || !stats.isFile()) return undefined;
  const stamp = `${stats.ino}:${stats.size}:${stats.mtimeMs}:${stats.ctimeMs}`;
  const cached = hooksPathCache.get(config);
  if (cached?.stamp === stamp) return cached.value;
  // git's own reading of its format; without git, nothing runs the hooks either. --file reads that
  // file alone (no system or global config), and runs nothing it names. The system's git, never
  // one an agent put on PATH (systemBinary.ts).
  const git = systemBinary('git', { workdir: worktree });
  const found =
    git === undefined
      ? undefined
      : spawnSync(git, ['config', '--file', config, '--includes', '--get', 'core.hooksPath'], {
          encoding: 'utf8',
          timeout: 5_000,
          env: { PATH: SYSTEM_PATH, GIT_CONFIG_NOSYSTEM: '1' },
        });
  const raw = found?.status === 0 ? found.stdout.replace(/\n$/, '') : '';
  // git expands `~/`; a relative path is relative to the worktree, where hooks run.
  const home = process.env['HOME'];
  const value = raw === '' ? undefined : raw.startsWith('~/') && home !== undefined ? path.join(home, raw.slice(2)) : path.resolve(worktree, raw);
  hooksPathCache.set(config, { stamp, value });
  return value;
}

function byDepth(a: string, b: string): number {
  return a.length - b.length || (a < b ? -1 : a > b ? 1 : 0);
}

function lstatOrUndefined(p: string): Stats | undefined {
  try {
    return lstatSync(p);
  } catch {
    return undefined;
  }
}

function statOrUndefined(p: string): Stats | undefined {
  try {
    return statSync(p);
  } catch {
    return undefined;
  }
}

function existingReal(p: string): string | undefined {
  try {
    return realpathSync(p);
  } catch {
    return undefined;
  }
}

function existingFile(p: string): string | undefined {
  const real = existingReal(p);
  return real !== undefined && statOrUndefined(real)?.isFile() === true ? real : undefined;
}

function existingDirectory(p: string): string | undefined {
  const real = existingReal(p);
  return real !== undefined && statOrUndefined(real)?.isDirectory() === true ? real : undefined;
}
