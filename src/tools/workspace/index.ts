import { statSync } from 'node:fs';
import path from 'node:path';
import type { Tool } from '../defineTool.js';
import { listDirTool } from './listDir.js';
import { readFileTool } from './readFile.js';
import { runShellTool, SHELL_DEFAULT_TIMEOUT_MS } from './runShell.js';
import { searchFilesTool } from './searchFiles.js';
import { ProtectedPaths } from './protectedPaths.js';
import { bubblewrapSandbox, type ShellSandbox } from './shellSandbox.js';
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
  if (options.allowShell === true || options.allowShell === 'unsandboxed') {
    const sandbox: ShellSandbox =
      options.allowShell === 'unsandboxed'
        ? { kind: 'none' }
        : { ...bubblewrapSandbox(options.allowNetwork === true), shield: (cwd: string) => protection.shield(cwd) };
    tools.push(runShellTool(root, options.shellTimeoutMs ?? SHELL_DEFAULT_TIMEOUT_MS, sandbox));
  }
  return tools;
}

export { WorkspaceError, type WorkspaceErrorKind } from './paths.js';
export { ShellSandboxError } from './shellSandbox.js';
