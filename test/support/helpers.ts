import type { InspectionEvent } from 'xstate';
import { createSessionActor, waitForSettled, type SessionActor, type SessionInput, type SessionSnapshot } from '../../src/index.js';
import { MemoryLogSink, ScriptedProvider, type Script, type ScriptedProviderOptions } from '../../src/testing/index.js';
import type { Message } from '../../src/engine/types.js';

/** State values each session passed through, by agent id, in order (consecutive repeats collapsed). */
type StateTrail = Map<string, string[]>;

export interface Traced {
  readonly actor: SessionActor;
  readonly provider: ScriptedProvider;
  readonly logs: MemoryLogSink;
  readonly trail: StateTrail;
  /** Each session's last snapshot, by agent id (children are gone from the tree once finished). */
  readonly last: Map<string, SessionSnapshot>;
}

function isSessionSnapshot(snapshot: unknown): snapshot is SessionSnapshot {
  return (
    typeof snapshot === 'object' &&
    snapshot !== null &&
    'context' in snapshot &&
    typeof (snapshot as { context: unknown }).context === 'object' &&
    (snapshot as { context: { agent?: unknown } }).context?.agent !== undefined
  );
}

/** Starts a root session with a scripted provider and an in-memory log, recording every session's states. */
export function startTraced(script: ScriptedProviderOptions['agents'], input: Omit<SessionInput, 'provider'> = {}): Traced {
  const provider = new ScriptedProvider({ agents: script });
  const logs = new MemoryLogSink();
  const trail: StateTrail = new Map();
  const last = new Map<string, SessionSnapshot>();
  const inspect = (event: InspectionEvent): void => {
    if (event.type !== '@xstate.snapshot' || !isSessionSnapshot(event.snapshot)) return;
    const snapshot = event.snapshot;
    const id = snapshot.context.agent.id;
    last.set(id, snapshot);
    const states = trail.get(id) ?? [];
    const value = String(snapshot.value);
    if (states[states.length - 1] !== value) states.push(value);
    trail.set(id, states);
  };
  const actor = createSessionActor({ logs, ...input, provider }, { inspect });
  actor.start();
  return { actor, provider, logs, trail, last };
}

/** Runs until the root settles; returns the root's settled snapshot. */
export async function runTraced(
  script: ScriptedProviderOptions['agents'],
  input: Omit<SessionInput, 'provider'> = {},
): Promise<Traced & { snapshot: SessionSnapshot }> {
  const traced = startTraced(script, input);
  const snapshot = await withinSessionWait(waitForSettled(traced.actor), () => `the root did not settle: ${trailText(traced)}`);
  // Every request of every test goes through the one pairing check.
  if (traced.provider.pairingViolations.length > 0) {
    throw new Error(`requests broke the pairing rule: ${JSON.stringify(traced.provider.pairingViolations)}`);
  }
  return { ...traced, snapshot };
}

/** The text of every user message the session sent, joined. */
export function userTexts(messages: readonly Message[]): string[] {
  return messages.filter((m) => m.role === 'user').flatMap((m) => m.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])));
}

export function toolResults(messages: readonly Message[]) {
  return messages.flatMap((m) => (m.role === 'user' ? m.content.filter((b) => b.type === 'tool_result') : []));
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * How long the helpers here wait for a session before failing with what they saw. A scripted
 * session takes milliseconds; this stays below the suite's test timeout (and, at the 5 s
 * vitest.mutate.config.ts sets, below Stryker's 10-s minimum per mutant), so a session that
 * stalls (a bug, a mutant) fails its test, saying where it rests, instead of running into a
 * timeout that says nothing.
 */
const SESSION_WAIT_MS = Number(process.env['EXARCH_TEST_SESSION_WAIT_MS'] ?? 20_000);

/** Each session's states so far, agent by agent: `root: streaming → readyForUser; root/kid: streaming`. */
function trailText(traced: Traced): string {
  return [...traced.trail].map(([agent, states]) => `${agent}: ${states.join(' → ')}`).join('; ');
}

/** Settles as `promise` does, or fails after SESSION_WAIT_MS with the line `what` gives then. */
export function withinSessionWait<T>(promise: Promise<T>, what: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what()} (waited ${SESSION_WAIT_MS} ms)`)), SESSION_WAIT_MS);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

/** `waitForSettled`, failing after SESSION_WAIT_MS with where the session rests and what it waits on. */
export function untilSettled(actor: SessionActor): Promise<SessionSnapshot> {
  return withinSessionWait(waitForSettled(actor), () => {
    const { value, context } = actor.getSnapshot();
    return `the session did not settle: it rests in '${String(value)}' with ${context.children.size} sub-agent(s) running, ${context.inbox.length} result(s) in its inbox and ${context.pendingUser.length} queued message(s)`;
  });
}

/**
 * Waits until `predicate` holds for the actor's snapshot. Fails at once if the session ends (or
 * crashes) first, and after SESSION_WAIT_MS if it never holds, each time naming the states the
 * session passed through.
 */
export function until(actor: SessionActor, predicate: (s: SessionSnapshot) => boolean): Promise<SessionSnapshot> {
  const seen: string[] = [];
  const note = (s: SessionSnapshot): void => {
    const value = String(s.value);
    if (seen[seen.length - 1] !== value) seen.push(value);
  };
  const states = (): string => seen.join(' → ');
  let unsubscribe = (): void => undefined;
  const reached = new Promise<SessionSnapshot>((resolve, reject) => {
    const check = (s: SessionSnapshot): boolean => {
      note(s);
      if (predicate(s)) resolve(s);
      else if (s.status === 'error') reject(new Error(`the session crashed before the awaited condition held: ${String(s.error)}; its states: ${states()}`));
      else if (s.status !== 'active') reject(new Error(`the session ended (${s.status}) before the awaited condition held; its states: ${states()}`));
      else return false;
      return true;
    };
    if (check(actor.getSnapshot())) return;
    const sub = actor.subscribe({
      next: (s) => void (check(s) && sub.unsubscribe()),
      error: () => void (check(actor.getSnapshot()) && sub.unsubscribe()),
    });
    unsubscribe = () => sub.unsubscribe();
  });
  return withinSessionWait(reached, () => `the awaited condition did not hold; the session's states: ${states()}`).finally(unsubscribe);
}

/** The root's script: it gives `name` the `task`, waits for it, then ends with "done". */
export function delegating(name: string, task: string): Script {
  return [
    {
      calls: [
        { name: 'agent', input: { name, task } },
        { name: 'wait_for_agents', input: {} },
      ],
    },
    { text: 'done' },
  ];
}
