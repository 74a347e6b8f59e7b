import { describe, expect, it } from 'vitest';
import type { AnyTransitionDefinition, EventObject } from 'xstate';
import { TestModel, type TestParam, type TestPath } from 'xstate/graph';
import type { SessionSnapshot } from '../src/index.js';
import { sessionStatechart } from '../src/statechart/extract.js';
import { PathDriver } from './support/modelDriver.js';
import { describeEvent, eventsFor, machineEdges, machineStates, stateKey, traversableSession, type ModelEvent, type ModelKind } from './support/sessionModel.js';

/**
 * Model-based tests of the session machine (issue 5).
 *
 * `xstate/graph` generates paths over the machine itself (see test/support/sessionModel.ts): the
 * shortest path to every abstract state the machine can reach, where a state is told apart also
 * by the transition that entered it, so every transition gets a path of its own. Each path is then
 * driven against a real session (test/support/modelDriver.ts), which must pass through the same
 * abstract states by the same transitions, and every state's invariants are checked on the way.
 * Coverage of the machine's states and transitions is counted from the real runs and must be 100%.
 */

type Path = TestPath<SessionSnapshot, ModelEvent>;

const edges = machineEdges();
const edgeIndex = new Map<AnyTransitionDefinition, number>(edges.map((edge, i) => [edge.transition, i]));
const allStates = machineStates();

const reached = { states: new Set<string>(), transitions: new Set<number>(), predicted: new Set<number>(), paths: 0, steps: 0 };

function edgeIds(transitions: readonly AnyTransitionDefinition[]): number[] {
  return transitions.flatMap((t) => (edgeIndex.has(t) ? [edgeIndex.get(t) as number] : []));
}

function buildModel(kind: ModelKind, events: (snapshot: SessionSnapshot) => ModelEvent[] = eventsFor(kind)) {
  const session = traversableSession(kind);
  const model = new TestModel(session.logic, {
    events,
    // The abstract state and the transition that entered it: a path per transition, not just per state.
    serializeState: (snapshot) => `${stateKey(snapshot)} via ${edgeIds(session.taken.get(snapshot) ?? []).join(',')}`,
    serializeEvent: (event) => `${describeEvent(event)} ${JSON.stringify(event)}`,
  });
  return { session, model };
}

/** Runs one path against a real session; returns what went wrong (nothing, when it passed). */
async function drive(kind: ModelKind, path: Path, taken: WeakMap<SessionSnapshot, readonly AnyTransitionDefinition[]>): Promise<string | undefined> {
  const driver = new PathDriver(kind);
  const perform = (step: { event: ModelEvent }): Promise<void> => driver.perform(step.event);
  // Every event type (child actor ids included) is performed by the driver.
  const events = new Proxy({}, { get: () => perform }) as TestParam<SessionSnapshot, ModelEvent>['events'];
  const description = path.steps.map((s) => describeEvent(s.event as EventObject)).join(' → ');
  try {
    await path.test({ events, states: { '*': (snapshot) => driver.reach(stateKey(snapshot)) } });
    const expectedKeys = collapse(path.steps.map((s) => stateKey(s.state)));
    const realKeys = driver.trail();
    if (JSON.stringify(realKeys) !== JSON.stringify(expectedKeys)) {
      return `${description}\n  the real session took other states:\n  model: ${expectedKeys.join('\n         ')}\n  real:  ${realKeys.join('\n         ')}`;
    }
    const predicted = path.steps.flatMap((s) => edgeIds(taken.get(s.state) ?? []));
    const real = edgeIds(driver.transitions.slice(0, driver.transitionsAt(driver.trail().length - 1)));
    if (JSON.stringify(real) !== JSON.stringify(predicted)) {
      const names = (ids: number[]): string => ids.map((i) => edges[i]?.label).join('\n         ');
      return `${description}\n  the real session took other transitions:\n  model: ${names(predicted)}\n  real:  ${names(real)}`;
    }
    for (const id of predicted) reached.predicted.add(id);
    for (const id of real) reached.transitions.add(id);
    for (const state of driver.states) reached.states.add(state);
  } catch (error) {
    return `${description}\n  ${error instanceof Error ? error.message.split('\nPath:')[0] : String(error)}`;
  } finally {
    await driver.stop();
  }
  if (driver.violations.length > 0) return `${description}\n  ${driver.violations.join('\n  ')}`;
  return undefined;
}

function collapse(keys: readonly string[]): string[] {
  return keys.filter((key, i) => key !== keys[i - 1]);
}

async function runAll(kind: ModelKind, paths: Path[], taken: WeakMap<SessionSnapshot, readonly AnyTransitionDefinition[]>): Promise<void> {
  const failures: string[] = [];
  for (const path of paths) {
    const failure = await drive(kind, path, taken);
    if (failure) failures.push(failure);
    reached.paths += 1;
    reached.steps += path.steps.length;
  }
  expect(failures.slice(0, 5), `${failures.length} of ${paths.length} paths failed`).toEqual([]);
}

describe('model-based: every transition of the session machine, driven against real sessions', () => {
  for (const kind of ['root', 'sub'] as const) {
    it(`${kind === 'root' ? 'the root' : 'a sub-agent'}: each shortest path takes the same states and transitions in a real session, and every state's invariants hold`, async () => {
      const { session, model } = buildModel(kind);
      const paths = model.getShortestPaths();
      expect(paths.length).toBeGreaterThan(100);
      await runAll(kind, paths, session.taken);
    }, 300_000);
  }

  it('a quiet sub-agent: every simple path to a final state (reply reminder at most once, capped only at the cap, replied with the rendered payload)', async () => {
    // No children, no cancellation: the region where the reply reminder, truncation and the cap meet.
    const all = eventsFor('sub');
    const variants = new Set(['text', 'empty', 'truncatedText', 'pause', 'work', 'cutOffCall', 'reply:string']);
    const events = (snapshot: SessionSnapshot): ModelEvent[] =>
      all(snapshot).filter((e) => e.type === 'tick' || e.type === 'batch.drained' || e.type === 'tool.settled' || (e.type === 'model.done' && variants.has(e.variant)));
    const { session, model } = buildModel('sub', events);
    const paths = model.getSimplePaths({ toState: (snapshot) => snapshot.status !== 'active' });
    expect(paths.length).toBeGreaterThan(100);
    await runAll('sub', paths, session.taken);
  }, 300_000);

  it('the paths cover 100% of the states and transitions of the machine', () => {
    const chart = sessionStatechart();
    // The statechart data (src/statechart) and the edges read here describe the same machine.
    expect(edges.map((e) => e.label.split(' ')[0])).toEqual(chart.transitions.map((t) => t.source));
    expect(allStates).toEqual(chart.states.map((s) => s.id));
    const missingStates = allStates.filter((s) => !reached.states.has(s));
    const missing = edges.filter((_, i) => !reached.transitions.has(i)).map((e) => e.label);
    const missingInModel = edges.filter((_, i) => !reached.predicted.has(i)).map((e) => e.label);
    console.log(
      `model-based coverage: ${reached.paths} paths, ${reached.steps} steps; ` +
        `states ${allStates.length - missingStates.length}/${allStates.length} (${pct(allStates.length - missingStates.length, allStates.length)}), ` +
        `transitions ${edges.length - missing.length}/${edges.length} (${pct(edges.length - missing.length, edges.length)}) in real sessions, ` +
        `${edges.length - missingInModel.length}/${edges.length} in the model`,
    );
    expect(missingStates, 'states no real session reached').toEqual([]);
    expect(missing, 'transitions no real session took').toEqual([]);
    expect(missingInModel, 'transitions no generated path takes').toEqual([]);
  });
});

function pct(n: number, total: number): string {
  return `${Math.floor((1000 * n) / total) / 10}%`;
}


