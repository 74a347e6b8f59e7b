import { realpathSync, statSync } from 'node:fs';
import path from 'node:path';
import type { Tool } from '../defineTool.js';
import { listDirTool } from './listDir.js';
import { readFileTool } from './readFile.js';
import { runShellTool, SHELL_DEFAULT_TIMEOUT_MS } from './runShell.js';
import { searchFilesTool } from './searchFiles.js';
import { ProtectedPaths } from './protectedPaths.js';
import { resolveShellLimits, type ShellLimits } from './shellLimits.js';
import { bubblewrapSandbox, type ShellSandbox } from './shellSandbox.js';
import { canReach, shellIdentity } from './shellUser.js';
import { writeFileTool } from './writeFile.js';

export interface WorkspaceToolsOptions {
  /** The working directory: every path the tools accept is relative to it and confined to it. */
  readonly root: string;
  /** Offer `write_file` (default false). */
  readonly allowWrite?: boolean;
  /**
   * Offer `run_shell` (default false). `true` runs each command in a bubblewrap sandbox (Linux;
   * throws ShellSandboxError when bubblewrap cannot be used); `'unsandboxed'` runs commands with
   * the user's full access.
   */
  readonly allowShell?: boolean | 'unsandboxed';
  /** Let sandboxed commands reach the network (default false). */
  readonly allowNetwork?: boolean;
  /** `run_shell`'s time limit per command (default 120,000 ms). */
  readonly shellTimeoutMs?: number;
  /**
   * Paths of the host's own state that agents may not change (absolute, or relative to `root`):
   * read-only inside the shell's sandbox and refused by `write_file`. `<root>/.exarch` is always
   * one; pass a run store kept elsewhere in the working directory (with its `-wal` and `-shm`),
   * log directories, traces.
   */
  readonly protectedPaths?: readonly string[];
  /** Directories sandboxed commands cannot read (an empty tmpfs covers each); exarch's state directory is always one. */
  readonly hiddenPaths?: readonly string[];
  /**
   * Let agents change git's hooks and config (`.git/hooks`, `.git/config`, the `core.hooksPath`
   * directory), which git runs outside any sandbox. Default false: read-only inside the sandbox,
   * and `write_file` refuses anything inside a `.git` directory.
   */
  readonly allowGitHooks?: boolean;
  /**
   * Limits of each sandboxed command (see ShellLimits; those not given keep DEFAULT_SHELL_LIMITS).
   * Not for `allowShell: 'unsandboxed'`.
   */
  readonly shellLimits?: Partial<ShellLimits>;
  /**
   * Who runs sandboxed commands when exarch runs as root: a user name or uid, or `'root'`. By
   * default the working directory's owner, or `nobody` when that is root, so that root's own files
   * (/etc/shadow, /root/.ssh) stay unreadable. Without root, only exarch's own user may be named.
   * Not for `allowShell: 'unsandboxed'`.
   */
  readonly shellUser?: string | number;
  /** Told, once, who runs sandboxed commands when exarch runs as root (the CLI prints it on stderr). */
  readonly onShellNote?: (note: string) => void;
}

/**
 * The tools for real work in a directory: `read_file`, `list_dir` and `search_files` always;
 * `write_file` with `allowWrite`; `run_shell` with `allowShell`. Neither writer may change the
 * protected paths (see `ProtectedPaths`).
 */
export function workspaceTools(options: WorkspaceToolsOptions): Tool[] {
  const root = path.resolve(options.root);
  let isDirectory = false;
  try {
    isDirectory = statSync(root).isDirectory();
  } catch {
    // Reported below.
  }
  if (!isDirectory) throw new Error(`exarch: the working directory ${root} does not exist or is not a directory`);
  const protection = new ProtectedPaths(root, {
    ...(options.protectedPaths === undefined ? {} : { state: options.protectedPaths }),
    ...(options.hiddenPaths === undefined ? {} : { hidden: options.hiddenPaths }),
    allowGitHooks: options.allowGitHooks === true,
  });
  const tools = [readFileTool(root), listDirTool(root), searchFilesTool(root)];
  if (options.allowWrite === true) tools.push(writeFileTool(root, protection));
  if (options.allowShell === 'unsandboxed' && (options.shellLimits !== undefined || options.shellUser !== undefined)) {
    throw new RangeError('exarch: shellLimits and shellUser are for sandboxed commands (allowShell: true); unsandboxed ones run as exarch, without limits');
  }
  if (options.allowShell === 'unsandboxed') tools.push(runShellTool(root, options.shellTimeoutMs ?? SHELL_DEFAULT_TIMEOUT_MS, { kind: 'none' }));
  if (options.allowShell === true) {
    const limits = resolveShellLimits(options.shellLimits);
    // Who runs the commands is judged on the real directory, whose owner a symlink would hide.
    const rootReal = realpathSync(root);
    const identity = shellIdentity(rootReal, options.shellUser);
    const sandbox: ShellSandbox = {
      ...bubblewrapSandbox(options.allowNetwork === true, process.env, {
        limits,
        workdir: rootReal,
        ...(identity.user === undefined ? {} : { user: identity.user }),
      }),
      shield: (cwd: string) => {
        const shield = protection.shield(cwd);
        // Hidden from a user who can reach it; one who cannot (root's home, to nobody) cannot read it either.
        const user = identity.user;
        return user === undefined
          ? shield
          : { ...shield, hidden: shield.hidden.filter((dir) => canReach(dir, user)), hiddenFiles: shield.hiddenFiles.filter((file) => canReach(file, user)) };
      },
    };
    if (identity.note !== undefined) options.onShellNote?.(identity.note);
    tools.push(runShellTool(root, options.shellTimeoutMs ?? SHELL_DEFAULT_TIMEOUT_MS, sandbox, !identity.canWrite));
  }
  return tools;
}

export { WorkspaceError, type WorkspaceErrorKind } from './paths.js';
export { ShellSandboxError } from './shellSandbox.js';
export { DEFAULT_SHELL_LIMITS, type ShellLimit, type ShellLimits } from './shellLimits.js';
