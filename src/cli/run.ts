import { accessSync, constants } from 'node:fs';
import { ExarchError } from '../exarchError.js';
import { makeDirs } from '../fs/makeDirs.js';
import { join } from 'node:path';
import { AnthropicProvider, DEFAULT_MODEL } from '../providers/anthropic.js';
import { JsonlLogSink } from '../log/sessionLog.js';
import { DEFAULTS } from '../options.js';
import { describeError } from '../model/errors.js';
import { createSessionActor, runResultOf, waitForSettled, type RunResult, type SessionActor } from '../runtime.js';
import { newRunId, resumeRun, RunError, startRun, type DurableSessionInput, type FinishedRun } from '../store/durableRun.js';
import type { RunRow, RunStore } from '../store/runStore.js';
import { finalAssistantText } from '../history.js';
import { restoreRun } from '../store/restoreRun.js';
import type { Submission } from '../workers/runQueue.js';
import { checkTarget, openExistingStore, openStore, storeName, StoreTargetError } from './storeTarget.js';
import { workspaceTools } from '../tools/workspace/index.js';
import { agentsFromJson, loadAgentsConfig } from './agentsConfig.js';
import type { Tool } from '../tools/defineTool.js';
import { McpSpecError, parseMcpFlag, type McpServerSpec } from '../tools/mcp/serverSpec.js';
import type { Provider } from '../types.js';
import { RunObserver } from '../observe/runObserver.js';
import type { InspectionEvent } from 'xstate';
import { TraceRecorder } from '../trace/recorder.js';
import { OtelRunExporter } from '../otel/otelExporter.js';
import type { OtlpExport } from './otlpExport.js';
import { ReplayProvider } from '../replay/replayProvider.js';
import { Redactor } from '../redact.js';
import { blockedOnApprovals, respond, type ApprovalPolicy, type ApprovalRequest } from '../approvals.js';
import { ApprovalPrompt } from './approvalPrompt.js';
import { steeringCommand } from './steeringCommands.js';
import { TerminalInput } from './terminalInput.js';
import { clip } from '../render.js';
import type { TreeBudget } from '../budget.js';
import { ZERO_USAGE } from '../usage.js';
import { estimateCost } from '../pricing.js';
import { agentSpendLines } from './agentSpend.js';
import { formatCount, ProgressBoard } from './progress.js';
import { CliUi } from './liveUi.js';

export const EXIT = { ok: 0, fatal: 1, usage: 2, capped: 3, waiting: 4, interrupted: 130 } as const;

/** A mistake in how exarch was called: one line, then the usage, exit 2. */
export class UsageError extends ExarchError<'usage'> {
  constructor(message: string) {
    super('usage', message);
  }
}

export interface RunFlags {
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
  readonly trace?: string;
  /** The run store file (default .exarch/exarch.db under the working directory). */
  readonly store?: string;
  /** A PostgreSQL run store (`postgres://…`) instead of the file. */
  readonly db?: string;
  /** Run without recording (no resume). */
  readonly noStore?: boolean;
  /** With `db`: print the run id and return once the run is queued, rather than follow it. */
  readonly detach?: boolean;
  /** Tool names whose calls wait for a person's approval, comma-separated, or `all`. */
  readonly approve?: string;
  /** Never ask at the terminal: stop as `waiting` (exit 4) once only approvals are left. */
  readonly noWait?: boolean;
  /** Read steering commands (`/cancel PATH`, `/msg PATH TEXT`, `/help`) from stdin, one a line, even when it is no terminal. */
  readonly steer?: boolean;
  /** The whole tree's tokens / US$ (see `TreeBudget`). */
  readonly maxTokens?: string;
  readonly maxCost?: string;
  /** Send the run's spans to the OTLP/HTTP collector at `OTEL_EXPORTER_OTLP_ENDPOINT` (see otlpExport.ts). */
  readonly otel?: boolean;
  /** Keep every model exchange in this file (src/replay/). */
  readonly record?: string;
  /** Answer from this recording instead of Claude: offline, no key. */
  readonly replay?: string;
  /** Serve the turn-flow viewer live while the run goes (see liveUi.ts), on `uiPort` if given. */
  readonly ui?: boolean;
  readonly uiPort?: string;
}

export interface RunIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream & { isTTY?: boolean };
  readonly env: NodeJS.ProcessEnv;
  readonly cwd: string;
  /** Aborted on SIGINT: the tree is cancelled, pending calls answered, logs flushed. */
  readonly interrupt: AbortSignal;
  /** Where approvals are asked inline (a terminal); without one, a run with waiting calls stops as `waiting`. */
  readonly stdin?: NodeJS.ReadableStream & { isTTY?: boolean };
  /** For tests: a provider instead of Claude. */
  readonly provider?: Provider;
  /** Another inspection observer (the live inspector). */
  readonly inspect?: (event: InspectionEvent) => void;
}

/** `--ui-port N`: a port number, given with `--ui`. */
export function uiPort(ui: boolean, raw: string | undefined): number | undefined {
  if (raw === undefined) return undefined;
  if (!ui) throw new UsageError('--ui-port needs --ui');
  const port = Number(raw);
  if (!/^\d+$/.test(raw) || port < 1 || port > 65535) throw new UsageError(`--ui-port must be a port number, got '${raw}'`);
  return port;
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
 * Makes a directory the run writes to, before any agent starts: a path that cannot be one
 * (`/etc/passwd/x`) is one line now, rather than a crash inside the first session.
 */
function prepareDir(what: string, dir: string): void {
  try {
    makeDirs(dir);
    accessSync(dir, constants.W_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const why = code === 'ENOTDIR' || code === 'EEXIST' ? 'a part of the path is a file' : code === 'EACCES' || code === 'EPERM' ? 'permission denied' : describeError(error);
    throw new RunSetupError(`cannot use ${dir} as the ${what}: ${why}`);
  }
}

/** A run that cannot start as asked (a log directory, a trace file): one line, exit 1. */
export class RunSetupError extends ExarchError<'run-setup'> {
  constructor(message: string) {
    super('run-setup', message);
  }
}

function timestamp(date: Date): string {
  return date.toISOString().replace(/[:.]/g, '-');
}

/**
 * `exarch run "<task>"` (CONTRACT §7): the root works on the task with Claude until it settles.
 * stdout gets the root's final answer only; stderr gets progress, the summary and errors. The run
 * is recorded in the run store (unless `--no-store`) and its id printed first, so that
 * `exarch resume` can take it up again after a crash or Ctrl-C.
 */
export async function runCommand(task: string, flags: RunFlags, io: RunIo): Promise<number> {
  const maxSteps = positiveInt('max-steps', flags.maxSteps);
  const maxDepth = positiveInt('max-depth', flags.maxDepth, 0);
  const replyCap = positiveInt('reply-cap', flags.replyCap);
  if (task.trim() === '') throw new UsageError('the task is empty');
  if (flags.wake !== undefined && flags.wake !== 'each' && flags.wake !== 'all') throw new UsageError(`--wake must be each or all, got '${flags.wake}'`);
  const wake = flags.wake === 'all' ? 'all' : undefined;
  const maxRetryWait = positiveInt('max-retry-wait', flags.maxRetryWait, 0);
  if (flags.noStore && (flags.store !== undefined || flags.db !== undefined)) throw new UsageError(`--${flags.db === undefined ? 'store' : 'db'} and --no-store cannot be used together`);
  usableTarget(flags);
  const mcpServers = mcpSpecs(flags.mcp ?? []);
  const model = flags.model ?? io.env['EXARCH_MODEL'] ?? DEFAULT_MODEL;
  const allowWrite = flags.allowWrite ?? false;
  const allowShell = flags.allowShell ?? false;
  const allowNetwork = flags.allowNetwork ?? false;
  // Before anything is written: without bubblewrap, --allow-shell is one line (ShellSandboxError).
  const tools = workspaceTools({ root: io.cwd, allowWrite, allowShell, allowNetwork });
  // Before anything is written: a config that cannot be used is one line (AgentsConfigError, exit 1).
  const declared = loadAgentsConfig(flags.agents, io.cwd, tools);
  const approve = approvalPolicy(flags.approve, tools);
  const budget = budgetOf(flags, model);
  if (allowShell === 'unsandboxed') io.stderr.write('exarch: --allow-shell=unsandboxed: shell commands run without a sandbox, with your full access to files, processes and network\n');
  if (flags.detach && flags.db === undefined) throw new UsageError('--detach needs --db: only a run queued for workers goes on without this process');
  if (flags.record !== undefined && flags.replay !== undefined) throw new UsageError('--record and --replay cannot be used together');
  const port = uiPort(flags.ui === true, flags.uiPort);
  if (flags.ui && flags.db !== undefined) throw new UsageError('--ui with --db: the run goes on the workers; view it with exarch view RUN_ID --db URL');
  if (flags.steer && flags.db !== undefined) throw new UsageError('--steer with --db: the run goes on on the workers, which this process cannot steer');
  // What a resume (here or on a worker) rebuilds the run with: the options, never a secret.
  const recorded = {
    model,
    allowWrite,
    allowShell,
    allowNetwork,
    ...(maxSteps === undefined ? {} : { maxSteps }),
    ...(maxDepth === undefined ? {} : { maxDepth }),
    ...(replyCap === undefined ? {} : { replyCap }),
    ...(wake === undefined ? {} : { wake }),
    ...(maxRetryWait === undefined ? {} : { maxRetryWait }),
    // The config itself, not its path: a resume rebuilds the same agents even if the file changed.
    ...(declared ? { agentsConfig: declared.json } : {}),
    // The --mcp values as given, so that a resume starts the same servers (never put a secret in one).
    ...(flags.mcp === undefined || flags.mcp.length === 0 ? {} : { mcp: [...flags.mcp] }),
    ...(approve === undefined ? {} : { approve }),
    ...(flags.maxTokens === undefined ? {} : { maxTokens: flags.maxTokens }),
    ...(flags.maxCost === undefined ? {} : { maxCost: flags.maxCost }),
  };
  if (flags.db !== undefined) {
    if (mcpServers.length > 0) throw new UsageError('--mcp with --db: the workers do not start MCP servers yet; run it here without --db');
    if (flags.otel) throw new UsageError('--otel with --db: the workers run the agents, and they do not export spans yet; run it here without --db');
    if (flags.record !== undefined || flags.replay !== undefined) throw new UsageError(`--${flags.record === undefined ? 'replay' : 'record'} with --db: the workers make the model requests; run it here without --db`);
    const record = { ...recorded, tools: tools.map((tool) => tool.name).sort(), ...(flags.logDir === undefined ? {} : { logDir: flags.logDir }) };
    return submitAndFollow(flags.db, { task, cwd: io.cwd, record }, flags.detach === true, io, model, maxSteps);
  }
  // The workers need the key; a run here needs it now (a replay needs none).
  const diverged = new AbortController();
  const claude = connect(model, io, maxRetryWait, { ...(flags.record === undefined ? {} : { record: flags.record }), ...(flags.replay === undefined ? {} : { replay: flags.replay, diverged }) });
  if (typeof claude === 'number') return claude;
  // Before anything starts: no endpoint, or one that is not a URL, is one line (OtelSetupError, exit 1).
  const otel = flags.otel ? await (await import('./otlpExport.js')).startOtlpExport(io.env) : undefined;
  // A server that does not start stops the run here, before anything is recorded (one line, exit 1).
  const mcp = await connectMcp(mcpServers, tools, io);
  let store: RunStore | undefined;
  let ui: CliUi | undefined;
  try {
    // A store that cannot be read stops the run before anything starts (StoreError: one line, exit 1).
    store = flags.noStore ? undefined : await openStore(io.cwd, flags);
    const logDir = flags.logDir ?? join(io.cwd, '.exarch', 'runs', timestamp(new Date()));
    prepareDir('log directory', logDir);
    const title = `exarch run: ${task.slice(0, 80)}`;
    if (flags.ui) ui = await CliUi.start({ title, model, ...(port === undefined ? {} : { port }) }, io.stderr);
    const output = new RunOutput(io, flags.trace, title, model, logDir, maxSteps, { noWait: flags.noWait === true, store: flags.store, steer: flags.steer === true, ...(otel ? { otel } : {}), ...(flags.replay === undefined ? {} : { diverged: diverged.signal }), ...(ui ? { ui } : {}) });
    const session: DurableSessionInput = {
      provider: claude.provider,
      // A replayed fault is retried at once: the waits were the network's, and a replay has none.
      ...(flags.replay === undefined ? {} : { retry: { baseDelayMs: 0, maxDelayMs: 0 } }),
      tools: mcp.tools,
      ...(approve === undefined ? {} : { approve, onApprovalRequest: output.onApprovalRequest }),
      ...(budget === undefined ? {} : { budget }),
      logs: new JsonlLogSink(logDir),
      ...(maxSteps === undefined ? {} : { maxSteps }),
      ...(maxDepth === undefined ? {} : { maxDepth }),
      ...(replyCap === undefined ? {} : { replyCap }),
      ...(wake === undefined ? {} : { wake }),
      ...(claude.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: claude.stallTimeoutMs }),
      ...(declared ? { agents: declared.agents } : {}),
    };
    if (!store) return await output.follow(localRun(task, session, output.inspect), io.interrupt);
    const id = newRunId();
    io.stderr.write(`exarch: run ${id} started\n`);
    const record = { ...recorded, logDir };
    const run = await startRun(task, session, { store, id, cwd: io.cwd, record, actor: { inspect: output.inspect } });
    return await output.follow(run, io.interrupt, store);
  } finally {
    await store?.close();
    await mcp.close();
    await ui?.finish(io.interrupt);
  }
}

/** The `--mcp` values as server specs; a value that is not one is a usage error. */
function mcpSpecs(values: readonly string[]): McpServerSpec[] {
  try {
    return values.map(parseMcpFlag);
  } catch (error) {
    if (error instanceof McpSpecError) throw new UsageError(error.message);
    throw error;
  }
}

/**
 * Connects the run's MCP servers and says on stderr what each offers: the host's tools plus
 * theirs, and how to close them. Without servers, nothing is loaded.
 */
async function connectMcp(servers: readonly McpServerSpec[], tools: readonly Tool[], io: RunIo): Promise<{ tools: readonly Tool[]; close: () => Promise<void> }> {
  if (servers.length === 0) return { tools, close: async () => undefined };
  const { connectMcpServers } = await import('../tools/mcp/toolset.js');
  const toolset = await connectMcpServers(servers, { takenNames: tools.map((tool) => tool.name) });
  for (const server of toolset.servers) {
    io.stderr.write(`exarch: MCP server '${server.name}': ${server.tools.length} tool${server.tools.length === 1 ? '' : 's'} (${server.tools.join(', ')})\n`);
  }
  for (const warning of toolset.warnings) io.stderr.write(`exarch: ${warning}\n`);
  return { tools: [...tools, ...toolset.tools], close: () => toolset.close() };
}

/** How often a follower reads the store for what the workers did. */
const FOLLOW_POLL_MS = 200;

/**
 * `exarch run --db URL "task"`: the run is recorded and queued for the workers (`exarch worker`);
 * this process then follows it from the store (one line per agent started and ended, then the
 * root's answer on stdout and the usual summary) or, with `--detach`, prints its id and returns.
 * Ctrl-C stops following; the run goes on on the workers.
 */
async function submitAndFollow(db: string, submission: Submission, detach: boolean, io: RunIo, model: string, maxSteps: number | undefined): Promise<number> {
  // Loaded only here: a command without --db never pays for pg and pg-boss.
  const { openPostgresStore } = await import('../store/postgresStore.js');
  const { startBoss, submitRun } = await import('../workers/runQueue.js');
  const store = openPostgresStore(db);
  try {
    const boss = await startBoss(db);
    let id: string;
    try {
      id = await submitRun(store, boss, submission);
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
    if (detach) {
      io.stdout.write(`${id}\n`);
      io.stderr.write(`exarch: run ${id} queued for the workers; follow it with exarch runs --db, resume or view it by id\n`);
      return EXIT.ok;
    }
    io.stderr.write(`exarch: run ${id} started (queued for the workers)\n`);
    let seq = 0;
    const named = new Map<string, string>();
    for (;;) {
      if (io.interrupt.aborted) {
        io.stderr.write(`exarch: stopped following run ${id}; it goes on on the workers (exarch runs --db …, exarch view ${id} --db …)\n`);
        return EXIT.interrupted;
      }
      for (const row of await store.journalAfter(id, seq)) {
        seq = row.seq;
        const { record } = row;
        if (record.type === 'session') {
          named.set(row.session, record.agent.path.join('/'));
          io.stderr.write(`exarch: ${record.agent.path.join('/')} started\n`);
        } else if (record.type === 'outcome') {
          io.stderr.write(`exarch: ${named.get(row.session) ?? row.session} ${record.outcome}\n`);
        }
      }
      const run = await store.getRun(id);
      if (run && (run.status === 'done' || run.status === 'capped' || run.status === 'failed')) {
        const restored = restoreRun(await store.journal(id));
        const messages = restored.kind === 'ended' || restored.kind === 'settled' ? restored.messages : restored.kind === 'resumable' ? restored.root.messages : [];
        const reason = restored.kind === 'ended' ? restored.result.reason : undefined;
        const stored = (await store.listRuns()).find((r) => r.id === id);
        const code = new RunOutput(io, undefined, '', model, '', maxSteps).ended({ id, finished: true, status: run.status, text: finalAssistantText(messages), ...(reason === undefined ? {} : { reason }) });
        if (stored) io.stderr.write(`exarch: ${stored.agents} agent${stored.agents === 1 ? '' : 's'}, ${stored.requests} model request${stored.requests === 1 ? '' : 's'} (on the workers)\n`);
        return code;
      }
      await new Promise((resolve) => setTimeout(resolve, FOLLOW_POLL_MS));
    }
  } finally {
    await store.close();
  }
}

export interface ResumeFlags {
  readonly store?: string;
  readonly db?: string;
  readonly trace?: string;
  /** As for `run`: stop as `waiting` rather than ask at the terminal. */
  readonly noWait?: boolean;
  /** As for `run`: the turn-flow viewer, live. */
  readonly ui?: boolean;
  readonly uiPort?: string;
  /** As for `run`: steering commands from stdin without a terminal. */
  readonly steer?: boolean;
}

/**
 * `exarch resume RUN_ID`: takes up a run that did not finish (killed, crashed or interrupted) in
 * the run store, with the options it was started with, and ends as `exarch run` would.
 */
export async function resumeCommand(runId: string, flags: ResumeFlags, io: RunIo): Promise<number> {
  usableTarget(flags);
  const port = uiPort(flags.ui === true, flags.uiPort);
  const store = await openExistingStore(io.cwd, flags);
  if (!store) {
    io.stderr.write(`exarch: no run ${runId} in ${storeName(io.cwd, flags)} (there is no run store there yet)\n`);
    return EXIT.fatal;
  }
  let mcp: { tools: readonly Tool[]; close: () => Promise<void> } | undefined;
  let ui: CliUi | undefined;
  try {
    const row = await store.getRun(runId);
    if (!row) {
      io.stderr.write(`exarch: no run ${runId} in ${store.file}\n`);
      return EXIT.fatal;
    }
    if (row.status !== 'running' && row.status !== 'interrupted' && row.status !== 'waiting') {
      io.stderr.write(`exarch: run ${runId} is already finished (${row.status}); nothing to resume\n`);
      return EXIT.ok;
    }
    const rebuilt = storedSession(row, io);
    if (typeof rebuilt === 'number') return rebuilt;
    const { model, logDir, maxSteps } = rebuilt;
    const recorded = row.options;
    const title = `exarch resume ${runId}: ${row.task.slice(0, 80)}`;
    if (flags.ui) ui = await CliUi.start({ title, model, ...(port === undefined ? {} : { port }) }, io.stderr);
    const output = new RunOutput(io, flags.trace, title, model, logDir, maxSteps, { noWait: flags.noWait === true, store: flags.store, steer: flags.steer === true, ...(ui ? { ui } : {}) });
    const approve = recordedPolicy(recorded.approve);
    const budget = budgetOf({ ...(typeof recorded.maxTokens === 'string' ? { maxTokens: recorded.maxTokens } : {}), ...(typeof recorded.maxCost === 'string' ? { maxCost: recorded.maxCost } : {}) }, model);
    // The servers the run was started with, started again (their tools must be the same: see resumeRun).
    const recordedMcp = Array.isArray(recorded.mcp) ? recorded.mcp.filter((value): value is string => typeof value === 'string') : [];
    mcp = await connectMcp(mcpSpecs(recordedMcp), rebuilt.session.tools ?? [], io);
    const session: DurableSessionInput = {
      ...rebuilt.session,
      tools: mcp.tools,
      ...(budget === undefined ? {} : { budget }),
      ...(approve === undefined ? {} : { approve, onApprovalRequest: output.onApprovalRequest }),
    };
    let run: Awaited<ReturnType<typeof resumeRun>>;
    try {
      run = await resumeRun(runId, session, { store, cwd: io.cwd, actor: { inspect: output.inspect } });
    } catch (error) {
      if (!(error instanceof RunError)) throw error;
      io.stderr.write(`exarch: ${error.message}\n`);
      return EXIT.fatal;
    }
    if ('finished' in run) {
      // Its last process died after the root settled, before it said so: end as that run would have.
      io.stderr.write(`exarch: run ${runId} had finished (${run.status}) when its process stopped\n`);
      return output.ended(run);
    }
    io.stderr.write(`exarch: run ${runId} resumed\n`);
    return await output.follow(run, io.interrupt, store);
  } finally {
    await store.close();
    await mcp?.close();
    await ui?.finish(io.interrupt);
  }
}


/** A stored run's sessions as they were started: model, tools, caps and logs from its record. */
export interface StoredSession {
  readonly session: DurableSessionInput;
  readonly model: string;
  readonly logDir: string;
  readonly maxSteps: number | undefined;
}

/**
 * Rebuilds the live half of a stored run's sessions (`resume`, and a worker taking a run): the
 * provider from the environment, the rest from the run's record. An exit code when the key or a
 * setting is missing (said on stderr).
 */
export function storedSession(row: RunRow, io: Pick<RunIo, 'env' | 'stderr' | 'provider'>): StoredSession | number {
  const recorded = row.options;
  const model = typeof recorded.model === 'string' ? recorded.model : DEFAULT_MODEL;
  const claude = connect(model, io, numberOf(recorded.maxRetryWait));
  if (typeof claude === 'number') return claude;
  const logDir = typeof recorded.logDir === 'string' ? recorded.logDir : join(row.cwd, '.exarch', 'runs', timestamp(new Date(row.startedAt)));
  const maxSteps = numberOf(recorded.maxSteps);
  const maxDepth = numberOf(recorded.maxDepth);
  const replyCap = numberOf(recorded.replyCap);
  const wake = recorded.wake === 'all' ? 'all' : undefined;
  const tools = workspaceTools({
    root: row.cwd,
    allowWrite: recorded.allowWrite === true,
    allowShell: recorded.allowShell === 'unsandboxed' ? 'unsandboxed' : recorded.allowShell === true,
    allowNetwork: recorded.allowNetwork === true,
  });
  const declared = recorded.agentsConfig === undefined ? undefined : agentsFromJson(recorded.agentsConfig, `the agents recorded with run ${row.id}`, tools);
  const session: DurableSessionInput = {
    provider: claude.provider,
    tools,
    ...(declared ? { agents: declared.agents } : {}),
    logs: new JsonlLogSink(logDir),
    ...(maxSteps === undefined ? {} : { maxSteps }),
    ...(maxDepth === undefined ? {} : { maxDepth }),
    ...(replyCap === undefined ? {} : { replyCap }),
    ...(wake === undefined ? {} : { wake }),
    ...(claude.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: claude.stallTimeoutMs }),
  };
  return { session, model, logDir, maxSteps };
}

/** `--store` and `--db` checked before anything opens: a mistake in them is a usage error. */
export function usableTarget(target: { readonly store?: string; readonly db?: string }): void {
  try {
    checkTarget(target);
  } catch (error) {
    if (error instanceof StoreTargetError) throw new UsageError(error.message);
    throw error;
  }
}

/** `--approve all` or `--approve write_file,run_shell`: names that are not tools of this run are one line. */
function approvalPolicy(raw: string | undefined, tools: readonly Tool[]): 'all' | string[] | undefined {
  if (raw === undefined) return undefined;
  if (raw.trim() === 'all') return 'all';
  const names = raw.split(',').map((name) => name.trim()).filter((name) => name !== '');
  if (names.length === 0) throw new UsageError('--approve needs tool names (comma-separated) or all');
  const known = new Set(tools.map((tool) => tool.name));
  const unknown = names.filter((name) => !known.has(name));
  if (unknown.length > 0) throw new UsageError(`--approve: no tool named ${unknown.map((n) => `'${n}'`).join(', ')} in this run (its tools: ${[...known].join(', ')})`);
  return names;
}

/**
 * `--max-tokens N`, `--max-cost USD`: the tree's budget, priced at the model's list prices. A model
 * whose prices are known is priced even without either, so that a parent can give a sub-agent a
 * budget in US$ (`agent {…, budget: { cost }}`).
 */
function budgetOf(flags: Pick<RunFlags, 'maxTokens' | 'maxCost'>, model: string): TreeBudget | undefined {
  const maxTokens = positiveInt('max-tokens', flags.maxTokens);
  const priced = estimateCost(model, ZERO_USAGE) !== undefined;
  let maxCost: number | undefined;
  if (flags.maxCost !== undefined) {
    maxCost = Number(flags.maxCost);
    if (!/^\d+(\.\d+)?$/.test(flags.maxCost.trim()) || !(maxCost > 0)) throw new UsageError(`--max-cost must be a positive amount of US$, got '${flags.maxCost}'`);
    if (!priced) throw new UsageError(`--max-cost: no prices are known for the model '${model}'; use --max-tokens`);
  }
  if (maxTokens === undefined && maxCost === undefined && !priced) return undefined;
  return {
    ...(maxTokens === undefined ? {} : { maxTokens }),
    ...(maxCost === undefined ? {} : { maxCost }),
    ...(priced ? { price: (usage) => estimateCost(model, usage) ?? 0 } : {}),
  };
}

/** The policy a run was recorded with. */
function recordedPolicy(value: unknown): ApprovalPolicy | undefined {
  if (value === 'all') return 'all';
  return Array.isArray(value) && value.every((name) => typeof name === 'string') ? (value as string[]) : undefined;
}

function numberOf(value: unknown): number | undefined {
  return typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined;
}

/** `--record FILE`, or `--replay FILE` and what to abort when the run differs from it. */
interface Recording {
  readonly record?: string;
  readonly replay?: string;
  readonly diverged?: AbortController;
}

/**
 * Claude through the SDK (recording its exchanges with `--record`), a recording (`--replay`), or
 * the test's provider; an exit code when the key or a setting is missing.
 */
function connect(model: string, io: Pick<RunIo, 'env' | 'stderr' | 'provider'>, maxRetryWaitS?: number, recording: Recording = {}): { provider: Provider; stallTimeoutMs: number | undefined } | number {
  const apiKey = io.env['ANTHROPIC_API_KEY'];
  if (recording.replay !== undefined) {
    // A recording that cannot be read is one line (RecordingError, exit 1); no key, no network.
    const { diverged } = recording;
    const provider = new ReplayProvider(recording.replay, { model, redactor: Redactor.fromEnv(io.env), ...(diverged ? { onMismatch: (mismatch) => diverged.abort(mismatch) } : {}) });
    return { provider, stallTimeoutMs: undefined };
  }
  if (!io.provider && !apiKey) {
    io.stderr.write('exarch: ANTHROPIC_API_KEY is not set: set it to run against Claude, or try `exarch demo` (offline, no key needed)\n');
    return EXIT.fatal;
  }
  const stallRaw = io.env['EXARCH_STALL_TIMEOUT_MS'];
  const stallTimeoutMs = stallRaw === undefined || stallRaw === '' ? undefined : Number(stallRaw);
  if (stallTimeoutMs !== undefined && (!Number.isSafeInteger(stallTimeoutMs) || stallTimeoutMs < 1)) {
    io.stderr.write(`exarch: EXARCH_STALL_TIMEOUT_MS must be a positive integer (milliseconds), got '${stallRaw ?? ''}'\n`);
    return EXIT.fatal;
  }
  const provider =
    io.provider ??
    new AnthropicProvider({
      apiKey,
      model,
      ...(io.env['ANTHROPIC_BASE_URL'] ? { baseURL: io.env['ANTHROPIC_BASE_URL'] } : {}),
      ...(maxRetryWaitS === undefined ? {} : { maxRetryWaitMs: maxRetryWaitS * 1000 }),
      // Never the key nor a secret of the environment in the file (RecordingError if it cannot be written).
      ...(recording.record === undefined ? {} : { record: { file: recording.record, redactor: Redactor.fromEnv(io.env, apiKey === undefined ? [] : [apiKey]) } }),
    });
  return { provider, stallTimeoutMs };
}

/** What `follow` needs of a run: durable (`startRun`, `resumeRun`) or not (`--no-store`). */
interface FollowedRun {
  readonly id?: string;
  readonly actor: SessionActor;
  readonly result: Promise<RunResult & { readonly storeError?: Error; readonly status?: string }>;
  interrupt(): void;
  /** Stops the run to wait for approvals (a durable one is then `waiting`). */
  suspend(): void;
}

/** A run that is not recorded: the root actor alone. */
function localRun(task: string, session: DurableSessionInput, inspect: (event: InspectionEvent) => void): FollowedRun {
  const actor = createSessionActor({ ...session, task }, { inspect });
  actor.start();
  const result = (async () => {
    try {
      return runResultOf(await waitForSettled(actor));
    } finally {
      actor.stop();
      // Let stopped sessions close their logs (their teardown runs on the next microtasks).
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  const cancel = (reason: string) => (): void => actor.send({ type: 'cancel', reason });
  return { actor, result, interrupt: cancel('interrupted'), suspend: cancel('waiting for approval') };
}

/** Progress, trace and the ending of `run` and `resume`: stdout answer, summary, exit code. */
class RunOutput {
  private readonly board: ProgressBoard;
  private readonly recorder: TraceRecorder | undefined;
  private readonly observer = new RunObserver();
  /** Requests that arrived before `follow` took the run (kept for it), and the handler once it has. */
  private readonly early: ApprovalRequest[] = [];
  private onRequest: ((request: ApprovalRequest) => void) | undefined;
  /** Checks, once per turn of the event loop, whether only approvals are left (see `follow`). */
  private watch: (() => void) | undefined;
  /** `--otel`: the run's spans, and where they go. */
  private readonly spans: OtelRunExporter | undefined;

  constructor(
    private readonly io: RunIo,
    trace: string | undefined,
    title: string,
    private readonly model: string,
    private readonly logDir: string,
    private readonly maxSteps: number | undefined,
    private readonly approvals: { readonly noWait: boolean; readonly store: string | undefined; readonly steer: boolean; readonly otel?: OtlpExport; readonly diverged?: AbortSignal; readonly ui?: CliUi } = { noWait: false, store: undefined, steer: false },
  ) {
    const color = io.stderr.isTTY === true && !io.env['NO_COLOR'] && !io.env['CI'];
    this.board = new ProgressBoard({ out: io.stderr, live: color, color });
    this.recorder = trace === undefined ? undefined : new TraceRecorder({ file: trace, title, model });
    // One observer decodes the run for all of them.
    this.observer.subscribe(this.board.onEvent);
    if (this.recorder) this.observer.subscribe(this.recorder.onEvent);
    const otel = approvals.otel;
    this.spans = otel ? new OtelRunExporter({ tracer: otel.tracer, captureContent: otel.captureContent }) : undefined;
    if (this.spans) this.observer.subscribe(this.spans.onEvent);
    if (approvals.ui) this.observer.subscribe(approvals.ui.onEvent);
  }

  /** The root's `onApprovalRequest`. */
  readonly onApprovalRequest = (request: ApprovalRequest): void => {
    if (this.onRequest) this.onRequest(request);
    else this.early.push(request);
  };

  readonly inspect = (event: InspectionEvent): void => {
    this.watch?.();
    this.observer.inspect(event);
    this.io.inspect?.(event);
  };

  /** The ending of a run whose root had settled before its process stopped: stdout answer and exit code, no summary of work done now. */
  ended(run: FinishedRun): number {
    const { io } = this;
    if (run.status === 'failed') {
      io.stderr.write(`exarch: the root agent failed: ${run.reason ?? 'unknown reason'}\n`);
      return EXIT.fatal;
    }
    if (run.status === 'interrupted') {
      io.stderr.write('exarch: the root agent had been cancelled\n');
      return EXIT.interrupted;
    }
    if (run.text) io.stdout.write(run.text.endsWith('\n') ? run.text : `${run.text}\n`);
    if (run.status === 'capped') {
      io.stderr.write(`exarch: the root agent stopped at its step cap (${this.maxSteps ?? DEFAULTS.maxSteps} model requests in one turn)\n`);
      return EXIT.capped;
    }
    return EXIT.ok;
  }

  /**
   * What the person types: on a terminal (stdin and stderr), or from stdin with `--steer`, steering
   * command lines are read from the start (see `steeringCommand`); the approval questions share the
   * reader. Undefined without a terminal or `--steer`.
   */
  private takeInput(run: FollowedRun): TerminalInput | undefined {
    const { io, board } = this;
    const terminal = io.stdin?.isTTY === true && io.stderr.isTTY === true;
    if (!io.stdin || (!terminal && !this.approvals.steer)) return undefined;
    const input = new TerminalInput({
      input: io.stdin,
      output: io.stderr,
      terminal,
      onCommand: (line) => {
        for (const said of steeringCommand(line, run.actor)) board.print(said);
      },
      onCommandOpen: () => board.pause(),
      onCommandClose: () => board.resume(),
      // Raw mode keeps Ctrl-C from the terminal's signal: raised here as the terminal would.
      onInterrupt: () => process.kill(process.pid, 'SIGINT'),
    });
    input.start();
    return input;
  }

  /**
   * On a terminal (stdin and stderr), and without `--no-wait`, each call that waits for approval is
   * asked inline, one at a time. Otherwise the run goes on until nothing in the tree can move
   * without a person, then stops as `waiting` with the calls listed (exit 4).
   */
  private takeApprovals(run: FollowedRun, input: TerminalInput | undefined): TakenApprovals {
    const { io, board } = this;
    const waiting: ApprovalRequest[] = [];
    let close = (): void => undefined;
    const inline = !this.approvals.noWait && io.stdin?.isTTY === true && io.stderr.isTTY === true;
    // (On a terminal the input is always taken: `takeInput`.)
    if (inline && input) {
      const prompt = new ApprovalPrompt(input, io.stderr, board, (answer) => respond(run.actor, answer));
      this.onRequest = prompt.request;
      close = () => prompt.close();
    } else {
      let scheduled: NodeJS.Immediate | undefined;
      let stopped = false;
      const check = (): void => {
        scheduled = undefined;
        if (stopped || !blockedOnApprovals(run.actor)) return;
        stopped = true;
        waiting.push(...run.actor.getSnapshot().context.options.approvals.waiting());
        run.suspend();
      };
      const desk = run.actor.getSnapshot().context.options.approvals;
      this.watch = () => {
        if (!stopped && scheduled === undefined && desk.waiting().length > 0) scheduled = setImmediate(check);
      };
      this.onRequest = () => this.watch?.();
      close = () => {
        stopped = true;
        if (scheduled) clearImmediate(scheduled);
        this.watch = undefined;
      };
    }
    for (const request of this.early.splice(0)) this.onRequest?.(request);
    return {
      waiting,
      close: () => {
        close();
        this.onRequest = undefined;
      },
    };
  }

  /** The exit-4 listing: each waiting call with its tool, its agent and the commands that answer it. */
  private listWaiting(runId: string | undefined, waiting: readonly ApprovalRequest[]): void {
    const { io } = this;
    const n = waiting.length;
    const store = this.approvals.store === undefined ? '' : ` --store ${this.approvals.store}`;
    io.stderr.write(`exarch: stopped: ${n} tool call${n === 1 ? '' : 's'} wait${n === 1 ? 's' : ''} for approval\n`);
    for (const request of waiting) {
      io.stderr.write(`  ${request.callId}  ${request.tool}  by ${request.agent.id}  ${clip(JSON.stringify(request.input), 160)}\n`);
      if (runId !== undefined) io.stderr.write(`    exarch approve ${runId} ${request.callId}${store}    or: exarch deny ${runId} ${request.callId} "reason"${store}\n`);
    }
    io.stderr.write(
      runId === undefined
        ? 'exarch: this run was not recorded (--no-store), so it cannot be answered and resumed\n'
        : `exarch: then continue with: exarch resume ${runId}${store}\n`,
    );
  }

  async follow(run: FollowedRun, interrupt: AbortSignal, store?: RunStore): Promise<number> {
    const { io, board, recorder } = this;
    let interrupted = false;
    const onInterrupt = (): void => {
      interrupted = true;
      run.interrupt();
    };
    interrupt.addEventListener('abort', onInterrupt, { once: true });
    // Ctrl-C while the run was being set up (MCP servers starting): an aborted signal fires no event.
    if (interrupt.aborted) onInterrupt();
    // --replay: a request that differs from the recording ends the run; nothing after it would be the recorded run.
    const diverged = this.approvals.diverged;
    const onDiverged = (): void => queueMicrotask(() => run.interrupt());
    diverged?.addEventListener('abort', onDiverged, { once: true });
    const input = this.takeInput(run);
    const approvals = this.takeApprovals(run, input);
    try {
      const result = await run.result;
      approvals.close();
      input?.close();
      board.stop();
      // The run's last records are in (the root's end came with its stop): the page shows the end.
      this.approvals.ui?.end();
      if (diverged?.aborted) {
        io.stderr.write(`exarch: ${describeError(diverged.reason)}\n`);
        return EXIT.fatal;
      }
      const state = String(result.snapshot.value);
      const summary = async (): Promise<void> => {
        const totals = board.totals();
        const stored = store && run.id !== undefined ? (await store.listRuns()).find((r) => r.id === run.id) : undefined;
        writeSummary(io.stderr, stored ? { ...totals, agents: stored.agents, steps: stored.requests, usage: stored.usage } : totals, this.model, this.logDir);
        for (const line of agentSpendLines(result.snapshot.context.options.budget.agents(), this.model)) io.stderr.write(`${line}\n`);
        if (recorder) io.stderr.write(`exarch: trace: ${recorder.file} (view it with: exarch view ${recorder.file})\n`);
      };
      if (result.storeError) {
        await summary();
        io.stderr.write(`exarch: the run store could not be written: ${describeError(result.storeError)}\n`);
        return EXIT.fatal;
      }
      if (approvals.waiting.length > 0) {
        await summary();
        this.listWaiting(run.id, approvals.waiting);
        return EXIT.waiting;
      }
      if (interrupted) {
        await summary();
        io.stderr.write(`exarch: interrupted: the agents were cancelled and their logs written${run.id === undefined ? '' : `; resume with: exarch resume ${run.id}`}\n`);
        return EXIT.interrupted;
      }
      if (state === 'failed') {
        await summary();
        io.stderr.write(`exarch: the root agent failed: ${result.reason ?? 'unknown reason'}\n`);
        return EXIT.fatal;
      }
      if (result.text) io.stdout.write(result.text.endsWith('\n') ? result.text : `${result.text}\n`);
      await summary();
      const meter = result.snapshot.context.options.budget;
      if (meter.spent) {
        const { tokens, cost } = meter.totals;
        io.stderr.write(`exarch: the budget stopped the run: the tree spent ${formatCount(tokens)} tokens${cost > 0 ? ` (about $${cost.toFixed(3)})` : ''}; running sub-agents were cancelled and the root ${state === 'capped' ? 'could not answer in its final turn' : 'answered in its final turn'}\n`);
        if (state === 'capped') return EXIT.capped;
      }
      if (state === 'capped') {
        io.stderr.write(`exarch: the root agent stopped at its step cap (${this.maxSteps ?? DEFAULTS.maxSteps} model requests in one turn)\n`);
        return EXIT.capped;
      }
      return EXIT.ok;
    } finally {
      approvals.close();
      input?.close();
      interrupt.removeEventListener('abort', onInterrupt);
      diverged?.removeEventListener('abort', onDiverged);
      board.stop();
      recorder?.close();
      await this.finishSpans();
    }
  }

  /** `--otel`: the spans still open end, and all are sent before the command exits (one line says how it went). */
  private async finishSpans(): Promise<void> {
    const otel = this.approvals.otel;
    if (!otel) return;
    this.spans?.close();
    this.io.stderr.write(`exarch: ${await otel.finish()}\n`);
  }
}

/** Where `follow` takes calls that wait for approval, and what was left waiting when the run stopped for them. */
interface TakenApprovals {
  readonly waiting: readonly ApprovalRequest[];
  close(): void;
}

function writeSummary(out: NodeJS.WritableStream, totals: ReturnType<ProgressBoard['totals']>, model: string, logDir: string): void {
  const { agents, steps, usage, outcomes } = totals;
  const cost = estimateCost(model, usage);
  const children = Object.entries(outcomes)
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');
  const input = usage.inputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens;
  out.write(
    `exarch: ${agents} agent${agents === 1 ? '' : 's'}${children ? ` (sub-agents: ${children})` : ''}, ${steps} model request${steps === 1 ? '' : 's'}, ` +
      `${formatCount(input)} input tokens (${formatCount(usage.cacheReadInputTokens)} cache reads), ${formatCount(usage.outputTokens)} output tokens` +
      `${cost === undefined ? '' : `, about $${cost.toFixed(cost < 1 ? 3 : 2)}`} · logs: ${logDir}\n`,
  );
}
