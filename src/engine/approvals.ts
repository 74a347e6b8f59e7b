import type { AnyActorRef } from 'xstate';
import type { AgentIdentity } from './types.js';

/**
 * Which tool calls need a person's approval before they run: tool names, `'all'` (every host
 * tool), or a predicate over the call, asked once per complete, well-formed call of a host tool.
 * Protocol tools (`agent`, `reply`, …) never need approval.
 */
export type ApprovalPolicy = readonly string[] | 'all' | ((call: ApprovalCall) => boolean);

/** A host tool call, as an approval policy sees it. */
export interface ApprovalCall {
  readonly tool: string;
  readonly input: Readonly<Record<string, unknown>>;
  readonly agent: AgentIdentity;
}

/**
 * One tool call waiting for a person, surfaced at the root (the `onApprovalRequest` option). Its
 * session rests in `awaitingApproval` until `respond` answers it; the rest of the tree goes on.
 */
export interface ApprovalRequest {
  readonly type: 'approval.requested';
  /** The call's `tool_use` id (`toolu_…`): what `respond` and `exarch approve` name. */
  readonly callId: string;
  readonly tool: string;
  readonly input: Readonly<Record<string, unknown>>;
  /** The agent that asked, with its path in the tree. */
  readonly agent: AgentIdentity;
  /** Why that agent runs: the task its parent gave it (the root's: the run's task). */
  readonly task: string;
}

/**
 * A person's answer: run the call; do not run it (the model gets an `is_error` result carrying
 * `reason`); or run it and every later call of the same tool in the run without asking.
 */
export type ApprovalDecision = 'approve' | 'deny' | 'always';

export interface ApprovalAnswer {
  readonly callId: string;
  readonly decision: ApprovalDecision;
  /** Said to the model with a denial. */
  readonly reason?: string;
}

/** What the desk sends the session that holds the call. */
export type ApprovalAnswerEvent = { readonly type: 'approval.answer' } & ApprovalAnswer;

interface Pending {
  readonly request: ApprovalRequest;
  readonly session: AnyActorRef;
}

/**
 * The run's approvals, shared by every session of one tree (through their shared options): the
 * policy, the tools approved for the rest of the run, and the calls waiting, each with the session
 * that holds it so an answer given at the root reaches exactly that session at any depth.
 */
export class ApprovalDesk {
  private readonly always = new Set<string>();
  private readonly pending = new Map<string, Pending>();

  constructor(
    private readonly policy: ApprovalPolicy | undefined,
    private readonly onRequest: ((request: ApprovalRequest) => void) | undefined,
  ) {}

  /** Whether any call may need a person: false without a policy (then `needs` is false for every call). */
  get asks(): boolean {
    return this.policy !== undefined;
  }

  /** Whether this call must wait for a person (never for a tool approved with `always`). */
  needs(call: ApprovalCall): boolean {
    const { policy } = this;
    if (policy === undefined || this.always.has(call.tool)) return false;
    if (policy === 'all') return true;
    if (typeof policy === 'function') return policy(call);
    return policy.includes(call.tool);
  }

  /** Whether `tool` was approved for the rest of the run. */
  alwaysApproved(tool: string): boolean {
    return this.always.has(tool);
  }

  /** Tools approved for the rest of the run (a resumed run's, from its journal). */
  approveAlways(tools: Iterable<string>): void {
    for (const tool of tools) this.always.add(tool);
  }

  /** A session waits on this call: the request goes to the host. */
  request(request: ApprovalRequest, session: AnyActorRef): void {
    this.pending.set(request.callId, { request, session });
    this.onRequest?.(request);
  }

  /** The call no longer waits (answered, or its session ended). */
  settle(callId: string): void {
    this.pending.delete(callId);
  }

  /**
   * Calls still waiting, oldest first. Those of sessions that have ended (stopped from outside) are
   * dropped; a request made as its session enters `awaitingApproval` (before that snapshot is
   * committed) counts.
   */
  waiting(): ApprovalRequest[] {
    const out: ApprovalRequest[] = [];
    for (const [callId, { request, session }] of this.pending) {
      const snapshot = session.getSnapshot() as { status?: string };
      if (snapshot.status === 'active') out.push(request);
      else this.pending.delete(callId);
    }
    return out;
  }

  /**
   * Routes an answer to the session that holds the call. `always` also approves the other calls
   * of that tool already waiting. Returns false for a call that is not waiting.
   */
  respond(answer: ApprovalAnswer): boolean {
    const entry = this.pending.get(answer.callId);
    if (!entry) return false;
    if (answer.decision === 'always') {
      this.always.add(entry.request.tool);
      for (const [callId, other] of [...this.pending]) {
        if (callId === answer.callId || other.request.tool !== entry.request.tool) continue;
        this.pending.delete(callId);
        other.session.send({ type: 'approval.answer', callId, decision: 'approve' } satisfies ApprovalAnswerEvent);
      }
    }
    this.pending.delete(answer.callId);
    entry.session.send({ type: 'approval.answer', ...answer } satisfies ApprovalAnswerEvent);
    return true;
  }
}

/** What `respond` needs of a root actor: its tree's desk (every session actor has one). */
export interface ApprovalRoot {
  getSnapshot(): { readonly context: { readonly options: { readonly approvals: ApprovalDesk } } };
}

/**
 * Answers a call waiting for approval anywhere in the tree of `root` (by its `tool_use` id, as the
 * `ApprovalRequest` gave it): exactly that call is resumed. Returns false for a call that is not
 * waiting (answered already, or its session ended).
 *
 * @example
 * ```ts
 * const root = createSessionActor({ provider, tools, task, approve: ['write_file'], onApprovalRequest: (r) => {
 *   respond(root, { callId: r.callId, decision: r.input['path'] === 'notes.md' ? 'approve' : 'deny', reason: 'only notes.md' });
 * } });
 * ```
 */
export function respond(root: ApprovalRoot, answer: ApprovalAnswer): boolean {
  return root.getSnapshot().context.options.approvals.respond(answer);
}

/** The `is_error` result a denied call gets. */
export function denialMessage(tool: string, reason: string | undefined): string {
  const why = reason?.trim();
  return `tool '${tool}' was not run: a person denied this call${why ? `: ${why}` : ''}`;
}

/** Checks a policy given by a host; throws one line for anything else. */
export function checkApprovalPolicy(policy: unknown): ApprovalPolicy | undefined {
  if (policy === undefined || policy === 'all' || typeof policy === 'function') return policy as ApprovalPolicy | undefined;
  if (Array.isArray(policy) && policy.every((name) => typeof name === 'string')) return policy as readonly string[];
  throw new TypeError("exarch: `approve` must be a list of tool names, 'all', or a function of the call");
}

interface SessionLike {
  readonly status: string;
  readonly value: unknown;
  readonly context: {
    readonly agent: AgentIdentity;
    readonly pendingUser: readonly unknown[];
    readonly inbox: readonly unknown[];
    readonly options: { readonly wake: 'each' | 'all' };
    readonly children: { readonly size: number };
  };
  readonly children: Readonly<Record<string, AnyActorRef | undefined>>;
}

function isSession(snapshot: unknown): snapshot is SessionLike {
  const s = snapshot as Partial<SessionLike> | undefined;
  return typeof s?.context === 'object' && s.context !== null && 'agent' in s.context;
}

/**
 * Whether nothing in the tree of `root` can move until a person answers: every session that is not
 * final waits for approval, or for sub-agents (resting, or in `waitingForAgents`) that all do. A
 * host with no one to ask stops the run then (the CLI's `waiting`), and not before: the rest of the
 * tree finishes what it can first.
 */
export function blockedOnApprovals(root: AnyActorRef): boolean {
  let waitsForPerson = false;
  const blocked = (actor: AnyActorRef): boolean => {
    const snapshot = actor.getSnapshot() as unknown;
    if (!isSession(snapshot)) return Object.values((snapshot as { children?: Record<string, AnyActorRef> }).children ?? {}).every((child) => blocked(child));
    if (snapshot.status !== 'active') return true;
    const { context, value } = snapshot;
    if (value === 'awaitingApproval') {
      waitsForPerson = true;
    } else if (value === 'readyForUser') {
      // A turn about to start (a message, results that wake it) is work still to do.
      const wakes = context.inbox.length > 0 && (context.options.wake === 'each' || context.children.size === 0);
      if (context.pendingUser.length > 0 || wakes) return false;
    } else if (value !== 'waitingForAgents') {
      return false;
    }
    return Object.values(snapshot.children).every((child) => child === undefined || blocked(child));
  };
  return blocked(root) && waitsForPerson;
}
