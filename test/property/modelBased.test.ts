import { describe, expect, it } from 'vitest';
import type { AnyTransitionDefinition, EventObject } from 'xstate';
import { TestModel, type TestParam, type TestPath } from 'xstate/graph';
import type { SessionSnapshot } from '../../src/index.js';
import { sessionStatechart } from '../../src/watch/statechart/extract.js';
import { MemoryRunStore } from '../../src/store/memoryStore.js';
import { restoreRun } from '../../src/store/restoreRun.js';
import type { JournalRow } from '../../src/store/runStore.js';
import { RecordingStore } from '../support/durableStore.js';
import { PathDriver, saidBy } from '../support/modelDriver.js';
import {
  describeEvent,
  eventsFor,
  machineEdges,
  machineStates,
  pendingRuns,
  stateKey,
  traversableSession,
  type ModelEvent,
  type ModelKind,
  type TraversableSession,
} from '../support/sessionModel.js';

/**
 * Model-based tests of the session machine (issue 5).
 *
 * `xstate/graph` generates paths over the machine itself (see test/support/sessionModel.ts): the
 * shortest path to every abstract state the machine can reach, where a state is told apart also
 * by the transition that entered it, so every transition gets a path of its own. Each path is then
 * driven against a real session (test/support/modelDriver.ts), which must pass through the same
 * abstract states by the same transitions, and every state's invariants are checked on the way.
 * Coverage of the machine's states and transitions is counted from the real runs and must be 100%:
 * the `starting` transitions into `streaming`, `dispatchingBatch` and `nudged` are taken only by
 * sessions resumed from a journal, which the durable tests below make (a crash at a step of a
 * path, a resume, the rest of the path).
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
    countReal(driver, real);
  } catch (error) {
    return `${description}\n  ${error instanceof Error ? error.message.split('\nPath:')[0] : String(error)}`;
  } finally {
    await driver.stop();
  }
  if (driver.violations.length > 0) return `${description}\n  ${driver.violations.join('\n  ')}`;
  return undefined;
}

/** A state counts as reached when a real session rested in it or left it (a resumed session leaves `starting` in the macrostep that enters it). */
function countReal(driver: PathDriver, real: readonly number[]): void {
  for (const id of real) {
    reached.transitions.add(id);
    const source = edges[id]?.label.split(' ')[0];
    if (source !== undefined && source !== '*') reached.states.add(source);
  }
  for (const state of driver.states) reached.states.add(state);
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
      const { session, paths } = shortestPaths(kind);
      expect(paths.length).toBeGreaterThan(100);
      await runAll(kind, paths, session.taken);
    }, 300_000);
  }

  it('a quiet sub-agent: every simple path to a final state (reply reminder at most once, capped only at the cap, replied with the rendered payload)', async () => {
    // No children, no cancellation: the region where the reply reminder, truncation and the cap meet.
    const all = eventsFor('sub');
    const variants = new Set(['text', 'empty', 'truncatedText', 'pause', 'work', 'cutOffCall', 'reply:string']);
    const events = (snapshot: SessionSnapshot): ModelEvent[] =>
      all(snapshot).filter(
        (e) => e.type === 'tick' || e.type === 'batch.drained' || e.type === 'tool.settled' || (e.type === 'model.done' && variants.has(e.variant)),
      );
    const { session, model } = buildModel('sub', events);
    const paths = model.getSimplePaths({ toState: (snapshot) => snapshot.status !== 'active' });
    expect(paths.length).toBeGreaterThan(100);
    await runAll('sub', paths, session.taken);
  }, 300_000);
});

// ---------------------------------------------------------------------------------------------
// Durable sessions: persist at a reachable state, crash, resume from the journal, drive the rest

/**
 * The same paths, driven against a durable real session (journaled into a `MemoryRunStore`, each
 * append kept as a frozen copy: test/support/durableStore.ts). At a chosen step of the path the
 * process 'crashes': the store is taken as its last append left it, the session is stopped, and a
 * new session made from the journal (`restoreRun` + the session's `restore` input) takes over. The
 * rest of the path is driven against the resumed session, which must go through the model's
 * states by the model's transitions, with every invariant of the driver still holding.
 *
 * Where the resumed session starts: at the state whose records the last append holds (the driver
 * tags each append with the abstract state the session was in, or entered, as it was written). That
 * is the crash step, except after a transition that writes nothing (`nudged --tick--> streaming`):
 * the journal still says `nudged`, so the resumed session rests in `nudged` again and ticks on.
 * The model predicts how a session is taken up (`TraversableSession.resume`: the machine's own
 * `starting` transitions from a restore built from the model snapshot, not from the journal).
 *
 * What legitimately differs after a resume, and how the driver handles it:
 * - the process, its provider and its tool gates are new: a resumed `streaming` session asks the
 *   model again, and the path's next response answers that new request;
 * - the work tool is idempotent here, so a call in flight at the crash is run again: the resumed
 *   session starts exactly the calls with no result in the journal (checked), and the path's next
 *   `tool.settled` answers the re-run (a non-idempotent tool: see the test after this one);
 * - children still running are taken up too (re-asking, or starting afresh on their task) and wait
 *   at the new gates; the path's child events release them there;
 * - the resumed session starts with its journal's latch counts, so its first snapshot is not a
 *   step that fired a latch (its stateKey, latch counts included, must equal the crashed state's);
 * - the responses committed before the crash are in the resumed history from the start.
 *
 * The crash: after the crash step's state is reached, the store is taken as the last append
 * written while the session was at or before that step left it (in a state the session leaves by
 * itself, such as `nudged`, it may already have gone on: what it wrote since never happened), and
 * the crashed session is stopped.
 *
 * Crash points: one per shortest path, at a step drawn from a fixed seed among the steps in an
 * active state with a step after them (so the resumed session is always driven on); then, for
 * every active abstract state no resumed session started in, up to 4 more crashes at steps in that
 * state (first paths first). A state only ever reached behind the unjournaled tick cannot be a
 * journal's state: it counts once a session resumed in `nudged` has ticked into it. The test
 * fails if any active abstract state of the paths is left uncovered.
 */

const CRASH_SEED = 0x5eed;

/** A deterministic pick in [0, n): a hash of the seed and the path's index. */
function pick(index: number, n: number): number {
  let h = (CRASH_SEED ^ Math.imul(index + 1, 0x9e3779b1)) >>> 0;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0;
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35) >>> 0;
  return ((h ^ (h >>> 16)) >>> 0) % n;
}

const durable = {
  runs: 0,
  resumed: 0,
  /** Crashes where the root was at rest: the run is finished, there is nothing to resume. */
  settled: 0,
  /** Crashes behind the tick out of `nudged` (it writes nothing): the resumed session rests in `nudged` again first. */
  behind: 0,
  unknownChecks: 0,
  /** Idempotent work calls in flight at a crash, run again by the resumed session. */
  reruns: 0,
  resumeEdges: new Map<string, number>(),
};

interface CrashRun {
  readonly failure?: string;
  /**
   * The abstract state the journal held at the crash: the resumed session's first (or, for a root
   * at rest, the state of the run found finished).
   */
  readonly resumedKey?: string;
  /** The abstract states the resumed session went through. */
  readonly trail?: readonly string[];
}

/**
 * The work calls of `session`'s open batch that have no result in the journal `rows` (a plain scan:
 * the batch is open when its response is the session's last message record).
 */
function inFlightAt(rows: readonly JournalRow[], session: string): string[] {
  const own = rows.filter((r) => r.session === session);
  const lastMessage = own.findLast((r) => r.record.type === 'message');
  if (lastMessage?.record.type !== 'message' || lastMessage.record.role !== 'assistant') return [];
  const after = own.filter((r) => r.seq > lastMessage.seq);
  // Issue 17: nothing of a batch runs while it waits for a person, and a denied call never runs.
  if (after.some((r) => r.record.type === 'awaiting') && !after.some((r) => r.record.type === 'dispatching')) return [];
  const answered = new Set(
    after.flatMap((r) =>
      r.record.type === 'tool' ? [r.record.result.tool_use_id] : r.record.type === 'approval' && r.record.decision === 'deny' ? [r.record.callId] : [],
    ),
  );
  return lastMessage.record.content.flatMap((b) => (b.type === 'tool_use' && b.name === 'work' && !answered.has(b.id) ? [b.id] : []));
}

/** `restoreRun` restores a run from its root session; the sub-agent under test is journaled under its own id. */
function asRunJournal(rows: readonly JournalRow[], sutId: string): JournalRow[] {
  return rows.map((row) => (row.session === sutId ? { ...row, session: 'root' } : row));
}

function atRest(snapshot: SessionSnapshot): boolean {
  const c = snapshot.context;
  return snapshot.status === 'active' && snapshot.value === 'readyForUser' && c.children.size === 0 && c.inbox.length === 0 && c.pendingUser.length === 0;
}

/** The collapsed index of each step's state (see `collapse`). */
function collapsedIndices(keys: readonly string[]): number[] {
  const out: number[] = [];
  keys.forEach((key, i) => {
    out.push(i === 0 ? 0 : (out[i - 1] as number) + (key === keys[i - 1] ? 0 : 1));
  });
  return out;
}

function namesOf(ids: readonly number[]): string {
  return ids.map((i) => edges[i]?.label).join('\n         ');
}

/**
 * Whether step `j` is a `streaming` entered by the tick out of `nudged` (the one transition that
 * writes nothing to the journal), with only records that leave the state as it is (a child's
 * result, a queued user message: `*` transitions) written since: its journal still says `nudged`.
 */
function behindUnjournaledTick(steps: Path['steps'], j: number, session: TraversableSession): boolean {
  for (let i = j; i > 0; i--) {
    const labels = edgeIds(session.taken.get((steps[i] as Path['steps'][number]).state) ?? []).map((id) => edges[id]?.label ?? '?');
    if (labels.includes('nudged --tick--> streaming')) return true;
    if (labels.length === 0 || !labels.every((label) => label.startsWith('* '))) return false;
  }
  return false;
}

/** Drives `path` durably, crashes after step `crashAt`, resumes from the journal and drives the rest. */
async function driveDurable(kind: ModelKind, path: Path, session: TraversableSession, crashAt: number, runId: string): Promise<CrashRun> {
  const steps = path.steps;
  const keys = steps.map((s) => stateKey(s.state));
  const expected = collapse(keys);
  const collapsedAt = collapsedIndices(keys);
  const description = steps.map((s, i) => `${describeEvent(s.event as EventObject)}${i === crashAt ? ' ⚡crash' : ''}`).join(' → ');
  const crashing = new Set<string>();
  const store = new RecordingStore(new MemoryRunStore());
  const crashed = new PathDriver(kind, { store, runId, nextSeq: 1, idempotent: true, crashing });
  let resumed: PathDriver | undefined;
  let crashedStopped = false;
  const fail = (why: string): CrashRun => ({ failure: `${description}\n  ${why}` });
  durable.runs += 1;
  const attempt = async (): Promise<CrashRun> => {
    for (let i = 0; i <= crashAt; i++) {
      const step = steps[i] as Path['steps'][number];
      await crashed.perform(step.event);
      await crashed.reach(keys[i] as string);
    }
    // The crashed process went the model's way up to the crash.
    if (crashed.keys.some((key, i) => key !== expected[i]))
      return fail(
        `before the crash the real session took other states:\n  model: ${expected.join('\n         ')}\n  real:  ${crashed.keys.join('\n         ')}`,
      );
    const predictedBefore = steps.slice(0, crashAt + 1).flatMap((s) => edgeIds(session.taken.get(s.state) ?? []));
    const realBefore = edgeIds(crashed.transitions.slice(0, crashed.transitionsAt(collapsedAt[crashAt] as number)));
    if (JSON.stringify(realBefore) !== JSON.stringify(predictedBefore))
      return fail(`before the crash the real session took other transitions:\n  model: ${namesOf(predictedBefore)}\n  real:  ${namesOf(realBefore)}`);
    for (const id of predictedBefore) reached.predicted.add(id);
    countReal(crashed, realBefore);

    await crashed.journalWritten();
    // The crash: the store as it was after the last append written at or before step `crashAt` (in a
    // state the session leaves by itself, it may have gone on meanwhile: those appends never happened).
    const last = crashed.appends.filter((a) => a.key !== undefined && a.key <= (collapsedAt[crashAt] as number)).at(-1);
    if (!last || last.key === undefined) return fail('nothing was journaled by the crash');
    const at = steps.flatMap((_, i) => (collapsedAt[i] === last.key ? [i] : []));
    if (at.length !== 1) return fail(`the journal's state at the crash stands for ${at.length} steps of the path`);
    const j = at[0] as number;
    crashedStopped = true;
    await crashed.stop();
    const rows = last.frozen.store.journal(runId);
    const snapshot = steps[j]?.state as SessionSnapshot;
    const restored = restoreRun(asRunJournal(rows, crashed.sutId));
    if (kind === 'root' && atRest(snapshot)) {
      // A root at rest with nothing left to do is a finished run: nothing to take up.
      durable.settled += 1;
      return restored.kind === 'settled' ? { resumedKey: keys[j] as string } : fail(`the root was at rest at the crash, but restoreRun says ${restored.kind}`);
    }
    if (restored.kind !== 'resumable') return fail(`at the crash the session was ${String(snapshot.value)}, but restoreRun says ${restored.kind}`);
    // The model's resume: into the state as journaled, then (behind an unjournaled tick) on to the crashed one.
    const behind = behindUnjournaledTick(steps, j, session);
    const model = session.resume(snapshot, true, behind ? 'nudged' : undefined);
    const resumedKeys = [stateKey(model.snapshot)];
    const predictedStart = edgeIds(model.taken);
    if (behind) {
      const ticked = session.logic.transition(model.snapshot, { type: 'tick' }, undefined as never);
      resumedKeys.push(stateKey(ticked));
      predictedStart.push(...edgeIds(session.taken.get(ticked) ?? []));
      durable.behind += 1;
    }
    if (resumedKeys.at(-1) !== keys[j])
      return fail(`the model resumes into another state:\n  crashed: ${keys[j]}\n  resumed: ${resumedKeys.join('\n           ')}`);

    // The new process: a session made from the journal, with new gates.
    const said = steps.slice(0, j + 1).flatMap((s) => (s.event.type === 'model.done' ? saidBy(s.event.output) : []));
    const nextSeq = (rows.at(-1)?.seq ?? 0) + 1;
    resumed = new PathDriver(kind, {
      store: new RecordingStore(last.frozen.store.clone()),
      runId,
      nextSeq,
      idempotent: true,
      restore: restored.root,
      said,
      crashing,
    });
    await resumed.perform({ type: 'xstate.init' });
    // Behind a tick, the tick happens before anything else of the path (as it did in the crashed process).
    for (const key of resumedKeys) await resumed.reach(key);
    // Exactly the work calls with no result in the journal are run again (the tool is idempotent),
    // as many as the model has pending (whether the crashed process had started them or not).
    const inFlight = inFlightAt(rows, crashed.sutId);
    const rerun = [...resumed.workStarted];
    const pending = snapshot.value === 'dispatchingBatch' ? pendingRuns(snapshot).length : 0;
    if (inFlight.length !== pending || JSON.stringify([...rerun].sort()) !== JSON.stringify([...inFlight].sort())) {
      return fail(`the resumed session ran ${JSON.stringify(rerun)} again; the journal has ${JSON.stringify(inFlight)} in flight, the model ${pending}`);
    }
    durable.reruns += rerun.length;
    for (let i = j + 1; i < steps.length; i++) {
      const step = steps[i] as Path['steps'][number];
      await resumed.perform(step.event);
      await resumed.reach(keys[i] as string);
    }
    const expectedAfter = collapse([...resumedKeys, ...keys.slice(j + 1)]);
    if (JSON.stringify(resumed.trail()) !== JSON.stringify(expectedAfter)) {
      return fail(`the resumed session took other states:\n  model: ${expectedAfter.join('\n         ')}\n  real:  ${resumed.trail().join('\n         ')}`);
    }
    const predictedAfter = [...predictedStart, ...steps.slice(j + 1).flatMap((s) => edgeIds(session.taken.get(s.state) ?? []))];
    const realAfter = edgeIds(resumed.transitions.slice(0, resumed.transitionsAt(resumed.trail().length - 1)));
    if (JSON.stringify(realAfter) !== JSON.stringify(predictedAfter))
      return fail(`the resumed session took other transitions:\n  model: ${namesOf(predictedAfter)}\n  real:  ${namesOf(realAfter)}`);
    for (const id of predictedAfter) reached.predicted.add(id);
    countReal(resumed, realAfter);
    const entry = edges[edgeIds(model.taken)[0] ?? -1]?.label ?? '?';
    durable.resumeEdges.set(entry, (durable.resumeEdges.get(entry) ?? 0) + 1);
    durable.resumed += 1;
    return { resumedKey: resumedKeys[0] as string, trail: resumed.trail() };
  };
  let result: CrashRun;
  try {
    result = await attempt();
  } catch (error) {
    result = fail(error instanceof Error ? (error.message.split('\nPath:')[0] ?? error.message) : String(error));
  }
  if (!crashedStopped) await crashed.stop();
  await resumed?.stop();
  const violations = [...crashed.violations.map((v) => `crashed: ${v}`), ...(resumed?.violations ?? []).map((v) => `resumed: ${v}`)];
  return violations.length > 0 && !result.failure ? fail(violations.join('\n  ')) : result;
}

/**
 * A request in flight at a crash is asked again from the committed history: results that arrive
 * meanwhile do not join it (the session is not `joinable`; its first try may have reached the
 * model without them). A path that joins them to that request cannot be followed from that crash.
 */
function joinsAcrossCrash(path: Path, crashAt: number): boolean {
  if (path.steps[crashAt]?.state.value !== 'streaming') return false;
  for (const step of path.steps.slice(crashAt + 1)) {
    const type = step.event.type;
    if (type === 'model.starting') return true;
    if (type === 'model.error' || type === 'cancel' || type.startsWith('model')) return false;
  }
  return false;
}

/**
 * A session queued for its budget (issue 37) has made no request: its journal says what a streaming
 * one's would, and a resume asks again at once (the driver's session has no budget to wait for), so
 * the path's later budget events cannot be followed from a crash there. test/unit/budget/budgetAdmission.test.ts
 * resumes queued sessions of a real budget instead.
 */
function queuedAt(path: Path, step: number): boolean {
  return path.steps[step]?.state.value === 'queued';
}

async function runDurable(kind: ModelKind, paths: Path[], session: TraversableSession): Promise<void> {
  const runsBefore = durable.runs;
  const failures: string[] = [];
  const resumedKeys = new Set<string>();
  const reachedAfterResume = new Set<string>();
  const run = async (path: Path, crashAt: number, runId: string): Promise<void> => {
    const result = await driveDurable(kind, path, session, crashAt, runId);
    if (result.failure) failures.push(result.failure);
    if (result.resumedKey !== undefined) resumedKeys.add(result.resumedKey);
    // The state a session resumed in `nudged` ticks into.
    const [first, next] = result.trail ?? [];
    if (first !== undefined && next !== undefined && (JSON.parse(first) as { v: string }).v === 'nudged') reachedAfterResume.add(next);
  };
  for (const [index, path] of paths.entries()) {
    // Steps with a step after them, whose state is not final.
    const candidates = path.steps.flatMap((s, i) =>
      i < path.steps.length - 1 && s.state.status === 'active' && !joinsAcrossCrash(path, i) && !queuedAt(path, i) ? [i] : [],
    );
    if (candidates.length === 0) continue;
    await run(path, candidates[pick(index, candidates.length)] as number, `${kind}-${index}`);
  }
  // Every abstract state a session can be taken up in, resumed at least once.
  const occurrences = new Map<string, { path: Path; step: number; index: number }[]>();
  /**
   * States only ever reached behind the tick out of `nudged`, which writes nothing: no journal ends
   * in them (it says `nudged`), and a session resumed there rests in `nudged` and ticks into them.
   */
  const onlyByTick = new Map<string, boolean>();
  for (const [index, path] of paths.entries()) {
    path.steps.forEach((s, step) => {
      // A step after it: at the last step of a path the real session may go on by itself past the path's end.
      if (s.state.status !== 'active' || step === path.steps.length - 1 || joinsAcrossCrash(path, step) || queuedAt(path, step)) return;
      const key = stateKey(s.state);
      const list = occurrences.get(key) ?? [];
      if (list.length < 4) list.push({ path, step, index });
      occurrences.set(key, list);
      onlyByTick.set(key, (onlyByTick.get(key) ?? true) && behindUnjournaledTick(path.steps, step, session));
    });
  }
  const covered = (key: string): boolean => (onlyByTick.get(key) ? reachedAfterResume.has(key) : resumedKeys.has(key));
  let topUps = 0;
  for (const [key, list] of occurrences) {
    for (const { path, step, index } of list) {
      if (covered(key)) break;
      topUps += 1;
      await run(path, step, `${kind}-${index}-top-${step}`);
    }
  }
  // A state entered only by that tick is reached by sessions resumed in `nudged` once they tick on.
  const byTick = [...occurrences.keys()].filter((key) => onlyByTick.get(key));
  const never = [...occurrences.keys()].filter((key) => !covered(key));
  console.log(
    `model-based durable (${kind}): ${paths.length} paths, ${durable.runs - runsBefore} crashes (${topUps} to cover states); ${occurrences.size} active abstract states: ` +
      `${occurrences.size - never.length - byTick.length} crashed in and taken up, ${byTick.length} (only ever behind the tick out of nudged) ticked into after a resume in nudged; ` +
      `so far: ${durable.runs} crash runs, ${durable.resumed} resumed and driven on, ${durable.settled} found finished (root at rest), ` +
      `${durable.behind} behind a tick, ${durable.reruns} in-flight work calls run again`,
  );
  expect(failures.slice(0, 5), `${failures.length} crash runs failed`).toEqual([]);
  expect(never, 'abstract states no resumed session started in (or, entered only by a tick, reached)').toEqual([]);
}

/**
 * A non-idempotent call in flight at the crash: the resumed session answers it with an error
 * saying its effect is unknown, does not run it again, and the batch drains at once.
 */
async function driveUnknown(kind: ModelKind, path: Path, session: TraversableSession, runId: string): Promise<string | undefined> {
  const steps = path.steps;
  const keys = steps.map((s) => stateKey(s.state));
  const crashAt = steps.length - 1;
  const snapshot = steps[crashAt]?.state as SessionSnapshot;
  const pending = pendingRuns(snapshot).length;
  const description = `${steps.map((s) => describeEvent(s.event as EventObject)).join(' → ')} ⚡crash`;
  const crashing = new Set<string>();
  const crashed = new PathDriver(kind, { store: new RecordingStore(new MemoryRunStore()), runId, nextSeq: 1, idempotent: false, crashing });
  let resumed: PathDriver | undefined;
  let crashedStopped = false;
  const problems: string[] = [];
  try {
    for (let i = 0; i <= crashAt; i++) {
      await crashed.perform((steps[i] as Path['steps'][number]).event);
      await crashed.reach(keys[i] as string);
    }
    await crashed.journalWritten();
    const last = crashed.appends.at(-1);
    if (!last || last.key !== crashed.keys.length - 1 || crashed.keys.at(-1) !== keys[crashAt])
      return `${description}\n  the journal does not hold the batch at the crash`;
    const rows = last.frozen.store.journal(runId);
    // In flight: planned, with no result in the journal (started by the crash instant, just before
    // the next append, or not yet: a batch's calls start once the burst that planned them is written).
    const inFlight = inFlightAt(rows, crashed.sutId);
    if (inFlight.length !== pending) return `${description}\n  ${pending} calls should be in flight, the journal has ${JSON.stringify(inFlight)}`;
    const startedBefore = (id: string): number =>
      crashed.workStarted.filter((x, i) => x === id && (crashed.workStartedAt[i] ?? 0) <= last.frozen.append).length;
    crashedStopped = true;
    await crashed.stop();
    const restored = restoreRun(asRunJournal(rows, crashed.sutId));
    if (restored.kind !== 'resumable') return `${description}\n  restoreRun says ${restored.kind}`;
    // The model: the machine takes the batch up with the calls in flight answered, and it drains.
    const model = session.resume(snapshot, false);
    // (The traversal's logic ignores its actor scope.)
    const drained = session.logic.transition(model.snapshot, { type: 'batch.drained' }, undefined as never);
    const expectedKeys = collapse([stateKey(model.snapshot), stateKey(drained)]);
    const said = steps.flatMap((s) => (s.event.type === 'model.done' ? saidBy(s.event.output) : []));
    const resumeStore = new RecordingStore(last.frozen.store.clone());
    resumed = new PathDriver(kind, {
      store: resumeStore,
      runId,
      nextSeq: (rows.at(-1)?.seq ?? 0) + 1,
      idempotent: false,
      restore: restored.root,
      said,
      crashing,
    });
    await resumed.perform({ type: 'xstate.init' });
    for (const key of expectedKeys) await resumed.reach(key);
    if (JSON.stringify(resumed.trail()) !== JSON.stringify(expectedKeys))
      problems.push(`the resumed session took other states:\n  model: ${expectedKeys.join('\n         ')}\n  real:  ${resumed.trail().join('\n         ')}`);
    const predicted = [...edgeIds(model.taken), ...edgeIds(session.taken.get(drained) ?? [])];
    const real = edgeIds(resumed.transitions.slice(0, resumed.transitionsAt(resumed.trail().length - 1)));
    if (JSON.stringify(real) !== JSON.stringify(predicted))
      problems.push(`the resumed session took other transitions:\n  model: ${namesOf(predicted)}\n  real:  ${namesOf(real)}`);
    // Not run again: once in all, by the crashed process.
    if (resumed.workStarted.length > 0) problems.push(`the resumed session ran ${JSON.stringify(resumed.workStarted)} again`);
    for (const id of inFlight) if (startedBefore(id) > 1) problems.push(`${id} was started ${startedBefore(id)} times before the crash`);
    // Answered as of unknown effect, once, in the history and in the journal (so a second crash keeps the answer).
    const results = resumed.actor.getSnapshot().context.messages.flatMap((m) => m.content.flatMap((b) => (b.type === 'tool_result' ? [b] : [])));
    const journaled = resumeStore.inner.journal(runId).flatMap((r) => (r.record.type === 'tool' ? [r.record.result] : []));
    for (const id of inFlight) {
      const inHistory = results.filter((r) => r.tool_use_id === id);
      if (inHistory.length !== 1 || inHistory[0]?.is_error !== true || !/unknown/.test(inHistory[0].content))
        problems.push(`${id} is answered ${JSON.stringify(inHistory)} in the resumed history`);
      const inJournal = journaled.filter((r) => r.tool_use_id === id);
      if (inJournal.length !== 1 || inJournal[0]?.is_error !== true || !/unknown/.test(inJournal[0].content))
        problems.push(`${id} is journaled as ${JSON.stringify(inJournal)}`);
    }
    for (const id of predicted) reached.predicted.add(id);
    if (problems.length === 0) countReal(resumed, real);
  } catch (error) {
    problems.push(error instanceof Error ? (error.message.split('\nPath:')[0] ?? error.message) : String(error));
  } finally {
    if (!crashedStopped) await crashed.stop();
    await resumed?.stop();
    problems.push(...crashed.violations.map((v) => `crashed: ${v}`), ...(resumed?.violations ?? []).map((v) => `resumed: ${v}`));
  }
  durable.unknownChecks += 1;
  return problems.length > 0 ? `${description}\n  ${problems.join('\n  ')}` : undefined;
}

const models = new Map<ModelKind, { session: TraversableSession; paths: Path[] }>();

/** The shortest paths of a kind's model, made once for the plain and the durable runs. */
function shortestPaths(kind: ModelKind): { session: TraversableSession; paths: Path[] } {
  let found = models.get(kind);
  if (!found) {
    const { session, model } = buildModel(kind);
    found = { session, paths: model.getShortestPaths() };
    models.set(kind, found);
  }
  return found;
}

describe('model-based, durable: a session journaled at any reachable state, crashed, resumed, and driven on', () => {
  for (const kind of ['root', 'sub'] as const) {
    it(`${kind === 'root' ? 'the root' : 'a sub-agent'}: resumed from its journal at a sampled step of each shortest path, it takes the model's states and transitions for the rest of the path`, async () => {
      const { session, paths } = shortestPaths(kind);
      await runDurable(kind, paths, session);
    }, 300_000);
  }

  it('a non-idempotent call in flight at the crash is answered as of unknown effect and not run again', async () => {
    const failures: string[] = [];
    let checked = 0;
    for (const kind of ['root', 'sub'] as const) {
      const { session, paths } = shortestPaths(kind);
      for (const [index, path] of paths.entries()) {
        const last = path.steps.at(-1)?.state;
        if (last?.status !== 'active' || last.value !== 'dispatchingBatch' || pendingRuns(last).length === 0) continue;
        checked += 1;
        const failure = await driveUnknown(kind, path, session, `${kind}-unknown-${index}`);
        if (failure) failures.push(failure);
      }
    }
    console.log(`model-based durable: ${checked} crashes with non-idempotent calls in flight`);
    expect(checked).toBeGreaterThan(10);
    expect(failures.slice(0, 5), `${failures.length} of ${checked} failed`).toEqual([]);
  }, 300_000);
});

describe('model-based coverage', () => {
  it('the paths cover 100% of the states and transitions of the machine', () => {
    const chart = sessionStatechart();
    // The statechart data (src/watch/statechart) and the edges read here describe the same machine.
    expect(edges.map((e) => e.label.split(' ')[0])).toEqual(chart.transitions.map((t) => t.source));
    expect(allStates).toEqual(chart.states.map((s) => s.id));
    const missingStates = allStates.filter((s) => !reached.states.has(s));
    const missing = edges.filter((_, i) => !reached.transitions.has(i)).map((e) => e.label);
    const missingInModel = edges.filter((_, i) => !reached.predicted.has(i)).map((e) => e.label);
    console.log(
      `model-based coverage: ${reached.paths} paths, ${reached.steps} steps; ` +
        `states ${allStates.length - missingStates.length}/${allStates.length} (${pct(allStates.length - missingStates.length, allStates.length)}), ` +
        `transitions ${edges.length - missing.length}/${edges.length} (${pct(edges.length - missing.length, edges.length)}) in real sessions, ` +
        `${edges.length - missingInModel.length}/${edges.length} in the model; sessions resumed by ${[...durable.resumeEdges].map(([label, n]) => `${label}: ${n}`).join(', ')}`,
    );
    expect(missingStates, 'states no real session reached').toEqual([]);
    expect(missing, 'transitions no real session took').toEqual([]);
    expect(missingInModel, 'transitions no generated path takes').toEqual([]);
  });
});

function pct(n: number, total: number): string {
  return `${Math.floor((1000 * n) / total) / 10}%`;
}
