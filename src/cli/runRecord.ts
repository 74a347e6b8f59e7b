import { resolve } from 'node:path';
import { DEFAULT_MODEL } from '../providers/anthropic.js';
import type { RunOptionsRecord } from '../store/runStore.js';
import type { TreeBudget } from '../engine/budget.js';
import { ZERO_USAGE } from '../engine/usage.js';
import type { Tool } from '../tools/defineTool.js';
import { McpSpecError, parseMcpFlag, type McpServerSpec } from '../tools/mcp/serverSpec.js';
import { readAgentsConfig } from './agentsConfig.js';
import { estimateCost } from '../engine/pricing.js';
import { UsageError } from './usageError.js';
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
  const maxRetryWait = positiveInt('max-retry-wait', flags.maxRetryWait, 0);
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
  const agentsConfig = readAgentsConfig(flags.agents, cwd);
  return {
    model,
    allowWrite: flags.allowWrite ?? false,
    allowShell: flags.allowShell ?? false,
    allowNetwork: flags.allowNetwork ?? false,
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
  return {
    model: typeof o['model'] === 'string' ? o['model'] : DEFAULT_MODEL,
    allowWrite: o['allowWrite'] === true,
    allowShell: o['allowShell'] === 'unsandboxed' ? 'unsandboxed' : o['allowShell'] === true,
    allowNetwork: o['allowNetwork'] === true,
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
    ...(priced ? { price: (usage) => estimateCost(model, usage) ?? 0 } : {}),
  };
}
