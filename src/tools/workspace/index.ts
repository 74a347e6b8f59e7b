import { statSync } from 'node:fs';
import path from 'node:path';
import type { Tool } from '../defineTool.js';
import { listDirTool } from './listDir.js';
import { readFileTool } from './readFile.js';
import { runShellTool, SHELL_DEFAULT_TIMEOUT_MS } from './runShell.js';
import { searchFilesTool } from './searchFiles.js';
import { writeFileTool } from './writeFile.js';

export interface WorkspaceToolsOptions {
  /** The working directory: every path the tools accept is relative to it and confined to it. */
  readonly root: string;
  /** Offer `write_file` (default false). */
  readonly allowWrite?: boolean;
  /** Offer `run_shell` (default false). Shell commands are not confined to the root. */
  readonly allowShell?: boolean;
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
  if (options.allowShell === true) tools.push(runShellTool(root, options.shellTimeoutMs ?? SHELL_DEFAULT_TIMEOUT_MS));
  return tools;
}

export { WorkspaceError } from './paths.js';
