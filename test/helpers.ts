import type { InspectionEvent } from 'xstate';
import { createSessionActor, waitForSettled, type SessionActor, type SessionInput, type SessionSnapshot } from '../src/index.js';
import { MemoryLogSink, ScriptedProvider, type Script, type ScriptedProviderOptions } from '../src/testing/index.js';
import type { Message } from '../src/engine/types.js';

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
  const snapshot = await waitForSettled(traced.actor);
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

/** Waits until `predicate` holds for the actor's snapshot. */
export function until(actor: SessionActor, predicate: (s: SessionSnapshot) => boolean): Promise<SessionSnapshot> {
  return new Promise((resolve) => {
    if (predicate(actor.getSnapshot())) return resolve(actor.getSnapshot());
    const sub = actor.subscribe((s) => {
      if (predicate(s)) {
        sub.unsubscribe();
        resolve(s);
      }
    });
  });
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
