import { createActor, type ActorOptions, type SnapshotFrom } from 'xstate';
import type { z } from 'zod';
import { sessionMachine } from '../../machines/session.js';
import { validateSessionInput } from '../../machines/sessionStart.js';
import type { SessionInput } from '../../machines/sessionTypes.js';
import { stopOrphansOf } from '../../machines/crew.js';
import { finalAssistantText } from '../engine/history.js';
import { sendFromOutside } from '../engine/inspection.js';
import { addUsage } from '../engine/usage.js';
import type { AgentOutcome, Usage } from '../engine/types.js';
import { withMcpTools, type McpOption } from '../tools/mcp/mcpOption.js';

export type SessionSnapshot = SnapshotFrom<typeof sessionMachine>;
export type SessionActor = ReturnType<typeof createSessionActor>;

/**
 * `createActor(sessionMachine, …)`, but bad input (a missing provider, a bad number, clashing
 * tool names, a history the API would refuse) throws here, at once, with a one-line message,
 * instead of surfacing later as an actor error.
 */
export function createSessionActor(input: SessionInput, options: Omit<ActorOptions<typeof sessionMachine>, 'input'> = {}) {
  validateSessionInput(input);
  return createActor(sessionMachine, { ...options, input });
}

/**
 * A session is settled when it reached a final state, or rests in `readyForUser` with nothing
 * left to do: no live children, an empty inbox and no queued user message.
 */
export function isSettled(snapshot: SessionSnapshot): boolean {
  if (snapshot.status !== 'active') return true;
  const { context } = snapshot;
  return snapshot.value === 'readyForUser' && context.children.size === 0 && context.inbox.length === 0 && context.pendingUser.length === 0;
}

/** Resolves with the first settled snapshot; rejects if the actor crashes or `signal` aborts. */
export function waitForSettled(actor: SessionActor, signal?: AbortSignal): Promise<SessionSnapshot> {
  return new Promise((resolve, reject) => {
    const check = (snapshot: SessionSnapshot): boolean => {
      if (snapshot.status === 'error') {
        reject(snapshot.error instanceof Error ? snapshot.error : new Error(String(snapshot.error)));
        return true;
      }
      if (isSettled(snapshot)) {
        resolve(snapshot);
        return true;
      }
      return false;
    };
    if (check(actor.getSnapshot())) return;
    const subscription = actor.subscribe({
      next: (snapshot) => {
        if (check(snapshot)) done();
      },
      error: (error) => {
        reject(error instanceof Error ? error : new Error(String(error)));
        done();
      },
    });
    const onAbort = (): void => {
      reject(signal?.reason ?? new Error('aborted'));
      done();
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    function done(): void {
      subscription.unsubscribe();
      signal?.removeEventListener('abort', onAbort);
    }
  });
}

export interface RunResult<V = unknown> {
  /** The state the root settled in. */
  readonly state: 'readyForUser' | AgentOutcome | 'finishedWithoutReply';
  /** The root's last assistant text. */
  readonly text: string;
  /** Tokens of the whole tree. */
  readonly usage: Usage;
  /** One line, when the root failed or was capped. */
  readonly reason?: string;
  /** With `output`: the root's reply, parsed by that schema (state `replied`); absent if it never gave a valid one. */
  readonly value?: V;
  readonly snapshot: SessionSnapshot;
}

/** What a settled root amounts to: its state, last text, the tree's tokens and why it failed or was capped. */
export function runResultOf(snapshot: SessionSnapshot, reason?: string): RunResult {
  const { context } = snapshot;
  const result = snapshot.status === 'done' ? snapshot.output : undefined;
  const why = reason ?? result?.reason;
  return {
    state: snapshot.value === 'readyForUser' ? 'readyForUser' : (result?.outcome ?? 'failed'),
    text: finalAssistantText(context.messages),
    usage: result?.usage ?? addUsage(context.usage, context.childUsage),
    ...(why === undefined ? {} : { reason: why }),
    ...(result !== undefined && 'value' in result ? { value: result.value } : {}),
    snapshot,
  };
}

/**
 * Runs a root agent on `task` until it settles, and returns its final text. The actor is
 * stopped at the end (its children with it); pass `signal` to cancel the whole tree. `mcp`
 * servers are connected first and closed at the end (see `McpOption`).
 *
 * With `output` (a zod object schema) the root is offered `reply` with that schema as its input
 * and ends by replying; `value` is the parsed reply, typed by the schema.
 *
 * @example
 * ```ts
 * const { value } = await runAgent('Triage ticket 42', { provider, output: z.object({ severity: z.enum(['low', 'high']) }) });
 * value?.severity; // 'low' | 'high' | undefined
 * ```
 */
export async function runAgent<S extends z.ZodType = z.ZodType<unknown>>(
  task: string,
  input: Omit<SessionInput, 'task' | 'agent' | 'output'> & { readonly output?: S } & McpOption,
  options: Omit<ActorOptions<typeof sessionMachine>, 'input'> & { signal?: AbortSignal } = {},
): Promise<RunResult<z.output<S>>> {
  const { signal, ...actorOptions } = options;
  const mcp = await withMcpTools(input);
  try {
    const actor = createSessionActor({ ...mcp.input, task }, actorOptions);
    const onAbort = (): void => sendFromOutside(actor, { type: 'cancel', reason: 'interrupted' });
    signal?.addEventListener('abort', onAbort, { once: true });
    actor.start();
    try {
      // The value was parsed by `input.output`, so it has that schema's output type.
      return runResultOf(await waitForSettled(actor)) as RunResult<z.output<S>>;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      actor.stop();
      // A root that crashed is not stopped by stop(): end what it had started (see stopOrphansOf).
      stopOrphansOf(actor);
    }
  } finally {
    await mcp.close();
  }
}
