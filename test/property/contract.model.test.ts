import { describe, expect, it } from 'vitest';
import type { SessionSnapshot } from '../../src/run/runtime.js';
import { contractStep, initialContractState, isFinal, type ContractEvent, type ContractState } from '../support/contractModel.js';
import {
  describeEvent,
  eventsFor,
  machineEdges,
  MODEL_LIMITS,
  needsApproval,
  traversableSession,
  type ModelEvent,
  type ModelKind,
} from '../support/sessionModel.js';

/**
 * The session machine against the contract's own statement of its transitions
 * (test/support/contractModel.ts, written from CONTRACT.md and sharing nothing with the machine).
 *
 * Every sequence of events the model-based tests offer is walked on both, up to a depth, from the
 * start of a root and of a sub-agent: after each event the machine's state must be the one the
 * contract names, and a sub-agent that replied must end with the outcome the contract gives its
 * payload. The contract side keeps its own counts (requests per turn, the one-shot reminder, the
 * truncation budget, children, inbox), so a step the machine forgets to count, a guard that lets
 * one request too many through, or a reminder fired twice shows up as a disagreement.
 */

const DEPTH = 9;

function contractEventOf(event: ModelEvent): ContractEvent {
  if (event.type === 'model.done') {
    const calls = event.output.content.flatMap((b) => (b.type === 'tool_use' ? [{ id: b.id, name: b.name, input: b.input }] : []));
    return { type: 'model.done', response: { stopReason: event.output.stopReason, calls, cutOff: event.output.incompleteToolUseIds ?? [] } };
  }
  if (event.type.startsWith('xstate.done.actor.') || event.type.startsWith('xstate.error.actor.')) return { type: 'child.finished' };
  if (event.type === 'xstate.init') throw new Error('xstate.init is never offered');
  if (event.type === 'approval.answer') return { type: 'approval.answer', decision: event.decision };
  return { type: event.type } as ContractEvent;
}

interface Disagreement {
  readonly path: readonly string[];
  readonly machine: string;
  readonly contract: string;
}

function walk(kind: ModelKind): { checked: number; disagreements: Disagreement[]; labels: Set<string> } {
  const session = traversableSession(kind);
  const events = eventsFor(kind);
  const seen = new Set<string>();
  const disagreements: Disagreement[] = [];
  const labels = new Set<string>();
  let checked = 0;
  const edgeLabel = new Map(machineEdges().map((e) => [e.transition, e.label]));

  const visit = (snapshot: SessionSnapshot, contract: ContractState, path: readonly string[]): void => {
    if (path.length >= DEPTH || snapshot.status !== 'active' || isFinal(contract) || disagreements.length > 20) return;
    const key = `${String(snapshot.value)}|${JSON.stringify(contract)}|${snapshot.context.batch?.results.size ?? 0}`;
    if (seen.has(key)) return;
    seen.add(key);
    for (const event of events(snapshot)) {
      const next = session.logic.transition(snapshot, event, undefined as never);
      for (const t of session.taken.get(next) ?? []) labels.add(edgeLabel.get(t) ?? '?');
      const predicted = contractStep(contract, contractEventOf(event), { ...MODEL_LIMITS, approve: needsApproval });
      const here = [...path, describeEvent(event)];
      checked += 1;
      const machineSays = `${String(next.value)}${next.status === 'done' && next.output ? ` (${next.output.outcome})` : ''}`;
      const contractSays = `${predicted.value}${predicted.value === 'replied' ? ` (${predicted.outcome ?? '?'})` : ''}`;
      const agrees =
        String(next.value) === predicted.value &&
        (predicted.value !== 'replied' || next.output?.outcome === predicted.outcome) &&
        (next.status === 'active') === !isFinal(predicted);
      if (!agrees) {
        disagreements.push({ path: here, machine: machineSays, contract: contractSays });
        continue;
      }
      visit(next, predicted, here);
    }
  };
  visit(session.initial, initialContractState(kind), []);
  return { checked, disagreements, labels };
}

describe('the session machine takes the transitions CONTRACT.md states', () => {
  it.each(['root', 'sub'] as const)('a %s session, every event sequence up to 9 deep', (kind) => {
    const { checked, disagreements } = walk(kind);
    // Every disagreement, with the events that led to it, so a failure says what differs.
    expect(disagreements.map((d) => `${d.path.join(' → ')}: machine ${d.machine}, contract ${d.contract}`)).toEqual([]);
    console.info(`${kind}: ${checked} transitions checked against the contract`);
    expect(checked).toBeGreaterThan(1_000);
  });

  it('together the walks take every transition of the machine but the eventless ones out of starting', () => {
    const taken = new Set([...walk('root').labels, ...walk('sub').labels]);
    // `starting`'s eventless transitions are taken only as a session is made (the walk starts past
    // them); the rest, its tick included, must all be exercised.
    const missed = machineEdges()
      .map((e) => e.label)
      .filter((label) => !taken.has(label) && !label.startsWith('starting --always'));
    expect(missed).toEqual([]);
  });
});
