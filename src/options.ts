import { ApprovalDesk, checkApprovalPolicy, type ApprovalPolicy, type ApprovalRequest } from './approvals.js';
import { BudgetMeter, checkBudget, type TreeBudget } from './budget.js';
import { JsonlLogSink, nullLogSink, type LogSink } from './log/sessionLog.js';
import type { RetryPolicy } from './model/streamModel.js';
import type { NudgeLatch } from './nudges.js';
import type { RunJournal } from './store/runJournal.js';
import type { Tool } from './tools/defineTool.js';
import type { AgentIdentity, Provider, SessionListener } from './types.js';

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
   * Tool calls that wait for a person before they run, at any depth (see `ApprovalPolicy`).
   * Their session rests in `awaitingApproval` until `respond(root, answer)` answers.
   */
  readonly approve?: ApprovalPolicy;
  /** Called at the root for each call that starts waiting for approval. */
  readonly onApprovalRequest?: (request: ApprovalRequest) => void;
  /** A bound on the whole tree's tokens or cost (see `BudgetMeter` for the exact bound kept). */
  readonly budget?: TreeBudget;
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
  /** The tree's approvals: one desk per root, shared by every sub-agent. */
  readonly approvals: ApprovalDesk;
  /** The tree's spend: one meter per root, shared by every sub-agent. */
  readonly budget: BudgetMeter;
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
  if (resolved.has(options)) return options as ResolvedOptions;
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
    toolTimeoutMs: count('toolTimeoutMs', options.toolTimeoutMs ?? DEFAULTS.toolTimeoutMs, 1),
    toolOutputCap: count('toolOutputCap', options.toolOutputCap ?? DEFAULTS.toolOutputCap, 1),
    retry: {
      maxRetries: count('retry.maxRetries', options.retry?.maxRetries ?? DEFAULTS.retry.maxRetries, 0),
      baseDelayMs: count('retry.baseDelayMs', options.retry?.baseDelayMs ?? DEFAULTS.retry.baseDelayMs, 0),
      maxDelayMs: count('retry.maxDelayMs', options.retry?.maxDelayMs ?? DEFAULTS.retry.maxDelayMs, 0),
    },
    stallTimeoutMs: count('stallTimeoutMs', options.stallTimeoutMs ?? DEFAULTS.stallTimeoutMs, 1),
    wake: wakeOf(options.wake),
    journal: options.journal,
    approvals: new ApprovalDesk(checkApprovalPolicy(options.approve), options.onApprovalRequest),
    budget: new BudgetMeter(checkBudget(options.budget)),
  };
  resolved.add(result);
  return result;
}

function wakeOf(wake: unknown): 'each' | 'all' {
  if (wake === undefined || wake === 'each' || wake === 'all') return wake ?? 'each';
  throw new TypeError(`exarch: \`wake\` must be 'each' or 'all', got ${JSON.stringify(wake)}`);
}

function count(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) {
    throw new RangeError(`exarch: option ${name} must be an integer ≥ ${min}, got ${String(value)}`);
  }
  return value;
}
