/**
 * `exarch/workspace`: the tools for real work in a directory (`workspaceTools`). Its own entry
 * point: the tools' code, zod (their input schemas) and RE2JS (their globs and searches) are
 * loaded by a host that offers them, not by every `import 'exarch'`.
 */
export {
  DEFAULT_SHELL_LIMITS,
  ShellSandboxError,
  type ShellLimit,
  type ShellLimits,
  workspaceTools,
  WorkspaceError,
  type WorkspaceErrorKind,
  type WorkspaceToolsOptions,
} from './tools/workspace/index.js';
