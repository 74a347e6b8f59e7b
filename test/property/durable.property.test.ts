import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resumeRun, startRun, type DurableRun } from '../../src/run/durableRun.js';
import { MemoryRunStore } from '../../src/store/memoryStore.js';
import type { JournalRecord } from '../../src/engine/log/journalRecord.js';
import type { JournalRow, RunStatus } from '../../src/store/runStore.js';
import type { ScriptedProvider } from '../../src/testing/scriptedProvider.js';
import { RecordingStore, SkewedClock, type FrozenStore } from '../support/durableStore.js';
import { mulberry32 } from '../support/prng.js';
import {
  agentIds,
  deliveryLines,
  durableScenarioArb,
  expectedFinalText,
  MAX_DEPTH,
  TRUNCATION_BUDGET,
  scenarioProvider,
  scenarioTools,
  type DurableAgent,
  type DurableScenario,
  type Execution,
} from '../support/durableScenario.js';

/**
 * Crash anywhere: random agent trees (test/support/durableScenario.ts) run as durable runs on a
 * `MemoryRunStore` that keeps a frozen copy after every append (test/support/durableStore.ts).
 *
 * The crash instant: a run "crashed at k" is one whose process died at the last moment before its
 * (k+1)-th append. Its store is then exactly frozen copy k (appends are atomic, and a process can
 * only die between two of them; k = 0: the run was created, nothing journaled). What that process
 * did before the instant happened; what it did after never did: a tool execution counts for the
 * crashed process if it started when the process had written at most k appends. (A batch's calls
 * start once the burst that planned them is written, before any later append: every call the
 * journal holds at k had started by the instant.)
 *
 * The uninterrupted run is recorded once; each crash point resumes a clone of its frozen copy in a
 * "new process" (`resumeRun` with a fresh provider and fresh tools; the scripts are functions of
 * the request's content, so a resumed process gets the same answers to the same requests), which
 * runs to the end. Two crash points per scenario are crashed again after resuming, at an append of
 * the resumed run's own, and resumed once more (sometimes a third time).
 *
 * Invariants (the oracles are the scenario and plain scans of the final journal, never
 * `restoreRun`'s own output):
 * - the run ends `done` with the root's final text of the scenario (`expectedFinalText`): the
 *   scenarios are order-independent by construction, so every interleaving must give it;
 * - every request any process made passes the pairing rule (`pairingViolations`);
 * - every call has exactly one committed result; the side-effecting tool (`effect`, not
 *   idempotent) ran at most once per call id over all the processes of a chain, and exactly once
 *   for every call whose committed result is its own or 'unknown' (such a call had started by the
 *   crash); the idempotent `lookup` ran at most once per call id in each process; a call cut off at
 *   max_tokens never ran; no result is an error the scenario does not make;
 * - every spawned sub-agent delivered exactly one result to its parent (inbox records per parent
 *   and actor id in the final journal, leaving out those an interrupt undid: cancellations between
 *   an `interrupt` marker and the next `resume`), with the outcome the scenario gives it, and ended
 *   exactly once (outcome records, same rule); the tree spawned is the scenario's;
 * - no report is lost or duplicated: each sub-agent's report line (or failed/cancelled tag)
 *   appears exactly once in the committed user turns of its parent, the root included;
 * - the journal's seqs are 1, 2, 3, … across processes.
 *
 * The same with an asynchronous store (appends settle a macrotask later). And Ctrl-C: a run
 * interrupted (`interrupt()`) just after an append, then resumed from the same store, ends as the
 * uninterrupted one; the calls still running when the interrupt came are answered 'cancelled', and
 * no call answered 'cancelled' runs after the interrupt, in any process. Also interrupted a second
 * time while resumed, and crashed (at an append) after the interrupt. These scenarios have no
 * calls beside a reply (a known bug: see test/durable.bugs.test.ts).
 *
 * `DURABLE_RUNS` (default 6) scenarios, `DURABLE_CRASHES` (default 14) crash points each (every
 * append when a run has no more); `DURABLE_SEED` / `DURABLE_PATH` replay a failure that fast-check
 * reports.
 */

const runs = Number(process.env['DURABLE_RUNS'] ?? 6);
const crashesPerRun = Number(process.env['DURABLE_CRASHES'] ?? 14);
const seed = process.env['DURABLE_SEED'] === undefined ? undefined : Number(process.env['DURABLE_SEED']);
const path = process.env['DURABLE_PATH'];

const SESSION_OPTIONS = { maxSteps: 50, maxDepth: MAX_DEPTH, toolTimeoutMs: 5_000, truncationBudget: TRUNCATION_BUDGET } as const;
const TASK = 'the root task';

/**
 * What an interrupt did, as seen from outside: the calls whose tool was still running when it came
 * (the interrupt must answer them 'cancelled') and those started before it. A call may be answered
 * 'cancelled' without running at all (its batch was planned and written, but its tools had not
 * started yet) or after its tool returned (its result had not reached the session): either way it
 * never runs after the interrupt, in that process or in a resumed one.
 */
interface Interrupt {
  readonly running: ReadonlySet<string>;
  readonly startedBefore: ReadonlySet<string>;
  /** Appends the process had written when it was interrupted. */
  readonly at: number;
}

/** One process of a run: its store, what its tools did, what its model saw, how it ended. */
interface Process {
  readonly runId: string;
  readonly store: RecordingStore;
  readonly executions: Execution[];
  readonly provider: ScriptedProvider;
  readonly text: string;
  readonly status: RunStatus;
  /** A resume that found nothing left to do. */
  readonly finished: boolean;
  readonly interrupt: Interrupt | undefined;
}

interface ProcessOptions {
  /** A resume, from a copy of this store (the previous owner's lease made to look expired). */
  readonly from?: { readonly runId: string; readonly store: MemoryRunStore };
  /** Ctrl-C just after this append (or the first after it once `startRun` has returned the run). */
  readonly interruptAt?: number;
  readonly asynchronous?: boolean;
}

/** Runs a new process of the scenario's run to its end: a new run, or a resume. */
async function runProcess(scenario: DurableScenario, clock: SkewedClock, options: ProcessOptions = {}): Promise<Process> {
  if (options.from) clock.expireLeases();
  const inner = options.from ? options.from.store.clone() : new MemoryRunStore({ now: clock.now });
  const store = new RecordingStore(inner, { asynchronous: options.asynchronous ?? false });
  const { tools, executions, running } = scenarioTools(() => store.appends);
  const provider = scenarioProvider(scenario);
  let run: DurableRun | undefined;
  let interrupt: Interrupt | undefined;
  const interruptAt = options.interruptAt;
  if (interruptAt !== undefined) {
    store.onAppend = (frozen) => {
      if (frozen.append < interruptAt || interrupt) return;
      // Not from inside the journal's write: at the end of this synchronous run.
      queueMicrotask(() => {
        if (!run || interrupt || run.actor.getSnapshot().status !== 'active') return;
        interrupt = { running: new Set(running), startedBefore: new Set(executions.map((e) => e.id)), at: store.appends };
        run.interrupt();
      });
    };
  }
  const input = { provider, tools, ...SESSION_OPTIONS };
  if (options.from) {
    const resumed = await resumeRun(options.from.runId, input, { store });
    if ('finished' in resumed) return { runId: resumed.id, store, executions, provider, text: resumed.text, status: resumed.status, finished: true, interrupt };
    run = resumed;
  } else {
    run = await startRun(TASK, input, { store });
  }
  const result = await run.result;
  return { runId: run.id, store, executions, provider, text: result.text, status: result.status, finished: false, interrupt };
}

/** A chain of processes: each but the last crashed just after its append `crashedAt`. */
type Chain = readonly { readonly process: Process; readonly crashedAt?: number }[];

function recordsOf(rows: readonly JournalRow[]): { session: string; record: JournalRecord; undone: boolean }[] {
  // Records an interrupt undoes: between an `interrupt` marker and the next `resume`, the cancellations,
  // and the commit of a batch the interrupt closed (its answers stand; the resumed session commits it).
  let interrupted = false;
  return rows.map(({ session, record }) => {
    if (session === '' && record.type === 'interrupt') interrupted = true;
    if (session === '' && record.type === 'resume') interrupted = false;
    const batchCommit =
      record.type === 'message' && record.role === 'user' && record.content.length > 0 && record.content.every((b) => b.type === 'tool_result');
    const cancellation =
      (record.type === 'outcome' && record.outcome === 'cancelled') ||
      (record.type === 'inbox' && record.result.outcome === 'cancelled') ||
      record.type === 'stopped' ||
      batchCommit;
    return { session, record, undone: interrupted && cancellation };
  });
}

function specOf(scenario: DurableScenario, agentId: string): DurableAgent | undefined {
  let spec: DurableAgent | undefined = scenario.root;
  for (const name of agentId.split('/').slice(1)) spec = spec?.children[name];
  return spec;
}

const NO_INTERRUPT: Interrupt = { running: new Set(), startedBefore: new Set(), at: 0 };

/** Every invariant of a finished chain; returns the violations. */
function checkChain(scenario: DurableScenario, chain: Chain, interrupt: Interrupt = NO_INTERRUPT): string[] {
  const out: string[] = [];
  const last = chain.at(-1)?.process;
  if (!last) return ['empty chain'];
  const runId = last.runId;
  const expected = expectedFinalText(scenario);
  if (last.status !== 'done') out.push(`the run ended ${last.status}`);
  if (last.text !== expected) out.push(`the root answered ${JSON.stringify(last.text.slice(0, 300))}, expected ${JSON.stringify(expected.slice(0, 300))}`);
  chain.forEach(({ process }, i) => {
    if (process.provider.pairingViolations.length > 0)
      out.push(`process ${i}: requests broke the pairing rule: ${JSON.stringify(process.provider.pairingViolations).slice(0, 400)}`);
  });

  // Executions that happened: each crashed process's up to its crash instant, all of the last one's.
  const happened = chain.flatMap(({ process, crashedAt }) => process.executions.filter((e) => crashedAt === undefined || e.at <= crashedAt));
  const effects = new Map<string, number>();
  for (const e of happened) if (e.tool === 'effect') effects.set(e.id, (effects.get(e.id) ?? 0) + 1);
  for (const [id, n] of effects) if (n > 1) out.push(`effect call ${id} ran ${n} times`);
  chain.forEach(({ process }, i) => {
    const lookups = new Map<string, number>();
    for (const e of process.executions) if (e.tool === 'lookup') lookups.set(e.id, (lookups.get(e.id) ?? 0) + 1);
    for (const [id, n] of lookups) if (n > 1) out.push(`process ${i} ran lookup call ${id} ${n} times`);
  });

  const rows = last.store.inner.journal(runId);
  rows.forEach((row, i) => {
    if (row.seq !== i + 1) out.push(`journal row ${i} has seq ${row.seq}`);
  });
  const records = recordsOf(rows);
  // Committed results of every call, by session (the run is done: every batch was committed).
  const calls = new Map<string, { session: string; name: string }>();
  const results = new Map<string, { content: string; isError: boolean }[]>();
  for (const { session, record, undone } of records) {
    if (record.type !== 'message' || undone) continue;
    for (const block of record.content) {
      if (block.type === 'tool_use') calls.set(block.id, { session, name: block.name });
      if (block.type === 'tool_result')
        results.set(block.tool_use_id, [...(results.get(block.tool_use_id) ?? []), { content: block.content, isError: block.is_error === true }]);
    }
  }
  for (const [id, { session, name }] of calls) {
    const committed = results.get(id) ?? [];
    if (committed.length !== 1) {
      out.push(`${session}: call ${id} (${name}) has ${committed.length} committed results`);
      continue;
    }
    const result = committed[0] as { content: string; isError: boolean };
    const cancelled = result.isError && result.content === 'cancelled';
    if (cancelled && interrupt === NO_INTERRUPT) out.push(`${session}: call ${id} (${name}) is answered 'cancelled', but nothing was interrupted`);
    if (cancelled) {
      const n = happened.filter((e) => e.id === id).length;
      if (n > (interrupt.startedBefore.has(id) ? 1 : 0))
        out.push(
          `${session}: call ${id} (${name}), answered 'cancelled', ran ${n} times (${interrupt.startedBefore.has(id) ? 'once' : 'never'} before the interrupt)`,
        );
    } else if (name === 'effect' && !/was cut off at max_tokens/.test(result.content)) {
      const n = effects.get(id) ?? 0;
      if (n !== 1) out.push(`${session}: effect call ${id} answered ${JSON.stringify(result.content.slice(0, 60))} but ran ${n} times`);
    }
    if (interrupt.running.has(id) && !cancelled)
      out.push(`${session}: call ${id}, running when the run was interrupted, is answered ${JSON.stringify(result.content.slice(0, 80))}`);
    // Errors the scenario makes: a call cut off at max_tokens; an effect of unknown outcome after a crash.
    const expectedError = /was cut off at max_tokens/.test(result.content) || (name === 'effect' && /unknown/.test(result.content));
    if (!cancelled && result.isError && !expectedError) out.push(`${session}: call ${id} (${name}) failed: ${result.content.slice(0, 120)}`);
    if (/was cut off at max_tokens/.test(result.content) && (effects.get(id) ?? 0) > 0) out.push(`${session}: call ${id} was cut off, but ran`);
  }
  for (const id of effects.keys()) if (!calls.has(id)) out.push(`effect call ${id} ran but is in no committed message`);

  // Deliveries and ends: one each per spawned sub-agent.
  for (const { session, record } of records) {
    if (record.type !== 'spawn') continue;
    const delivered = records.filter((r) => !r.undone && r.session === session && r.record.type === 'inbox' && r.record.actorId === record.actorId);
    if (delivered.length !== 1) out.push(`${session}: sub-agent ${record.id} (actor ${record.actorId}) delivered ${delivered.length} results`);
    const ending = specOf(scenario, record.id)?.ending;
    const expectedOutcome = ending === 'fail' ? 'failed' : ending === 'cancelled' ? 'cancelled' : 'replied';
    const ends = records.filter((r) => !r.undone && r.session === record.id && r.record.type === 'outcome');
    if (ends.length !== 1 || (ends[0]?.record.type === 'outcome' && ends[0].record.outcome !== expectedOutcome)) {
      out.push(
        `${record.id} ended ${ends.length} times: ${ends.map((r) => (r.record.type === 'outcome' ? r.record.outcome : '?')).join(', ')} (expected once, ${expectedOutcome})`,
      );
    }
    const got = delivered[0]?.record;
    if (got?.type === 'inbox' && got.result.outcome !== expectedOutcome)
      out.push(`${session}: sub-agent ${record.id} delivered ${got.result.outcome}, expected ${expectedOutcome}`);
  }
  // Spawned as the scenario says, once each.
  const spawned = records.flatMap((r) => (r.record.type === 'spawn' ? [r.record.id] : []));
  const agents = agentIds(scenario).slice(1);
  if (JSON.stringify([...spawned].sort()) !== JSON.stringify([...agents].sort()))
    out.push(`spawned ${JSON.stringify(spawned)}, the scenario has ${JSON.stringify(agents)}`);

  // Reports: each exactly once in the committed user turns of its parent.
  for (const parent of agentIds(scenario)) {
    const spec = specOf(scenario, parent);
    const lines = records.flatMap((r) =>
      r.session === parent && r.record.type === 'message' && r.record.role === 'user'
        ? r.record.content.flatMap((b) => (b.type === 'text' ? b.text.split('\n') : []))
        : [],
    );
    for (const name of Object.keys(spec?.children ?? {})) {
      const child = `${parent}/${name}`;
      const match = deliveryLines(child);
      const n = lines.filter((line) => match(line) !== undefined).length;
      if (n !== 1) out.push(`${parent}: the report of ${child} is in its history ${n} times`);
    }
  }
  return out;
}

/** A deterministic sample of `count` of 1..n (all of them when n ≤ count), first and last included. */
function sample(n: number, count: number, rng: () => number): number[] {
  if (n <= count) return Array.from({ length: n }, (_, i) => i + 1);
  const picked = new Set([1, n]);
  while (picked.size < count) picked.add(1 + Math.floor(rng() * n));
  return [...picked].sort((a, b) => a - b);
}

function report(violations: readonly string[], what: string): void {
  if (violations.length > 0) throw new Error(`${what}: ${violations.length} violations:\n- ${violations.slice(0, 12).join('\n- ')}`);
}

const stats = {
  scenarios: 0,
  appends: 0,
  crashPoints: 0,
  resumes: 0,
  repeated: 0,
  finishedResumes: 0,
  unknowns: 0,
  nudges: 0,
  failedAgents: 0,
  cancelledAgents: 0,
  interrupts: 0,
  interruptedRuns: 0,
  doubleInterrupts: 0,
  crashesAfterInterrupt: 0,
};

/** Counts what the scenarios exercise (for the summary line). */
function countFeatures(process: Process): void {
  for (const { record } of process.store.inner.journal(process.runId)) {
    if (record.type === 'nudge') stats.nudges += 1;
    if (record.type === 'outcome' && record.outcome === 'failed') stats.failedAgents += 1;
    if (record.type === 'outcome' && record.outcome === 'cancelled') stats.cancelledAgents += 1;
  }
}

/**
 * Runs the scenario once, then crashes it at `perRun` of its appends (all of them when it has no
 * more); two of those resumed runs are crashed again, at an append of their own, and resumed again
 * (sometimes a third time).
 */
async function crashEverywhere(scenario: DurableScenario, sampling: number, perRun: number, asynchronous: boolean): Promise<void> {
  const rng = mulberry32(sampling);
  const clock = new SkewedClock();
  const original = await runProcess(scenario, clock, { asynchronous });
  stats.scenarios += 1;
  stats.appends += original.store.appends;
  countFeatures(original);
  report(checkChain(scenario, [{ process: original }]), 'the uninterrupted run');
  // Crash points: appends 1…n, and 0 (the run created, nothing journaled) for every other scenario.
  const points = [...(rng() < 0.5 ? [0] : []), ...sample(original.store.appends, perRun, rng)];
  const again = new Set(sample(points.length, 2, rng).map((i) => points[i - 1]));
  for (const k of points) {
    stats.crashPoints += 1;
    const frozen = k === 0 ? original.store.created : original.store.frozen[k - 1]?.store;
    if (!frozen) throw new Error(`no append ${k}`);
    const chain: { process: Process; crashedAt?: number }[] = [{ process: original, crashedAt: k }];
    let resumed = await runProcess(scenario, clock, { from: { runId: original.runId, store: frozen }, asynchronous });
    stats.resumes += 1;
    if (resumed.finished) stats.finishedResumes += 1;
    for (let depth = 0; again.has(k) && depth < 2 && resumed.store.appends > 0; depth++) {
      const m = 1 + Math.floor(rng() * resumed.store.appends);
      chain.push({ process: resumed, crashedAt: m });
      const from = resumed.store.frozen[m - 1] as FrozenStore;
      resumed = await runProcess(scenario, clock, { from: { runId: original.runId, store: from.store }, asynchronous });
      stats.resumes += 1;
      stats.repeated += 1;
      if (rng() < 0.5) break;
    }
    chain.push({ process: resumed });
    stats.unknowns += resumed.store.inner.journal(original.runId).filter((r) => r.record.type === 'tool' && /unknown/.test(r.record.result.content)).length;
    const where = `crashed at append ${k} of ${original.store.appends}${
      chain.length > 2
        ? `, then at ${chain
            .slice(1, -1)
            .map((c) => c.crashedAt)
            .join(', then at ')} of the resumed runs`
        : ''
    }`;
    report(checkChain(scenario, chain), where);
  }
}

function merge(a: Interrupt, b: Interrupt | undefined): Interrupt {
  return { running: new Set([...a.running, ...(b?.running ?? [])]), startedBefore: new Set([...a.startedBefore, ...(b?.startedBefore ?? [])]), at: a.at };
}

const fcOptions = (numRuns: number): fc.Parameters<[DurableScenario, number]> => ({
  numRuns,
  ...(seed === undefined ? {} : { seed }),
  ...(path === undefined ? {} : { path }),
});

describe('durable runs: random agent trees, crashed anywhere, resumed', () => {
  it(
    `${runs} seeded scenarios, crashed at up to ${crashesPerRun} appends each, some crashed again after resuming`,
    async () => {
      const started = Date.now();
      await fc.assert(
        fc.asyncProperty(durableScenarioArb, fc.integer(), (scenario, sampling) => crashEverywhere(scenario, sampling, crashesPerRun, false)),
        fcOptions(runs),
      );
      console.log(
        `durable: ${stats.scenarios} scenarios (${stats.appends} appends; ${stats.nudges} nudges, ${stats.failedAgents} failed and ${stats.cancelledAgents} cancelled sub-agents), ` +
          `${stats.crashPoints} crash points, ${stats.resumes} resumes (${stats.repeated} of runs crashed again, ${stats.finishedResumes} found the run finished), ` +
          `${stats.unknowns} calls answered 'unknown', in ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      expect(stats.crashPoints).toBeGreaterThanOrEqual(runs);
    },
    Math.max(60_000, runs * 20_000),
  );

  it(
    'an asynchronous store (appends settle a macrotask later): effects wait for their records, and crashes anywhere still resume',
    async () => {
      const started = Date.now();
      const before = stats.crashPoints;
      await fc.assert(
        fc.asyncProperty(durableScenarioArb, fc.integer(), (scenario, sampling) => crashEverywhere(scenario, sampling, Math.ceil(crashesPerRun / 2), true)),
        fcOptions(Math.max(1, Math.ceil(runs / 2))),
      );
      console.log(`durable (asynchronous store): ${stats.crashPoints - before} crash points in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    },
    Math.max(60_000, runs * 20_000),
  );

  it(
    'Ctrl-C: a run interrupted at an append and resumed ends as the uninterrupted one, the calls it cancelled answered cancelled (also interrupted twice, and crashed after the interrupt)',
    async () => {
      const started = Date.now();
      await fc.assert(
        fc.asyncProperty(durableScenarioArb, fc.integer(), async (scenario, sampling) => {
          const rng = mulberry32(sampling);
          const clock = new SkewedClock();
          const original = await runProcess(scenario, clock);
          for (const k of sample(original.store.appends, 2, rng)) {
            stats.interrupts += 1;
            // The same run again, interrupted just after its k-th append (it may be done by then).
            const first = await runProcess(scenario, clock, { interruptAt: k });
            if (first.status !== 'interrupted' || !first.interrupt) continue;
            stats.interruptedRuns += 1;
            const where = `interrupted at append ${k} of ${original.store.appends}`;
            // Resumed from the same store: the interrupted process let go of it.
            const from = { runId: first.runId, store: first.store.inner };
            const resumed = await runProcess(scenario, clock, { from });
            report(checkChain(scenario, [{ process: first }, { process: resumed }], first.interrupt), where);

            // Interrupted again while resumed, and resumed once more.
            const second = await runProcess(scenario, clock, { from, interruptAt: 1 + Math.floor(rng() * Math.max(1, resumed.store.appends)) });
            if (second.status === 'interrupted' && second.interrupt) {
              stats.doubleInterrupts += 1;
              const last = await runProcess(scenario, clock, { from: { runId: second.runId, store: second.store.inner } });
              report(
                checkChain(scenario, [{ process: first }, { process: second }, { process: last }], merge(first.interrupt, second.interrupt)),
                `${where}, then at append ${second.interrupt.at} of the resumed run`,
              );
            }

            // Crashed after the interrupt came, at one of the appends it made (its cancellations may be
            // partly written): what is written stands, what is not is taken up as after any crash.
            if (first.store.appends > first.interrupt.at) {
              const m = first.interrupt.at + 1 + Math.floor(rng() * (first.store.appends - first.interrupt.at));
              const frozen = first.store.frozen[m - 1] as FrozenStore;
              stats.crashesAfterInterrupt += 1;
              const after = await runProcess(scenario, clock, { from: { runId: first.runId, store: frozen.store } });
              report(
                checkChain(scenario, [{ process: first, crashedAt: m }, { process: after }], {
                  running: new Set(),
                  startedBefore: first.interrupt.startedBefore,
                  at: first.interrupt.at,
                }),
                `${where}, crashed at append ${m} of its ${first.store.appends}`,
              );
            }
          }
        }),
        fcOptions(Math.max(1, Math.ceil(runs / 2))),
      );
      console.log(
        `durable: ${stats.interrupts} interrupts tried, ${stats.interruptedRuns} runs interrupted and resumed ` +
          `(${stats.doubleInterrupts} interrupted again, ${stats.crashesAfterInterrupt} crashed after the interrupt), in ${((Date.now() - started) / 1000).toFixed(1)} s`,
      );
      expect(stats.interruptedRuns).toBeGreaterThan(0);
    },
    Math.max(60_000, runs * 20_000),
  );
});
