import { statSync } from 'node:fs';
import path from 'node:path';
import type { Tool } from '../defineTool.js';
import { listDirTool } from './listDir.js';
import { readFileTool } from './readFile.js';
import { runShellTool, SHELL_DEFAULT_TIMEOUT_MS } from './runShell.js';
import { searchFilesTool } from './searchFiles.js';
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
}

/**
 * The tools for real work in a directory: `read_file`, `list_dir` and `search_files` always;
 * `write_file` with `allowWrite`; `run_shell` with `allowShell`.
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
  const tools = [readFileTool(root), listDirTool(root), searchFilesTool(root)];
  if (options.allowWrite === true) tools.push(writeFileTool(root));
  if (options.allowShell === true || options.allowShell === 'unsandboxed') {
    const sandbox: ShellSandbox = options.allowShell === 'unsandboxed' ? { kind: 'none' } : bubblewrapSandbox(options.allowNetwork === true);
    tools.push(runShellTool(root, options.shellTimeoutMs ?? SHELL_DEFAULT_TIMEOUT_MS, sandbox));
  }
  return tools;
}

export { WorkspaceError, type WorkspaceErrorKind } from './paths.js';
export { ShellSandboxError } from './shellSandbox.js';
