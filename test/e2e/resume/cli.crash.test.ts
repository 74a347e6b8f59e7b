import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, linkSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer } from '../../support/anthropicServer.js';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';
import { onCleanup, stream, workdir } from '../../support/cliHarness.js';
import { mulberry32 } from '../../support/prng.js';
import {
  BIG_FILE,
  EFFECTS,
  effectCounts,
  IDEMPOTENT_CALLS,
  JournalReader,
  nameOf,
  pairingProblems,
  phasesAt,
  plainMessages,
  readStore,
  replayJournal,
  rootFinalText,
  resultsFor,
  runIdIn,
  SHELL_CALLS,
  startExarch,
  stepOf,
  storeFile,
  tagCount,
  treeScripts,
  useDistSnapshot,
  type ExarchProcess,
  type Row,
} from '../../support/crashTree.js';

/**
 * SIGKILL crash test (issue 12): the real `exarch run` process is killed at many seeded points of a
 * three-level tree (test/support/crashTree.ts) served by the local SSE server, and resumed with
 * `exarch resume` (killed again, for some runs) until it finishes. Each finished run is checked
 * against oracles that do not use exarch's code:
 *
 * - stdout equals the uninterrupted run's (which counts each child's reports: a lost or doubled
 *   report changes it), and the run ends `done`;
 * - each shell command (non-idempotent; it appends its own tool_use id to effects.log) ran at most
 *   once, and exactly once when the history shows its result as completed; a call whose result is
 *   the "unknown" answer was in flight at a kill; idempotent calls always end with a real result;
 * - no request the server saw breaks the pairing rule (the server's check and one of our own);
 * - an agent's history is never rewritten: every request of an agent extends the earlier ones, so
 *   a stream asked again after a kill is asked from the same committed history, and a response
 *   committed before a kill is never asked for again;
 * - every child's report reaches its parent exactly once (tags in the parent's last request, and
 *   one inbox record per child in the journal).
 *
 * Kill points: seeded delays after the journal's first record, after the k-th request, after a
 * shell command started (its line in effects.log), and after given journal records (deliveries,
 * nudges, committed responses); where each kill landed is read back from the journal and printed
 * as one summary line per test. CRASH_SEED changes the points, CRASH_PARALLEL the number of runs
 * at a time (default 4), CRASH_VERBOSE=1 prints every run's kills.
 */

const SEED = Number(process.env['CRASH_SEED'] ?? 20261203);
const PARALLEL = Number(process.env['CRASH_PARALLEL'] ?? 4);
const TASK = ['run', '--allow-shell', '--allow-write', 'Build the tree report.'];

type Trigger =
  /** `ms` after this process's first journal record (the run's first record, or the resume mark). */
  | { readonly kind: 'time'; readonly ms: number }
  /** `delayMs` after the `nth` request this process made arrived at the server. */
  | { readonly kind: 'request'; readonly nth: number; readonly delayMs: number }
  /** `delayMs` after the shell command `marker` wrote its line. */
  | { readonly kind: 'effect'; readonly marker: string; readonly delayMs: number }
  /** `delayMs` after this process wrote the `nth` record of `type` (of `session`, if given). */
  | { readonly kind: 'journal'; readonly session?: string; readonly type: string; readonly contains?: string; readonly nth: number; readonly delayMs: number };

function describeTrigger(t: Trigger): string {
  switch (t.kind) {
    case 'time':
      return `${t.ms} ms in`;
    case 'request':
      return `request #${t.nth} + ${t.delayMs} ms`;
    case 'effect':
      return `${t.marker} started + ${t.delayMs} ms`;
    case 'journal':
      return `${t.session ?? 'any'} ${t.type}${t.contains === undefined ? '' : ` with '${t.contains}'`} #${t.nth} + ${t.delayMs} ms`;
  }
}

interface KillRecord {
  readonly trigger: string;
  /** The process died of the SIGKILL (false: it had finished before the trigger fired). */
  readonly landed: boolean;
  /** server.requests.length once the process was dead: the requests it made are below this index. */
  readonly requestsBefore: number;
  readonly rows: Row[];
  readonly effects: string;
  readonly phases: string[];
}

interface CaseResult {
  readonly name: string;
  readonly kills: KillRecord[];
  readonly problems: string[];
  readonly ms: number;
  /** Shell calls answered "unknown" after a kill caught them in flight. */
  readonly unknown: string[];
  /** Idempotent calls a kill caught in flight, run again by a resume. */
  readonly rerun: string[];
  /** The known bug below struck: the final answer was journaled but no process printed it. */
  readonly lost: boolean;
  /** Streams asked again after a kill (the same agent and step requested more than once). */
  readonly reasked: number;
}

/**
 * A kill after the root's final response is journaled but before it is printed: the resume prints
 * it (see the last test). Were that to regress, the sweep would report it as a problem; set this to
 * true only to tolerate it while investigating (the answer the journal holds then stands in).
 */
const TOLERATE_FINAL_ANSWER_LOST = false;
const ALREADY_FINISHED = /already finished \(done\); nothing to resume/;

let bigDir = '';
let dropDist: (() => void) | undefined;
let baseline: { stdout: string; spanMs: number; requests: number } | undefined;

beforeAll(() => {
  dropDist = useDistSnapshot();
  // Beta reads this file: large enough that the read takes a while, so kills land mid-read.
  bigDir = mkdtempSync(join(tmpdir(), 'exarch-crash-big-'));
  const line = 'the quick brown fox jumps over the lazy dog, again and again and again\n';
  writeFileSync(join(bigDir, BIG_FILE), line.repeat(Math.ceil((24 * 1024 * 1024) / line.length)));
}, 60_000);
afterAll(() => {
  rmSync(bigDir, { recursive: true, force: true });
  dropDist?.();
});

async function newCase(): Promise<{ cwd: string; server: AnthropicTestServer }> {
  const cwd = workdir();
  // Run as root (CI), exarch runs sandboxed commands as the working directory's owner: make it a user's.
  if (canSwitchUser) await giveToNobody(cwd);
  try {
    linkSync(join(bigDir, BIG_FILE), join(cwd, BIG_FILE));
  } catch {
    copyFileSync(join(bigDir, BIG_FILE), join(cwd, BIG_FILE));
  }
  const server = await startAnthropicServer(historyHandler(treeScripts()));
  onCleanup(() => server.close());
  return { cwd, server };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Runs `proc` until `trigger` fires (then SIGKILL) or it ends by itself. `reader` follows the
 * journal; records of this process are those after `fromSeq`.
 */
async function killWhen(
  proc: ExarchProcess,
  trigger: Trigger,
  reader: JournalReader,
  fromSeq: number,
  server: AnthropicTestServer,
  cwd: string,
): Promise<{ landed: boolean; run: Awaited<ExarchProcess['closed']> }> {
  let fired = false;
  let firstRecordAt: number | undefined;
  const fire = (delayMs: number): void => {
    fired = true;
    setTimeout(() => {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
    }, delayMs);
  };
  const poll = setInterval(() => {
    if (fired) return;
    reader.poll();
    const mine = reader.rows.filter((r) => r.seq > fromSeq);
    if (firstRecordAt === undefined && mine.length > 0) firstRecordAt = Date.now();
    switch (trigger.kind) {
      case 'time':
        if (firstRecordAt !== undefined && Date.now() - firstRecordAt >= trigger.ms) fire(0);
        return;
      case 'request':
        if (server.requests.length - proc.firstRequest >= trigger.nth) fire(trigger.delayMs);
        return;
      case 'effect': {
        const file = join(cwd, EFFECTS);
        if (existsSync(file) && readFileSync(file, 'utf8').includes(trigger.marker)) fire(trigger.delayMs);
        return;
      }
      case 'journal': {
        const n = mine.filter(
          (r) =>
            r.type === trigger.type &&
            (trigger.session === undefined || r.session === trigger.session) &&
            (trigger.contains === undefined || JSON.stringify(r.body).includes(trigger.contains)),
        ).length;
        if (n >= trigger.nth) fire(trigger.delayMs);
        return;
      }
    }
  }, 4);
  const run = await proc.closed;
  clearInterval(poll);
  return { landed: run.signal === 'SIGKILL', run };
}

/**
 * One case: `exarch run`, killed at `triggers[0]`, resumed and killed at `triggers[1]`, … then
 * resumed until it finishes. Returns where the kills landed and every oracle's complaints.
 */
async function crashCase(name: string, triggers: readonly Trigger[]): Promise<CaseResult> {
  const started = Date.now();
  const { cwd, server } = await newCase();
  const reader = new JournalReader(storeFile(cwd));
  const kills: KillRecord[] = [];
  const problems: string[] = [];
  let runId: string | undefined;
  let answer: string | undefined;
  let finished = false;
  let lost = false;
  const nothingPrinted = (run: { stdout: string; stderr: string }): boolean => {
    if (run.stdout !== '' || answer !== undefined || !ALREADY_FINISHED.test(run.stderr)) return false;
    if (TOLERATE_FINAL_ANSWER_LOST) lost = true;
    else problems.push(`no process printed the answer; the last resume said:\n${run.stderr}`);
    return true;
  };
  try {
    for (const trigger of triggers) {
      const fromSeq = reader.rows.at(-1)?.seq ?? 0;
      const proc = startExarch(runId === undefined ? TASK : ['resume', runId], server, cwd);
      const { landed, run } = await killWhen(proc, trigger, reader, fromSeq, server, cwd);
      runId ??= runIdIn(run.stderr);
      // Let the server take in whatever the dead process had already sent.
      await sleep(30);
      const { rows } = readStore(cwd);
      const effects = existsSync(join(cwd, EFFECTS)) ? readFileSync(join(cwd, EFFECTS), 'utf8') : '';
      kills.push({
        trigger: describeTrigger(trigger),
        landed,
        requestsBefore: server.requests.length,
        rows,
        effects,
        phases: landed ? phasesAt(rows, effects) : [],
      });
      if (runId === undefined) {
        problems.push(`no run id on stderr of the first process:\n${run.stderr}`);
        return { name, kills, problems, ms: Date.now() - started, unknown: [], rerun: [], lost, reasked: 0 };
      }
      if (!landed) {
        // It finished before the trigger fired: it must have finished as an uninterrupted run does.
        if (run.code !== 0) problems.push(`a process that was not killed exited ${String(run.code)}:\n${run.stderr}`);
        if (!nothingPrinted(run)) answer = run.stdout;
        finished = true;
        break;
      }
      if (run.stdout !== '') answer = run.stdout;
    }
    if (!finished) {
      const last = await startExarch(['resume', runId ?? ''], server, cwd).closed;
      if (last.code !== 0) problems.push(`the last resume exited ${String(last.code)}:\n${last.stderr}`);
      if (last.stdout !== '') {
        if (answer !== undefined) problems.push(`the answer was printed twice: by a killed process (${JSON.stringify(answer)}) and by the resume`);
        answer = last.stdout;
      } else if (answer === undefined && !nothingPrinted(last)) {
        problems.push(`no process printed the answer; the last resume said:\n${last.stderr}`);
      }
    }
    // Known bug struck: the answer the journal holds stands in for stdout.
    if (lost) answer = `${rootFinalText(readStore(cwd).rows)}\n`;
    problems.push(...checkRun(cwd, server, kills, answer ?? ''));
  } finally {
    reader.close();
  }
  const caught = (id: string) => kills.some((k) => k.landed && [...replayJournal(k.rows).values()].some((s) => s.pending.has(id)));
  const unknown = Object.values(SHELL_CALLS).filter((id) => resultsFor(server.requests, id)[0]?.isError === true);
  const rerun = Object.values(IDEMPOTENT_CALLS).filter(caught);
  const steps = server.requests.map((r) => `${r.agent}@${stepOf(r)}`);
  const reasked = steps.length - new Set(steps).size;
  const result = { name, kills, problems, ms: Date.now() - started, unknown, rerun, lost, reasked };
  if (process.env['CRASH_VERBOSE'])
    console.log(
      `${name} (${result.ms} ms): ${result.kills.map((k) => `${k.trigger}${k.landed ? ` → ${k.phases.join('/')}` : ' (missed)'}`).join(' ; ')}; unknown: ${unknown.join(',')}; re-run: ${rerun.join(',')}`,
    );
  return result;
}

/** Every oracle of a finished run. */
function checkRun(cwd: string, server: AnthropicTestServer, kills: readonly KillRecord[], answer: string): string[] {
  const problems: string[] = [];
  const { rows, status } = readStore(cwd);
  if (baseline !== undefined && answer !== baseline.stdout) problems.push(`stdout differs from the uninterrupted run's:\n${answer}`);
  if (status !== 'done') problems.push(`the run ended ${String(status)}, not done`);

  // Pairing, by the server's check and by ours, in every request any process made.
  for (const v of server.pairingViolations) problems.push(`request ${v.index} (${v.agent}) broke the pairing rule: ${v.problems.join('; ')}`);
  for (const request of server.requests) {
    const own = pairingProblems(request.body.messages);
    if (own.length > 0) problems.push(`request ${request.index} (${request.agent}): ${own.join('; ')}`);
  }

  // An agent's history is never rewritten: each request extends every earlier one of that agent.
  const byAgent = new Map<string, typeof server.requests>();
  for (const request of server.requests) byAgent.set(request.agent, [...(byAgent.get(request.agent) ?? []), request]);
  for (const [agent, requests] of byAgent) {
    const sorted = [...requests].sort((a, b) => stepOf(a) - stepOf(b) || a.index - b.index);
    for (let i = 1; i < sorted.length; i += 1) {
      const before = plainMessages(sorted[i - 1]?.body.messages ?? []);
      const after = plainMessages(sorted[i]?.body.messages ?? []);
      if (JSON.stringify(after.slice(0, before.length)) !== JSON.stringify(before)) {
        problems.push(
          `${agent}: request ${sorted[i]?.index} (step ${stepOf(sorted[i]!)}) does not extend request ${sorted[i - 1]?.index} (step ${stepOf(sorted[i - 1]!)})`,
        );
      }
    }
  }

  // A response committed before a kill is never asked for again.
  for (const kill of kills) {
    if (!kill.landed) continue;
    const committed = replayJournal(kill.rows);
    for (const request of server.requests.slice(kill.requestsBefore)) {
      const s = committed.get(request.agent);
      if (s === undefined) continue;
      if (s.phase === 'done') problems.push(`${request.agent} had finished before the kill (${kill.trigger}) but was asked again (request ${request.index})`);
      else if (stepOf(request) < s.steps)
        problems.push(`${request.agent}: step ${stepOf(request)} was committed before the kill (${kill.trigger}) and asked again (request ${request.index})`);
    }
  }

  // Shell commands: at most once per call id; exactly once when completed; "unknown" only for a call a kill caught in flight.
  const counts = effectCounts(cwd);
  const known = new Set<string>(Object.values(SHELL_CALLS));
  for (const marker of counts.keys()) if (!known.has(marker)) problems.push(`effects.log has an unexpected line ${marker}`);
  for (const id of known) {
    const n = counts.get(id) ?? 0;
    const results = resultsFor(server.requests, id);
    if (n > 1) problems.push(`${id} ran ${n} times`);
    if (results.length === 0) {
      problems.push(`${id}: no request shows its result`);
      continue;
    }
    const first = results[0]!;
    if (results.some((r) => r.text !== first.text || r.isError !== first.isError))
      problems.push(`${id}: its result changed between requests: ${JSON.stringify([...new Set(results.map((r) => r.text))])}`);
    if (!first.isError) {
      if (n !== 1) problems.push(`${id} completed (${JSON.stringify(first.text)}) but ran ${n} times`);
    } else if (!/unknown/.test(first.text)) {
      problems.push(`${id}: error result without "unknown": ${first.text}`);
    } else if (!kills.some((k) => k.landed && [...replayJournal(k.rows).values()].some((s) => s.pending.has(id)))) {
      problems.push(`${id} was answered "unknown" but no kill caught it in flight`);
    }
  }
  // Idempotent calls are run again when a kill caught them: they always end with a real result.
  for (const id of Object.values(IDEMPOTENT_CALLS)) {
    const results = resultsFor(server.requests, id);
    if (results.length === 0) problems.push(`${id}: no request shows its result`);
    else if (results.some((r) => r.isError)) problems.push(`${id}: ${results.find((r) => r.isError)?.text}`);
    else if (new Set(results.map((r) => r.text)).size > 1) problems.push(`${id}: its result changed between requests`);
  }

  // Every report reaches its parent exactly once.
  const lastOf = (agent: string) => [...(byAgent.get(agent) ?? [])].sort((a, b) => stepOf(a) - stepOf(b)).at(-1);
  const rootLast = lastOf('root');
  const alphaLast = lastOf('alpha');
  for (const [request, child] of [
    [rootLast, 'alpha'],
    [rootLast, 'beta'],
    [alphaLast, 'gamma'],
  ] as const) {
    const n = request ? tagCount(request, child) : 0;
    if (n !== 1) problems.push(`${child}'s report is in its parent's last request ${n} times`);
  }
  const inboxes = new Map<string, number>();
  const outcomes = new Map<string, string[]>();
  for (const row of rows) {
    if (row.type === 'inbox') {
      const key = `${nameOf(row.session)} ← ${String((row.body['result'] as { name: string }).name)}`;
      inboxes.set(key, (inboxes.get(key) ?? 0) + 1);
    }
    if (row.type === 'outcome') outcomes.set(nameOf(row.session), [...(outcomes.get(nameOf(row.session)) ?? []), String(row.body['outcome'])]);
  }
  for (const key of ['root ← alpha', 'root ← beta', 'alpha ← gamma'])
    if (inboxes.get(key) !== 1) problems.push(`journal: ${inboxes.get(key) ?? 0} deliveries ${key}`);
  for (const child of ['alpha', 'beta', 'gamma'])
    if (JSON.stringify(outcomes.get(child)) !== '["replied"]') problems.push(`journal: outcomes of ${child}: ${JSON.stringify(outcomes.get(child))}`);
  return problems;
}

/** Runs `jobs` with at most PARALLEL at a time. */
async function pool<T>(jobs: readonly (() => Promise<T>)[]): Promise<T[]> {
  const results: T[] = new Array<T>(jobs.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < jobs.length) {
      const i = next++;
      results[i] = await jobs[i]!();
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, jobs.length) }, worker));
  return results;
}

function summary(results: readonly CaseResult[]): string {
  const kills = results.flatMap((r) => r.kills);
  const landed = kills.filter((k) => k.landed);
  const phases = new Map<string, number>();
  for (const k of landed) for (const p of k.phases) phases.set(p, (phases.get(p) ?? 0) + 1);
  const spread = [...phases]
    .sort((a, b) => b[1] - a[1])
    .map(([p, n]) => `${p} ${n}`)
    .join(', ');
  const unknown = results.reduce((n, r) => n + r.unknown.length, 0);
  const lost = results.filter((r) => r.lost).length;
  const reasked = results.reduce((n, r) => n + r.reasked, 0);
  const rerun = results.reduce((n, r) => n + r.rerun.length, 0);
  return (
    `${landed.length} kills landed in ${results.length} runs (${kills.length - landed.length} processes finished before their trigger); journal at the kills: ${spread}; ` +
    `${reasked} streams asked again from the same history, ${unknown} shell calls answered "unknown", ${rerun} idempotent calls caught in flight and run again` +
    (lost > 0 ? `; final answer lost ${lost} time(s): journaled, killed before printing, resume printed nothing` : '')
  );
}

function failures(results: readonly CaseResult[]): string[] {
  return results.flatMap((r) =>
    r.problems.map((p) => `[${r.name}; kills: ${r.kills.map((k) => `${k.trigger}${k.landed ? ` → ${k.phases.join('/')}` : ' (missed)'}`).join(' ; ')}] ${p}`),
  );
}

/** The kill points of the single-kill runs, spread over the run by a seeded PRNG. */
function singleKillTriggers(random: () => number, spanMs: number, requests: number): { name: string; trigger: Trigger }[] {
  const between = (lo: number, hi: number) => Math.round(lo + random() * (hi - lo));
  const out: { name: string; trigger: Trigger }[] = [];
  // Time: stratified over the uninterrupted run's span (first to last journal record).
  const times = 8;
  for (let i = 0; i < times; i += 1)
    out.push({ name: `time ${i + 1}/${times}`, trigger: { kind: 'time', ms: Math.round(((i + random()) / times) * spanMs * 0.95) } });
  // Requests: stratified over the requests of the uninterrupted run; the kill lands while that stream runs (or just after).
  const byRequest = 8;
  for (let i = 0; i < byRequest; i += 1) {
    out.push({
      name: `request ${i + 1}/${byRequest}`,
      trigger: { kind: 'request', nth: 1 + Math.floor(((i + random()) / byRequest) * requests), delayMs: between(0, 120) },
    });
  }
  // Shell commands running (the slow ones sleep 0.4 s and 0.5 s): mid-batch.
  out.push({ name: 'alpha slow shell', trigger: { kind: 'effect', marker: SHELL_CALLS.alpha, delayMs: between(0, 150) } });
  out.push({ name: 'alpha slow shell, later', trigger: { kind: 'effect', marker: SHELL_CALLS.alpha, delayMs: between(200, 380) } });
  out.push({ name: 'gamma slow shell', trigger: { kind: 'effect', marker: SHELL_CALLS.gammaSlow, delayMs: between(0, 200) } });
  out.push({ name: 'gamma slow shell, later', trigger: { kind: 'effect', marker: SHELL_CALLS.gammaSlow, delayMs: between(250, 450) } });
  out.push({ name: 'beta fast shell', trigger: { kind: 'effect', marker: SHELL_CALLS.beta, delayMs: between(0, 10) } });
  // Journal records: committed batches, nudges, deliveries, outcomes.
  const journal = (name: string, session: string | undefined, type: string, nth: number, lo: number, hi: number) =>
    out.push({ name, trigger: { kind: 'journal', ...(session === undefined ? {} : { session }), type, nth, delayMs: between(lo, hi) } });
  journal('root batch (spawns, list_dir)', 'root', 'usage', 1, 0, 30);
  journal('beta batch (shell, big read_file)', 'root/beta', 'usage', 1, 0, 40);
  journal('gamma second batch (fast shell, write_file)', 'root/alpha/gamma', 'usage', 2, 0, 20);
  journal('beta nudged', 'root/beta', 'nudge', 1, 0, 120);
  journal('gamma nudged', 'root/alpha/gamma', 'nudge', 1, 0, 120);
  journal('beta finished', 'root/beta', 'outcome', 1, 0, 10);
  journal('beta delivered to root', 'root', 'inbox', 1, 0, 60);
  journal('beta delivered, later', 'root', 'inbox', 1, 100, 300);
  journal('gamma delivered to alpha', 'root/alpha', 'inbox', 1, 0, 60);
  journal('alpha finished', 'root/alpha', 'outcome', 1, 0, 10);
  journal('second delivery to root', 'root', 'inbox', 2, 0, 60);
  journal('root rests, children running', 'root', 'usage', 2, 0, 200);
  journal('root final stream', 'root', 'message', 5, 0, 150);
  // After the final response: the run is settled but the process has not printed or exited yet.
  out.push({
    name: 'final answer journaled',
    trigger: { kind: 'journal', session: 'root', type: 'message', contains: 'Tree report', nth: 1, delayMs: between(0, 5) },
  });
  journal('root stopped (last journal record)', 'root', 'stopped', 1, 0, 0);
  return out;
}

/** Runs killed two or three times: the run, then resumes of it. */
function chainTriggers(random: () => number, spanMs: number): { name: string; triggers: Trigger[] }[] {
  const between = (lo: number, hi: number) => Math.round(lo + random() * (hi - lo));
  const time = (lo: number, hi: number): Trigger => ({ kind: 'time', ms: between(lo * spanMs, hi * spanMs) });
  return [
    { name: 'three timed kills', triggers: [time(0.1, 0.4), time(0.1, 0.4), time(0.1, 0.4)] },
    { name: 'two late timed kills', triggers: [time(0.5, 0.8), time(0.2, 0.5)] },
    {
      name: 'mid-shell, then nudged, then any tool result',
      triggers: [
        { kind: 'effect', marker: SHELL_CALLS.gammaSlow, delayMs: between(50, 300) },
        { kind: 'journal', type: 'nudge', nth: 1, delayMs: between(0, 80) },
        { kind: 'journal', type: 'tool', nth: 1, delayMs: 0 },
      ],
    },
    {
      name: 'each process killed at an early request',
      triggers: [
        { kind: 'request', nth: 3, delayMs: between(0, 60) },
        { kind: 'request', nth: 2, delayMs: between(0, 60) },
        { kind: 'request', nth: 2, delayMs: between(0, 60) },
      ],
    },
    {
      name: 'delivery pending, then the resume killed as it starts',
      triggers: [
        { kind: 'journal', session: 'root', type: 'inbox', nth: 1, delayMs: between(0, 40) },
        { kind: 'time', ms: between(0, 40) },
      ],
    },
    {
      name: 'alpha shell in flight, resume killed at its first committed response, then at a delivery',
      triggers: [
        { kind: 'effect', marker: SHELL_CALLS.alpha, delayMs: between(50, 300) },
        { kind: 'journal', type: 'usage', nth: 1, delayMs: 0 },
        { kind: 'journal', type: 'inbox', nth: 1, delayMs: between(0, 30) },
      ],
    },
  ];
}

describe('exarch run survives SIGKILL anywhere: resumed, it ends as the uninterrupted run did', () => {
  it('the uninterrupted run: one fixed answer, every effect once, every report once', async () => {
    const { cwd, server } = await newCase();
    const run = await startExarch(TASK, server, cwd).closed;
    expect(run.code, run.stderr).toBe(0);
    const { rows } = readStore(cwd);
    const spanMs = (rows.at(-1)?.ts ?? 0) - (rows[0]?.ts ?? 0);
    expect(run.stdout).toBe(
      'Tree report\nalpha (1 report) replied: alpha heard gamma (1 report) replied: gamma stamped twice\nbeta (1 report) replied: beta stamped\n',
    );
    baseline = { stdout: run.stdout, spanMs, requests: server.requests.length };
    expect(checkRun(cwd, server, [], run.stdout)).toEqual([]);
    expect([...effectCounts(cwd).values()]).toEqual([1, 1, 1, 1]);
  });

  it('SIGKILL at seeded points of the tree (streams, batches with a slow tool, deliveries, nudges), then resume', async () => {
    if (!baseline) throw new Error('the uninterrupted run did not pass');
    const random = mulberry32(SEED);
    const cases = singleKillTriggers(random, baseline.spanMs, baseline.requests);
    const started = Date.now();
    const results = await pool(
      cases.map(
        ({ name, trigger }) =>
          () =>
            crashCase(name, [trigger]),
      ),
    );
    console.log(`crash (seed ${SEED}), single kills, ${Math.round((Date.now() - started) / 1000)} s: ${summary(results)}`);
    expect(failures(results)).toEqual([]);
    const landed = results.flatMap((r) => r.kills).filter((k) => k.landed);
    expect(landed.length).toBeGreaterThanOrEqual(30);
    // The kills reached every kind of point the test is about.
    for (const phase of [
      'streaming',
      'batch open',
      'shell call in flight',
      'idempotent call in flight',
      'delivered, not yet seen',
      'nudged',
      'resting, children running',
    ]) {
      expect(landed.filter((k) => k.phases.includes(phase)).length, phase).toBeGreaterThan(0);
    }
    // Hang guards, not speed checks: under load (CI, two suites at once) these took 240 s and more.
  }, 600_000);

  it('several kills of the same run: the run and its resumes killed in turn', async () => {
    if (!baseline) throw new Error('the uninterrupted run did not pass');
    const random = mulberry32(SEED + 1);
    const chains = chainTriggers(random, baseline.spanMs);
    const started = Date.now();
    const results = await pool(
      chains.map(
        ({ name, triggers }) =>
          () =>
            crashCase(name, triggers),
      ),
    );
    console.log(`crash (seed ${SEED}), repeated kills, ${Math.round((Date.now() - started) / 1000)} s: ${summary(results)}`);
    expect(failures(results)).toEqual([]);
    expect(results.filter((r) => r.kills.filter((k) => k.landed).length >= 2).length).toBeGreaterThanOrEqual(4);
  }, 450_000);

  /**
   * A SIGKILL that lands after the root's final response is journaled but before the process
   * printed it leaves a run whose row still says `running`, with a dead owner. `exarch resume`
   * finds the journal settled and must end as `exarch run` would have: the answer on stdout, exit 0,
   * no request (a regression test: it once said "already finished" and printed nothing).
   *
   * The kill is real when one lands in that window (killing as soon as the final response is in
   * the journal does, often but not always: the process still stops the tree, flushes and releases
   * the run before printing). Otherwise the store is put in the state such a kill leaves: the row
   * back to `running`, owned by a process that no longer exists, the last journal burst (the root's
   * `stopped` record) not written.
   */
  it('a SIGKILL between the final response and its printing: resume prints the final answer without a request', async () => {
    const cwd = workdir();
    const server = await startAnthropicServer(historyHandler({ root: [stream({ text: 'The answer.' })] }));
    onCleanup(() => server.close());
    let id: string | undefined;
    for (let attempt = 0; attempt < 6 && id === undefined; attempt += 1) {
      rmSync(join(cwd, '.exarch'), { recursive: true, force: true });
      const proc = startExarch(['run', 'Answer.'], server, cwd);
      const reader = new JournalReader(storeFile(cwd));
      const poll = setInterval(() => {
        reader.poll();
        if (reader.rows.some((r) => r.session === 'root' && r.type === 'usage')) proc.child.kill('SIGKILL');
      }, 1);
      const run = await proc.closed;
      clearInterval(poll);
      reader.close();
      if (
        run.signal === 'SIGKILL' &&
        run.stdout === '' &&
        readStore(cwd).status === 'running' &&
        readStore(cwd).rows.some((r) => r.session === 'root' && r.type === 'usage')
      )
        id = runIdIn(run.stderr);
    }
    if (id === undefined) {
      // No kill landed in the window: make the state it leaves from a finished run.
      rmSync(join(cwd, '.exarch'), { recursive: true, force: true });
      const run = await startExarch(['run', 'Answer.'], server, cwd).closed;
      expect(run.stdout).toBe('The answer.\n');
      id = runIdIn(run.stderr) ?? '';
      const dead = spawnSync(process.execPath, ['-e', '']).pid;
      const db = new Database(storeFile(cwd));
      db.prepare(
        "UPDATE runs SET status = 'running', owner_host = ?, owner_pid = ?, owner_token = 'killed', lease_until = ?, ended_at = NULL WHERE id = ?",
      ).run(hostname(), dead, Date.now() + 30_000, id);
      // Take the `stopped` records out of the bursts that hold them (a burst is a JSON array of
      // [session, ts, record], keyed by its run's number times 2^32 plus its first seq).
      const bursts = db
        .prepare('SELECT b.key, b.key - u.num * 4294967296 AS seq, b.records FROM runs AS u JOIN bursts AS b ON b.key / 4294967296 = u.num WHERE u.id = ?')
        .all(id) as { key: number; seq: number; records: string }[];
      expect(bursts.length).toBeGreaterThan(0);
      for (const burst of bursts) {
        const kept = (JSON.parse(burst.records) as [string, number, { type: string }][]).filter(([, , record]) => record.type !== 'stopped');
        if (kept.length === 0) db.prepare('DELETE FROM bursts WHERE key = ?').run(burst.key);
        else db.prepare('UPDATE bursts SET records = ?, last = ? WHERE key = ?').run(JSON.stringify(kept), burst.seq + kept.length - 1, burst.key);
      }
      db.close();
    }
    const requests = server.requests.length;
    const resumed = await startExarch(['resume', id], server, cwd).closed;
    expect(resumed.code).toBe(0);
    expect(server.requests.length).toBe(requests);
    expect(resumed.stdout, resumed.stderr).toBe('The answer.\n');
  });
});
