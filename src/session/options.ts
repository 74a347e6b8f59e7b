import type { z } from 'zod';
import { checkProfiles, type AgentProfiles } from './agentProfiles.js';
import { ApprovalDesk, checkApprovalPolicy, type ApprovalPolicy, type ApprovalRequest } from '../engine/approvals.js';
import { checkBudget, type TreeBudget } from '../engine/budget.js';
import { BudgetMeter } from '../engine/budgetMeter.js';
import { JsonlLogSink, nullLogSink, type LogSink } from '../engine/log/sessionLog.js';
import type { RetryPolicy } from '../engine/model/streamModel.js';
import type { RemoteChildren } from '../engine/remoteChildren.js';
import type { NudgeLatch } from '../engine/nudges.js';
import type { RunJournal } from '../store/runJournal.js';
import type { Tool } from '../tools/defineTool.js';
import { DEFAULT_PROTOCOL, typedAgentTool, typedReplyTool, type ProtocolTools } from '../tools/protocolTools.js';
import { toolAxes, type ToolAxes } from '../tools/toolbox.js';
import type { AgentIdentity, Provider, SessionListener } from '../engine/types.js';
import { MAX_TIMER_MS } from '../engine/maxTimer.js';

/** Everything a session (and every sub-agent it spawns) runs with. */
export interface SessionOptions {
  readonly provider: Provider;
  /** Tools every agent may call, besides the protocol tools. */
  readonly tools?: readonly Tool[];
  /** A system prompt, or one per agent; the default teaches the reply contract. */
  readonly system?: string | ((agent: AgentIdentity, canSpawn: boolean) => string);
  readonly listener?: SessionListener;
  /** A log sink, or a directory for JSONL logs. No logs when absent. */
  readonly logs?: LogSink | string;
  /** Host latches, consulted after the built-in ones. */
  readonly nudges?: readonly NudgeLatch[];
  /** Model requests per turn (default 50). */
  readonly maxSteps?: number;
  /** Sessions at this depth cannot spawn (default 2: root → child → grandchild). */
  readonly maxDepth?: number;
  /** Characters of a rendered reply payload (default 16,000). */
  readonly replyCap?: number;
  /** Truncation reminders per turn before the session fails (default 3). */
  readonly truncationBudget?: number;
  /** Per tool call, unless the tool sets its own (default 120,000 ms). */
  readonly toolTimeoutMs?: number;
  /** Characters of a rendered tool output (default 50,000). */
  readonly toolOutputCap?: number;
  readonly retry?: Partial<RetryPolicy>;
  /** Abort and retry a model stream that shows no sign of life for this long (default 120,000 ms). */
  readonly stallTimeoutMs?: number;
  /**
   * When results wake a session that ended its turn while sub-agents ran: `'each'` (default) at
   * every delivery (results that arrive together share one turn), so it can act on the first;
   * `'all'` once every running sub-agent has delivered, one request for the whole fan-out. A user
   * message always wakes it.
   */
  readonly wake?: 'each' | 'all';
  /**
   * The durable run's journal, which every session of the tree writes (set by `startRun` and
   * `resumeRun`). Without one nothing is stored and nothing is paid for it.
   */
  readonly journal?: RunJournal;
  /**
   * Declared agents by type name: the `agent` tool gains `type`, an enum of these names listed with
   * their descriptions, and a sub-agent started with one runs with that profile's prompt, tools,
   * model, step cap and reply schema. A durable run must be resumed with the same declarations.
   */
  readonly agents?: AgentProfiles;
  /**
   * A zod object schema for this session's own result. The session is offered `reply` with this
   * schema as its input (a root too, which then ends by replying), an invalid reply is refused
   * naming the fields, and the parsed value is `AgentResult.value` (`RunResult.value` of `runAgent`).
   */
  readonly output?: z.ZodType;
  /**
   * Tool calls that wait for a person before they run, at any depth (see `ApprovalPolicy`).
   * Their session rests in `awaitingApproval` until `respond(root, answer)` answers.
   */
  readonly approve?: ApprovalPolicy;
  /** Called at the root for each call that starts waiting for approval. */
  readonly onApprovalRequest?: (request: ApprovalRequest) => void;
  /** A bound on the whole tree's tokens or cost (see `BudgetMeter` for the exact bound kept). */
  readonly budget?: TreeBudget;
  /**
   * Where sub-agents run when not here (a worker's own jobs: src/workers/). Sessions that spend
   * within no budget start every sub-agent through it; a budget is kept in one process, so a
   * sub-agent given one runs its whole subtree where it runs.
   */
  readonly remoteChildren?: RemoteChildren;
}

/** A declared agent type, resolved: the options its sessions run with. */
interface DeclaredAgent {
  readonly name: string;
  readonly description: string;
  readonly options: ResolvedOptions;
}

export interface ResolvedOptions {
  readonly provider: Provider;
  readonly tools: readonly Tool[];
  readonly system: SessionOptions['system'];
  readonly listener: SessionListener | undefined;
  readonly logs: LogSink;
  readonly nudges: readonly NudgeLatch[];
  readonly maxSteps: number;
  readonly maxDepth: number;
  readonly replyCap: number;
  readonly truncationBudget: number;
  readonly toolTimeoutMs: number;
  readonly toolOutputCap: number;
  readonly retry: RetryPolicy;
  readonly stallTimeoutMs: number;
  readonly wake: 'each' | 'all';
  readonly journal: RunJournal | undefined;
  /** Declared agent types, shared by every session of the run. */
  readonly agents: ReadonlyMap<string, DeclaredAgent>;
  /** The declared type these options are for; undefined for the run's own. */
  readonly profile: string | undefined;
  /** The model to ask for; undefined: the provider's. */
  readonly model: string | undefined;
  /** The schema of the session's reply, when it is typed. */
  readonly reply: z.ZodType | undefined;
  /** The shapes of `agent` and `reply` for these options. */
  readonly protocol: ProtocolTools;
  /** The tree's approvals: one desk per root, shared by every sub-agent. */
  readonly approvals: ApprovalDesk;
  /** The tree's spend: one meter per root, shared by every sub-agent. */
  readonly budget: BudgetMeter;
  readonly remoteChildren: RemoteChildren | undefined;
}

export const DEFAULTS = {
  maxSteps: 50,
  maxDepth: 2,
  replyCap: 16_000,
  truncationBudget: 3,
  toolTimeoutMs: 120_000,
  toolOutputCap: 50_000,
  retry: { maxRetries: 4, baseDelayMs: 1_000, maxDelayMs: 30_000 },
  stallTimeoutMs: 120_000,
} as const;

const resolved = new WeakSet<object>();
const inherited = new WeakMap<object, ResolvedOptions>();

/**
 * The input of a sub-agent: its parent's resolved options plus `extra`. The sub-agent resolves to
 * the very same options object, so thousands of sub-agents share one (and the caches keyed by it).
 */
export function inheritOptions<T extends object>(parent: ResolvedOptions, extra: T): SessionOptions & T {
  // The parent's options are the prototype rather than copied in: a copy of ~16 properties per
  // sub-agent came out as a dictionary-mode object with a hidden class of its own, each.
  const input = Object.assign(Object.create(parent) as SessionOptions, extra);
  inherited.set(input, parent);
  return input;
}

/** Fills defaults and checks every number; a bad option throws one line naming it. */
export function resolveOptions(options: SessionOptions): ResolvedOptions {
  if (resolved.has(options)) return options as unknown as ResolvedOptions;
  const parent = inherited.get(options);
  if (parent) return parent;
  if (!options || typeof options.provider?.stream !== 'function') {
    throw new TypeError('exarch: `provider` is required and must have a stream(request, sink) method');
  }
  const result: ResolvedOptions = {
    provider: options.provider,
    tools: options.tools ?? [],
    system: options.system,
    listener: options.listener,
    logs: typeof options.logs === 'string' ? new JsonlLogSink(options.logs) : (options.logs ?? nullLogSink),
    nudges: options.nudges ?? [],
    maxSteps: count('maxSteps', options.maxSteps ?? DEFAULTS.maxSteps, 1),
    maxDepth: count('maxDepth', options.maxDepth ?? DEFAULTS.maxDepth, 0),
    replyCap: count('replyCap', options.replyCap ?? DEFAULTS.replyCap, 1),
    truncationBudget: count('truncationBudget', options.truncationBudget ?? DEFAULTS.truncationBudget, 0),
    toolTimeoutMs: count('toolTimeoutMs', options.toolTimeoutMs ?? DEFAULTS.toolTimeoutMs, 1, MAX_TIMER_MS),
    toolOutputCap: count('toolOutputCap', options.toolOutputCap ?? DEFAULTS.toolOutputCap, 1),
    retry: {
      maxRetries: count('retry.maxRetries', options.retry?.maxRetries ?? DEFAULTS.retry.maxRetries, 0),
      baseDelayMs: count('retry.baseDelayMs', options.retry?.baseDelayMs ?? DEFAULTS.retry.baseDelayMs, 0, MAX_TIMER_MS),
      maxDelayMs: count('retry.maxDelayMs', options.retry?.maxDelayMs ?? DEFAULTS.retry.maxDelayMs, 0, MAX_TIMER_MS),
    },
    stallTimeoutMs: count('stallTimeoutMs', options.stallTimeoutMs ?? DEFAULTS.stallTimeoutMs, 1, MAX_TIMER_MS),
    wake: wakeOf(options.wake),
    journal: options.journal,
    agents: new Map(),
    profile: undefined,
    model: undefined,
    reply: options.output,
    protocol: DEFAULT_PROTOCOL,
    approvals: new ApprovalDesk(checkApprovalPolicy(options.approve), options.onApprovalRequest),
    budget: new BudgetMeter(checkBudget(options.budget)),
    remoteChildren: options.remoteChildren,
  };
  return declareAgents(result, options);
}

/** The run's options for sub-agents started without a `type`, by the options of the session that starts them. */
const generalOf = new WeakMap<ResolvedOptions, ResolvedOptions>();

/**
 * Adds the declared agents and the output schema to the run's options: one options object per
 * declared type, made once for the whole run. Without either, `run` is returned as it is.
 */
function declareAgents(run: ResolvedOptions, options: SessionOptions): ResolvedOptions {
  const checked = checkProfiles(options.agents, run.tools);
  if (checked.length === 0 && options.output === undefined) {
    resolved.add(run);
    return run;
  }
  const agentTool = typedAgentTool(checked);
  const protocol = (reply: z.ZodType | undefined, owner: string): ProtocolTools =>
    checked.length === 0 && reply === undefined ? DEFAULT_PROTOCOL : { ...DEFAULT_PROTOCOL, ...agentTool, ...(reply ? typedReplyTool(reply, owner) : {}) };
  const agents = new Map<string, DeclaredAgent>();
  const base: ResolvedOptions = { ...run, agents, protocol: protocol(run.reply, 'the `output` option') };
  // Sub-agents without a type: the run's options without a reply schema.
  const general: ResolvedOptions = run.reply === undefined ? base : { ...base, reply: undefined, protocol: protocol(undefined, '') };
  for (const made of [base, general]) {
    resolved.add(made);
    generalOf.set(made, general);
  }
  for (const { name, description, profile, tools } of checked) {
    const declared: ResolvedOptions = {
      ...base,
      tools: tools ?? base.tools,
      system: profile.system ?? base.system,
      maxSteps: profile.maxSteps === undefined ? base.maxSteps : count(`agents.${name}.maxSteps`, profile.maxSteps, 1),
      model: profile.model,
      reply: profile.reply,
      profile: name,
      protocol: protocol(profile.reply, `agents.${name}`),
    };
    resolved.add(declared);
    // Its untyped sub-agents keep its tools: a profile's restriction cannot be escaped by delegating.
    const generalOfDeclared: ResolvedOptions = declared.tools === general.tools ? general : { ...general, tools: declared.tools };
    resolved.add(generalOfDeclared);
    generalOf.set(declared, generalOfDeclared);
    agents.set(name, { name, description, options: declared });
  }
  return base;
}

/**
 * The options of a sub-agent that `parent` starts: those of the declared `type`, or for an untyped
 * one the run's (with the parent's tools). Throws one line for a type the run does not declare
 * (the `agent` tool refuses those; a journal of other declarations can still name one).
 */
export function childOptions(parent: ResolvedOptions, type: string | undefined): ResolvedOptions {
  if (type === undefined) return generalOf.get(parent) ?? parent;
  const declared = parent.agents.get(type);
  if (!declared) {
    const known = [...parent.agents.keys()];
    throw new Error(
      `exarch: agent type '${type}' is not declared (declared: ${known.length > 0 ? known.join(', ') : 'none'}); resume a run with the agents it was started with`,
    );
  }
  return declared.options;
}

/** CONTRACT §2's axes for a session of these options; a session with an output schema replies, at the root too. */
export function sessionAxes(depth: number, options: ResolvedOptions): ToolAxes {
  const axes = toolAxes(depth, options.maxDepth);
  return options.reply !== undefined && !axes.replies ? { ...axes, replies: true } : axes;
}

function wakeOf(wake: unknown): 'each' | 'all' {
  if (wake === undefined || wake === 'each' || wake === 'all') return wake ?? 'each';
  throw new TypeError(`exarch: \`wake\` must be 'each' or 'all', got ${JSON.stringify(wake)}`);
}

/** `value`, an integer of at least `min` (and, for a duration a timer waits, at most what a timer holds). */
function count(name: string, value: number, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `≥ ${min}` : `from ${min} to ${max} (the longest a timer can wait, in ms)`;
    throw new RangeError(`exarch: option ${name} must be an integer ${range}, got ${String(value)}`);
  }
  return value;
}
