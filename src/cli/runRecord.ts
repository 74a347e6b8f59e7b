import { resolve } from 'node:path';
import { DEFAULT_MODEL } from '../providers/defaultModel.js';
import type { RunOptionsRecord } from '../store/runStore.js';
import type { TreeBudget } from '../engine/budget.js';
import { ZERO_USAGE } from '../engine/usage.js';
import type { Tool } from '../tools/defineTool.js';
import { McpSpecError, parseMcpFlag, type McpServerSpec } from '../tools/mcp/serverSpec.js';
import { readAgentsConfig } from './agentsConfig.js';
import { estimateCost } from '../engine/pricing.js';
import { DEFAULT_SHELL_LIMITS, LIMIT_MINIMUMS, type ShellLimits } from '../tools/workspace/shellLimits.js';
import { lookUpUser, SHELL_USER_PATTERN } from '../tools/workspace/shellUser.js';
import { parseShellLimits } from './shellLimitsFlag.js';
import { UsageError } from './usageError.js';
import { MAX_TIMER_SECONDS } from '../engine/maxTimer.js';
import { redactUrl, URL_SECRET_MARK, urlSecrets } from '../engine/urlSecrets.js';

/**
 * What the CLI records of a run: every option its sessions are built with, by `exarch run` here, by
 * `exarch resume`, and by a worker (`buildRunSession`). Flags are validated into it once, when the
 * run starts; it is stored as the run's `options` (JSON), never holding a secret.
 */
export interface CliRunRecord {
  readonly model: string;
  readonly allowWrite: boolean;
  /** `true`: sandboxed (bubblewrap); `'unsandboxed'`: asked for by name. */
  readonly allowShell: boolean | 'unsandboxed';
  readonly allowNetwork: boolean;
  /** Agents may change git's hooks and config (`--allow-git-hooks`); absent: they may not. */
  readonly allowGitHooks?: boolean;
  /** Each sandboxed command's limits, all of them (defaults filled in), so a resume sets the same. */
  readonly shellLimits?: ShellLimits;
  /** `--shell-user` as given (a name, a uid or root): who runs sandboxed commands when exarch is root. */
  readonly shellUser?: string;
  readonly maxSteps?: number;
  readonly maxDepth?: number;
  readonly replyCap?: number;
  readonly wake?: 'all';
  /** Seconds a `retry-after` may ask for. */
  readonly maxRetryWait?: number;
  /** The declared agents' config itself, not its path: a resume rebuilds the same agents even if the file changed. */
  readonly agentsConfig?: unknown;
  /**
   * The `--mcp` values as given: every process that runs the run starts these servers. Stored with
   * an HTTP server's URL secrets masked (`storedRecord`); `${NAME}` in a URL is read from the
   * environment of the process that connects (`mcpSpecs`).
   */
  readonly mcp?: readonly string[];
  /** Tool names whose calls wait for a person, or `all`. */
  readonly approve?: 'all' | readonly string[];
  readonly maxTokens?: number;
  readonly maxCost?: number;
  /** Absolute; default: `.exarch/runs/<start time>/` under the run's directory. */
  readonly logDir?: string;
}

/** The flags `recordFromFlags` reads: what a run is recorded with (`RunFlags` adds how this process follows it). */
export interface RecordedFlags {
  readonly model?: string;
  readonly maxSteps?: string;
  readonly maxDepth?: string;
  readonly replyCap?: string;
  /** `each` (default) or `all`: see `SessionOptions.wake`. */
  readonly wake?: string;
  /** Seconds a `retry-after` may ask for before the request fails instead (default 60). */
  readonly maxRetryWait?: string;
  readonly logDir?: string;
  /** The declared agents' JSON file (default: exarch.config.json in the working directory, if any). */
  readonly agents?: string;
  readonly allowWrite?: boolean;
  /** `true`: in a bubblewrap sandbox; `'unsandboxed'`: without one (said on stderr). */
  readonly allowShell?: boolean | 'unsandboxed';
  /** Let sandboxed shell commands reach the network. */
  readonly allowNetwork?: boolean;
  /** Let agents change git's hooks and config (`.git/hooks`, `.git/config`), which git runs outside any sandbox. */
  readonly allowGitHooks?: boolean;
  /** `--shell-limits processes=N,memory=SIZE,file-size=SIZE,cpu=SECONDS,open-files=N` (see shellLimitsFlag.ts). */
  readonly shellLimits?: string;
  /** `--shell-user NAME|UID|root`: who runs sandboxed commands when exarch runs as root. */
  readonly shellUser?: string;
  /** `--mcp` values: MCP servers (a command line, or an http(s):// URL) whose tools every agent is offered. */
  readonly mcp?: readonly string[];
  /** Tool names whose calls wait for a person's approval, comma-separated, or `all`. */
  readonly approve?: string;
  /** The whole tree's tokens / US$ (see `TreeBudget`). */
  readonly maxTokens?: string;
  readonly maxCost?: string;
}

function positiveInt(flag: string, raw: string | undefined, min = 1): number | undefined {
  if (raw === undefined) return undefined;
  const value = Number(raw);
  if (!/^\d+$/.test(raw.trim()) || !Number.isSafeInteger(value) || value < min) {
    throw new UsageError(`--${flag} must be an integer ≥ ${min}, got '${raw}'`);
  }
  return value;
}

/**
 * A flag in seconds that a timer waits on: refused past what a timer holds (MAX_TIMER_SECONDS,
 * about 24.8 days), not clamped, since a value that large is a mistake, and a wait cut short
 * without a word would not be the one asked for.
 */
export function timerSeconds(flag: string, raw: string | undefined, min: number): number | undefined {
  const value = positiveInt(flag, raw, min);
  if (value !== undefined && value > MAX_TIMER_SECONDS)
    throw new UsageError(`--${flag} must be at most ${MAX_TIMER_SECONDS} seconds (the longest a timer can wait), got '${raw ?? ''}'`);
  return value;
}

/**
 * Validates `exarch run`'s flags into the run's record: a bad value is a `UsageError` (one line,
 * exit 2), a declared-agents file that cannot be used an `AgentsConfigError` (exit 1). What depends
 * on the run's tools (tool names in `--approve` and in the agents' profiles) is checked once the
 * tools are there, MCP servers started (`buildRunSession`, `checkApproveNames`).
 */
export function recordFromFlags(flags: RecordedFlags, env: NodeJS.ProcessEnv, cwd: string): CliRunRecord {
  const maxSteps = positiveInt('max-steps', flags.maxSteps);
  const maxDepth = positiveInt('max-depth', flags.maxDepth, 0);
  const replyCap = positiveInt('reply-cap', flags.replyCap);
  if (flags.wake !== undefined && flags.wake !== 'each' && flags.wake !== 'all') throw new UsageError(`--wake must be each or all, got '${flags.wake}'`);
  // The SDK sleeps as long as a server's retry-after asks, up to this; past a timer's reach it would not wait at all.
  const maxRetryWait = timerSeconds('max-retry-wait', flags.maxRetryWait, 0);
  const mcp = flags.mcp ?? [];
  try {
    mcpSpecs(mcp, env);
  } catch (error) {
    if (error instanceof McpSpecError) throw new UsageError(error.message);
    throw error;
  }
  const model = flags.model ?? env['EXARCH_MODEL'] ?? DEFAULT_MODEL;
  const approve = approveFlag(flags.approve);
  const maxTokens = positiveInt('max-tokens', flags.maxTokens);
  let maxCost: number | undefined;
  if (flags.maxCost !== undefined) {
    maxCost = Number(flags.maxCost);
    if (!/^\d+(\.\d+)?$/.test(flags.maxCost.trim()) || !(maxCost > 0))
      throw new UsageError(`--max-cost must be a positive amount of US$, got '${flags.maxCost}'`);
    if (estimateCost(model, ZERO_USAGE) === undefined) throw new UsageError(`--max-cost: no prices are known for the model '${model}'; use --max-tokens`);
  }
  const shell = shellFlags(flags, cwd);
  const agentsConfig = readAgentsConfig(flags.agents, cwd);
  // A declared agent asking for a model exarch cannot price would spend past --max-cost unseen.
  if (maxCost !== undefined) {
    for (const [name, agentModel] of declaredModels(agentsConfig)) {
      if (estimateCost(agentModel, ZERO_USAGE) === undefined)
        throw new UsageError(`--max-cost: no prices are known for the model '${agentModel}' of the declared agent '${name}'; use --max-tokens`);
    }
  }
  return {
    model,
    allowWrite: flags.allowWrite ?? false,
    allowShell: flags.allowShell ?? false,
    allowNetwork: flags.allowNetwork ?? false,
    ...(flags.allowGitHooks === true ? { allowGitHooks: true } : {}),
    ...shell,
    ...(maxSteps === undefined ? {} : { maxSteps }),
    ...(maxDepth === undefined ? {} : { maxDepth }),
    ...(replyCap === undefined ? {} : { replyCap }),
    ...(flags.wake === 'all' ? { wake: 'all' as const } : {}),
    ...(maxRetryWait === undefined ? {} : { maxRetryWait }),
    ...(agentsConfig === undefined ? {} : { agentsConfig }),
    ...(mcp.length === 0 ? {} : { mcp: [...mcp] }),
    ...(approve === undefined ? {} : { approve }),
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(maxCost === undefined ? {} : { maxCost }),
    // Absolute: a worker's own working directory is not the run's.
    ...(flags.logDir === undefined ? {} : { logDir: resolve(cwd, flags.logDir) }),
  };
}

/** `--shell-limits` and `--shell-user`, which only sandboxed commands have. */
function shellFlags(flags: RecordedFlags, cwd: string): { shellLimits?: ShellLimits; shellUser?: string } {
  const given = flags.shellLimits !== undefined ? 'shell-limits' : flags.shellUser !== undefined ? 'shell-user' : undefined;
  if (given !== undefined && flags.allowShell === 'unsandboxed')
    throw new UsageError(`--${given} is for sandboxed commands; --allow-shell=unsandboxed runs them as you, without limits`);
  if (given !== undefined && flags.allowShell !== true) throw new UsageError(`--${given} needs --allow-shell`);
  if (flags.allowShell !== true) return {};
  const user = flags.shellUser?.trim();
  if (user !== undefined) {
    if (!SHELL_USER_PATTERN.test(user)) throw new UsageError(`--shell-user takes a user name or a uid, got '${flags.shellUser ?? ''}'`);
    if (!/^\d+$/.test(user) && lookUpUser(user, cwd) === undefined) throw new UsageError(`--shell-user: there is no user named '${user}' here`);
  }
  return {
    shellLimits: flags.shellLimits === undefined ? DEFAULT_SHELL_LIMITS : parseShellLimits(flags.shellLimits),
    ...(user === undefined ? {} : { shellUser: user }),
  };
}

/** A recorded `shellLimits`: each limit that is a valid value, the rest at the defaults; undefined when there is none. */
function recordedLimits(value: unknown): ShellLimits | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const stored = value as Readonly<Record<string, unknown>>;
  const limits: Record<string, number | 'unlimited'> = { ...DEFAULT_SHELL_LIMITS };
  for (const key of Object.keys(DEFAULT_SHELL_LIMITS) as (keyof ShellLimits)[]) {
    const limit = stored[key];
    if (limit === 'unlimited' || (typeof limit === 'number' && Number.isSafeInteger(limit) && limit >= LIMIT_MINIMUMS[key])) limits[key] = limit;
  }
  return limits as unknown as ShellLimits;
}

/**
 * A stored run's record as the CLI wrote it. Fields it does not know are ignored, and one of the
 * wrong type counts as not given: the record was validated when it was written, and a record of an
 * older exarch may miss newer fields. (Budgets were once kept as the flags' strings.)
 */
export function readRecord(options: RunOptionsRecord): CliRunRecord {
  const o = options as Readonly<Record<string, unknown>>;
  const int = (key: string): number | undefined => {
    const value = o[key];
    return typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined;
  };
  const amount = (key: string): number | undefined => {
    const value = typeof o[key] === 'string' ? Number(o[key]) : o[key];
    return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : undefined;
  };
  const strings = (key: string): string[] | undefined => {
    const value = o[key];
    return Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : undefined;
  };
  const maxSteps = int('maxSteps');
  const maxDepth = int('maxDepth');
  const replyCap = int('replyCap');
  const maxRetryWait = int('maxRetryWait');
  const mcp = strings('mcp');
  const approve = o['approve'] === 'all' ? ('all' as const) : strings('approve');
  const maxTokens = amount('maxTokens');
  const maxCost = amount('maxCost');
  const shellLimits = recordedLimits(o['shellLimits']);
  const shellUser = typeof o['shellUser'] === 'string' && SHELL_USER_PATTERN.test(o['shellUser']) ? o['shellUser'] : undefined;
  return {
    model: typeof o['model'] === 'string' ? o['model'] : DEFAULT_MODEL,
    allowWrite: o['allowWrite'] === true,
    allowShell: o['allowShell'] === 'unsandboxed' ? 'unsandboxed' : o['allowShell'] === true,
    allowNetwork: o['allowNetwork'] === true,
    ...(o['allowGitHooks'] === true ? { allowGitHooks: true } : {}),
    ...(shellLimits === undefined ? {} : { shellLimits }),
    ...(shellUser === undefined ? {} : { shellUser }),
    ...(maxSteps === undefined ? {} : { maxSteps }),
    ...(maxDepth === undefined ? {} : { maxDepth }),
    ...(replyCap === undefined ? {} : { replyCap }),
    ...(o['wake'] === 'all' ? { wake: 'all' as const } : {}),
    ...(maxRetryWait === undefined ? {} : { maxRetryWait }),
    ...(o['agentsConfig'] === undefined ? {} : { agentsConfig: o['agentsConfig'] }),
    ...(mcp === undefined || mcp.length === 0 ? {} : { mcp }),
    ...(approve === undefined ? {} : { approve }),
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(maxCost === undefined ? {} : { maxCost }),
    ...(typeof o['logDir'] === 'string' ? { logDir: o['logDir'] } : {}),
  };
}

/** The models the declared agents' config names, by agent (the config was checked when it was read). */
function declaredModels(config: unknown): [string, string][] {
  const agents = (config as { agents?: Record<string, { model?: unknown }> } | undefined)?.agents ?? {};
  return Object.entries(agents).flatMap(([name, profile]) => (typeof profile.model === 'string' ? [[name, profile.model] as [string, string]] : []));
}

/** `${NAME}`: a variable of the environment of the process that connects an `--mcp` URL. */
const VARIABLE_REFERENCE = /\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g;

/**
 * The record as the run store keeps it: an `--mcp` URL's secrets (its user part, `?token=`, …)
 * masked, for the store is read by whoever reads the run (`exarch runs`, `view`, the workers'
 * database). A URL whose every secret is a `${NAME}` is kept as written: it holds none.
 */
export function storedRecord(record: CliRunRecord): CliRunRecord {
  if (record.mcp === undefined) return record;
  const stored = (value: string): string => {
    if (!isHttpValue(value)) return value;
    const secrets = urlSecrets(value.trim());
    return secrets.every((secret) => secret.replace(VARIABLE_REFERENCE, '') === '') ? value : redactUrl(value.trim());
  };
  return { ...record, mcp: record.mcp.map(stored) };
}

/** An `--mcp` value that names a streamable HTTP server (see `parseMcpFlag`). */
function isHttpValue(value: string): boolean {
  return /^\s*https?:\/\//i.test(value);
}

/**
 * The `--mcp` values as server specs, `${NAME}` in an HTTP server's URL replaced by the variable's
 * value in `env` (so that a token reaches each process that runs the run without being on a
 * command line or in the store). A value that is not a spec, a variable that is not set, or a URL
 * whose secret was masked when the run was stored, is an `McpSpecError` (one line).
 */
export function mcpSpecs(values: readonly string[], env: NodeJS.ProcessEnv): McpServerSpec[] {
  return values.map((value) => {
    if (!isHttpValue(value)) return parseMcpFlag(value);
    if (urlSecrets(value).includes(URL_SECRET_MARK))
      throw new McpSpecError(
        `--mcp ${value.trim()}: the URL's secret is not kept with a stored run; give it as \${NAME} in the URL, read from the environment of each process that runs the run`,
      );
    const url = value.replace(VARIABLE_REFERENCE, (_, name: string) => {
      const set = env[name];
      if (set === undefined || set === '') throw new McpSpecError(`--mcp ${redactUrl(value.trim())}: \${${name}} is not set in the environment`);
      return set;
    });
    return parseMcpFlag(url);
  });
}

/** `--approve all` or `--approve write_file,run_shell`. */
function approveFlag(raw: string | undefined): 'all' | string[] | undefined {
  if (raw === undefined) return undefined;
  if (raw.trim() === 'all') return 'all';
  const names = raw
    .split(',')
    .map((name) => name.trim())
    .filter((name) => name !== '');
  if (names.length === 0) throw new UsageError('--approve needs tool names (comma-separated) or all');
  return names;
}

/** `--approve` names that are not tools of this run (its MCP servers' included) are one line. */
export function checkApproveNames(approve: CliRunRecord['approve'], tools: readonly Tool[]): void {
  if (approve === undefined || approve === 'all') return;
  const known = new Set(tools.map((tool) => tool.name));
  const unknown = approve.filter((name) => !known.has(name));
  if (unknown.length > 0)
    throw new UsageError(`--approve: no tool named ${unknown.map((n) => `'${n}'`).join(', ')} in this run (its tools: ${[...known].join(', ')})`);
}

/**
 * The tree's budget (`--max-tokens`, `--max-cost`), priced at the model's list prices. A model
 * whose prices are known is priced even without either, so that a parent can give a sub-agent a
 * budget in US$ (`agent {…, budget: { cost }}`).
 */
export function budgetOf(record: CliRunRecord): TreeBudget | undefined {
  const { maxTokens, maxCost, model } = record;
  const priced = estimateCost(model, ZERO_USAGE) !== undefined;
  if (maxTokens === undefined && maxCost === undefined && !priced) return undefined;
  return {
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(maxCost === undefined ? {} : { maxCost }),
    // A declared agent's own model at its own prices (a run with --max-cost refuses one whose prices are unknown).
    ...(priced ? { price: (usage, agentModel) => estimateCost(agentModel ?? model, usage) ?? estimateCost(model, usage) ?? 0 } : {}),
  };
}
