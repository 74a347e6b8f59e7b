import { accessSync, constants, existsSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULTS } from '../session/options.js';
import { ExarchError } from '../engine/exarchError.js';
import type { FileError } from '../engine/fs/fileError.js';
import { makeDirs } from '../engine/fs/makeDirs.js';
import { JsonlLogSink } from '../engine/log/sessionLog.js';
import { describeError } from '../engine/model/errors.js';
import { AnthropicProvider } from '../providers/anthropic.js';
import { Redactor } from '../engine/redact.js';
import { ReplayProvider } from '../providers/replayProvider.js';
import type { DurableSessionInput } from '../run/durableRun.js';
import type { AgentProfiles } from '../session/agentProfiles.js';
import type { Tool } from '../tools/defineTool.js';
import { workspaceTools } from '../tools/workspace/index.js';
import type { Provider } from '../engine/types.js';
import { agentsFromJson } from './agentsConfig.js';
import { budgetOf, mcpSpecs, type CliRunRecord } from './runRecord.js';
import { MAX_TIMER_MS } from '../engine/maxTimer.js';
import { checkKeyApart, prepareKeyDir, runKeyDir, runKeyFile } from './runKey.js';

/** A run that cannot start as asked (no API key, a log directory, a trace file): one line, exit 1. */
export class RunSetupError extends ExarchError<'run-setup'> {
  constructor(message: string) {
    super('run-setup', message);
  }
}

/** Where the sessions of a run are built: this process's environment, and what it says on stderr. */
export interface SessionHost {
  readonly env: NodeJS.ProcessEnv;
  readonly stderr: NodeJS.WritableStream;
  /** For tests: a provider instead of Claude. */
  readonly provider?: Provider;
  /** `--record FILE` / `--replay FILE` of this process (never part of the run's record). */
  readonly recording?: Recording;
  /** How messages name the declared agents' config (default: as recorded with the run). */
  readonly agentsSource?: string;
  /**
   * Files of this process's own that agents may not change, besides `.exarch/` and the run's log
   * directory: a run store elsewhere (with its `-wal` and `-shm`), `--trace`, `--record`.
   */
  readonly protectedPaths?: readonly string[];
  /**
   * A session log or the `--record` file could not be written (a full disk, a file-size limit, a
   * read-only directory, a FIFO where a log goes): one line naming the file and the cause, at the
   * first fault of each file. Default: a process warning (the run goes on; the file holds whole lines).
   */
  readonly onFileFault?: (fault: FileError) => void;
}

/** `--record FILE`, or `--replay FILE` and what to abort when the run differs from it. */
interface Recording {
  readonly record?: string;
  readonly replay?: string;
  readonly diverged?: AbortController;
}

/** A run as its sessions are built from it: where it works, when it started, and its record. */
export interface RecordedRun {
  /** Set once the run is stored (names it in messages). */
  readonly id?: string;
  /** Absolute working directory. */
  readonly cwd: string;
  /** Milliseconds since the epoch: names the default log directory. */
  readonly startedAt: number;
  readonly record: CliRunRecord;
}

/** A run's sessions, built: what `startRun`/`resumeRun` take, and what to close after the run. */
export interface RunSession {
  /** Everything but `onApprovalRequest`, which only a host with a person to ask adds. */
  readonly session: DurableSessionInput;
  readonly model: string;
  readonly logDir: string;
  readonly maxSteps: number | undefined;
  /** The agents' tools, the MCP servers' included. */
  readonly tools: readonly Tool[];
  /** Closes the run's MCP servers. Safe to call more than once. */
  close(): Promise<void>;
}

/** A run's tools, MCP servers started, and its declared agents checked against them. */
export interface RunTools {
  readonly tools: readonly Tool[];
  readonly agents: AgentProfiles | undefined;
  close(): Promise<void>;
}

/**
 * The one place a run's sessions are built, from its record: by `exarch run` (the record just
 * made from the flags), by `exarch resume` and by a worker (the record stored with the run). The
 * provider (Claude with the key of this environment, a recording, or a test's), the workspace
 * tools, the MCP servers named in the record (started here: `close` ends them), the declared
 * agents (their tools checked once the servers' tools are known), approvals policy, budget, caps
 * and logs.
 *
 * Throws one line for anything that stops the run before it starts: `RunSetupError` (no key, a
 * log directory that cannot be one), `AgentsConfigError`, `ShellSandboxError`, `McpServerError`.
 */
export async function buildRunSession(run: RecordedRun, host: SessionHost): Promise<RunSession> {
  const { record } = run;
  const claude = connectModel(record.model, host, record.maxRetryWait, host.recording, host.onFileFault);
  const logDir = record.logDir ?? defaultLogDir(run.cwd, run.startedAt);
  const tools = await runToolsOf(run, host);
  try {
    prepareDir('log directory', logDir);
  } catch (error) {
    await tools.close();
    throw error;
  }
  const budget = budgetOf(record);
  const session: DurableSessionInput = {
    provider: claude.provider,
    // A replayed fault is retried at once: the waits were the network's, and a replay has none.
    ...(host.recording?.replay === undefined ? {} : { retry: { baseDelayMs: 0, maxDelayMs: 0 } }),
    tools: tools.tools,
    ...(tools.agents ? { agents: tools.agents } : {}),
    ...(record.approve === undefined ? {} : { approve: record.approve }),
    ...(budget === undefined ? {} : { budget }),
    logs: new JsonlLogSink(logDir, host.onFileFault ? { onFault: host.onFileFault } : {}),
    ...(record.maxSteps === undefined ? {} : { maxSteps: record.maxSteps }),
    ...(record.maxDepth === undefined ? {} : { maxDepth: record.maxDepth }),
    ...(record.replyCap === undefined ? {} : { replyCap: record.replyCap }),
    ...(record.wake === undefined ? {} : { wake: record.wake }),
    ...(claude.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: claude.stallTimeoutMs }),
  };
  return { session, model: record.model, logDir, maxSteps: record.maxSteps, tools: tools.tools, close: tools.close };
}

/**
 * The tools a run's agents are offered (the workspace's, as its record allows, and its MCP
 * servers', started here and said on stderr) and its declared agents, whose profiles may name
 * any of them. `exarch run --db` calls this alone, to check the flags and record the tool names
 * before queueing the run.
 */
export async function runToolsOf(
  run: Omit<RecordedRun, 'startedAt'>,
  host: Pick<SessionHost, 'env' | 'stderr' | 'agentsSource' | 'protectedPaths'>,
): Promise<RunTools> {
  const { record } = run;
  // A key inside the working directory could be read by the agents' read tools, and with it a record
  // they planted in another workspace's store would pass as signed. A run that makes no key (a
  // --no-store run where none exists yet) may work there; one that makes it is refused by runKey.
  if (existsSync(runKeyFile(host.env))) checkKeyApart(host.env, run.cwd);
  if (record.allowShell === true) {
    // Made before any sandbox starts, so that each sandbox can protect them: an agent that could
    // create .exarch/ could plant a store in it, and the key's directory is hidden only if it exists.
    tryMakeDirs(join(run.cwd, '.exarch'));
    prepareKeyDir(host.env);
  }
  // Without bubblewrap, --allow-shell is one line here (ShellSandboxError), before any server starts.
  // As root, who runs the commands (not root, unless asked for) is said once, here: run, resume and worker alike.
  const workspace = workspaceTools({
    root: run.cwd,
    allowWrite: record.allowWrite,
    allowShell: record.allowShell,
    allowNetwork: record.allowNetwork,
    allowGitHooks: record.allowGitHooks === true,
    protectedPaths: [...(host.protectedPaths ?? []), ...(record.logDir === undefined ? [] : [record.logDir])],
    hiddenPaths: [runKeyDir(host.env)],
    ...(record.allowShell === true && record.shellLimits !== undefined ? { shellLimits: record.shellLimits } : {}),
    ...(record.allowShell === true && record.shellUser !== undefined ? { shellUser: record.shellUser } : {}),
    onShellNote: (note) => host.stderr.write(`exarch: ${note}\n`),
  });
  // A command runs in the run's directory, wherever this process was started (a worker's is not the run's).
  const servers = mcpSpecs(record.mcp ?? [], host.env).map((spec) => ('command' in spec && spec.cwd === undefined ? { ...spec, cwd: run.cwd } : spec));
  const mcp = await connectMcp(servers, workspace, host.stderr);
  try {
    // Checked now that the servers' tools are known: a profile may name `mcp__server__tool`.
    const source = host.agentsSource ?? `the agents recorded with run ${run.id ?? '(new)'}`;
    const declared =
      record.agentsConfig === undefined ? undefined : agentsFromJson(record.agentsConfig, source, mcp.tools, record.maxSteps ?? DEFAULTS.maxSteps);
    return { tools: mcp.tools, agents: declared?.agents, close: mcp.close };
  } catch (error) {
    await mcp.close();
    throw error;
  }
}

/**
 * Whether this environment can reach the model: the key (unless a test's provider stands in) and
 * a usable `EXARCH_STALL_TIMEOUT_MS`. Throws `RunSetupError` otherwise.
 */
export function checkModelAccess(host: Pick<SessionHost, 'env' | 'provider'>): { stallTimeoutMs: number | undefined } {
  if (!host.provider && !host.env['ANTHROPIC_API_KEY']) {
    throw new RunSetupError('ANTHROPIC_API_KEY is not set: set it to run against Claude, or try `exarch demo` (offline, no key needed)');
  }
  const stallRaw = host.env['EXARCH_STALL_TIMEOUT_MS'];
  const stallTimeoutMs = stallRaw === undefined || stallRaw === '' ? undefined : Number(stallRaw);
  if (stallTimeoutMs !== undefined && (!Number.isSafeInteger(stallTimeoutMs) || stallTimeoutMs < 1 || stallTimeoutMs > MAX_TIMER_MS)) {
    throw new RunSetupError(
      `EXARCH_STALL_TIMEOUT_MS must be a positive integer (milliseconds) of at most ${MAX_TIMER_MS} (the longest a timer can wait), got '${stallRaw ?? ''}'`,
    );
  }
  return { stallTimeoutMs };
}

/**
 * Claude through the SDK (recording its exchanges with `--record`), a recording (`--replay`), or
 * the test's provider.
 */
function connectModel(
  model: string,
  host: Pick<SessionHost, 'env' | 'provider'>,
  maxRetryWaitS: number | undefined,
  recording: Recording = {},
  onFault?: (fault: FileError) => void,
): { provider: Provider; stallTimeoutMs: number | undefined } {
  if (recording.replay !== undefined) {
    // A recording that cannot be read is one line (RecordingError, exit 1); no key, no network.
    const { diverged } = recording;
    const provider = new ReplayProvider(recording.replay, {
      model,
      redactor: Redactor.fromEnv(host.env),
      ...(diverged ? { onMismatch: (mismatch) => diverged.abort(mismatch) } : {}),
    });
    return { provider, stallTimeoutMs: undefined };
  }
  const { stallTimeoutMs } = checkModelAccess(host);
  const apiKey = host.env['ANTHROPIC_API_KEY'];
  const provider =
    host.provider ??
    new AnthropicProvider({
      apiKey,
      model,
      ...(host.env['ANTHROPIC_BASE_URL'] ? { baseURL: host.env['ANTHROPIC_BASE_URL'] } : {}),
      ...(maxRetryWaitS === undefined ? {} : { maxRetryWaitMs: maxRetryWaitS * 1000 }),
      // Never the key nor a secret of the environment in the file (RecordingError if it cannot be written).
      ...(recording.record === undefined
        ? {}
        : {
            record: {
              file: recording.record,
              redactor: Redactor.fromEnv(host.env, apiKey === undefined ? [] : [apiKey]),
              ...(onFault ? { onFault } : {}),
            },
          }),
    });
  return { provider, stallTimeoutMs };
}

/**
 * Connects the run's MCP servers and says on stderr what each offers: the host's tools plus
 * theirs, and how to close them. Without servers, nothing is loaded.
 */
async function connectMcp(
  servers: ReturnType<typeof mcpSpecs>,
  tools: readonly Tool[],
  stderr: NodeJS.WritableStream,
): Promise<{ tools: readonly Tool[]; close: () => Promise<void> }> {
  if (servers.length === 0) return { tools, close: async () => undefined };
  const { connectMcpServers } = await import('../tools/mcp/toolset.js');
  const toolset = await connectMcpServers(servers, { takenNames: tools.map((tool) => tool.name) });
  for (const server of toolset.servers) {
    stderr.write(`exarch: MCP server '${server.name}': ${server.tools.length} tool${server.tools.length === 1 ? '' : 's'} (${server.tools.join(', ')})\n`);
  }
  for (const warning of toolset.warnings) stderr.write(`exarch: ${warning}\n`);
  return { tools: [...tools, ...toolset.tools], close: () => toolset.close() };
}

/**
 * Makes a directory the run writes to, before any agent starts: a path that cannot be one
 * (`/etc/passwd/x`) is one line now, rather than a crash inside the first session.
 */
function prepareDir(what: string, dir: string): void {
  try {
    makeDirs(dir);
    accessSync(dir, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why =
      code === 'ENOTDIR' || code === 'EEXIST'
        ? 'a part of the path is a file'
        : code === 'EACCES' || code === 'EPERM'
          ? 'permission denied'
          : describeError(error);
    throw new RunSetupError(`cannot use ${dir} as the ${what}: ${why}`);
  }
}

/** `mkdir -p`, if it can: a directory that cannot be made here cannot be made by an agent either. */
function tryMakeDirs(dir: string): void {
  try {
    makeDirs(dir);
  } catch {
    // As said.
  }
}

/** Where a run's logs go without `--log-dir`: `.exarch/runs/<start time>/` under its directory. */
export function defaultLogDir(cwd: string, startedAt: number): string {
  return join(cwd, '.exarch', 'runs', timestamp(new Date(startedAt)));
}

function timestamp(date: Date): string {
  return date.toISOString().replace(/[:.]/g, '-');
}
