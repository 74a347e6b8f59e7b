import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type ReceivedRequest, type ServerPlan } from '../../support/anthropicServer.js';
import { call, exarch, MAIN, onCleanup, stream, workdir } from '../../support/cliHarness.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { query, rootAnswer, statusOf } from '../../support/storedRuns.js';
import { processesWith } from '../../support/processes.js';

/**
 * Issue 18's fault test: three `exarch worker` processes share one run of a root and its
 * sub-agents (each calls a side-effecting MCP tool, then replies; the model server answers each
 * request after 50–200 ms). The worker running it is SIGKILLed mid-run, the one that takes it up
 * is SIGTERMed mid-run, the third finishes it; then the Postgres server restarts under a run a
 * worker is running. The run completes each time with every report delivered exactly once, each
 * side-effecting call run at most once, and the root's answer the answer of a run in one process.
 *
 * Without --spread a run's whole tree lives on one worker (docs/scaling.md): the faults move the
 * whole run. With --spread each sub-agent is a job of its own: the faults move sessions.
 */

const postgres = postgresForFile('test/e2e/workers/workers.faults.test.ts');

/** Sub-agents in the run. */
const AGENTS = 300;

const MCP_SERVER = fileURLToPath(new URL('../../fixtures/mcp/server.mjs', import.meta.url));

/** A model's time to answer, 50–200 ms, fixed for each agent's step so every run sees the same. */
function latency(agent: string, step: number): number {
  let hash = step * 7919;
  for (const char of agent) hash = (hash * 31 + char.charCodeAt(0)) >>> 0;
  return 50 + (hash % 151);
}

const REPORT = /\[agent '(c\d+)' replied\]\n(c\d+ done)/g;

/** Every text the root was given, results and reports included. */
function heard(request: ReceivedRequest): string {
  return request.body.messages
    .filter((m) => m.role === 'user')
    .flatMap((m) =>
      typeof m.content === 'string'
        ? [m.content]
        : m.content.map((b) => (b.type === 'text' ? String(b['text']) : b.type === 'tool_result' ? JSON.stringify(b['content']) : '')),
    )
    .join('\n');
}

/**
 * The root starts every sub-agent and waits for them all; then it answers with the reports it got:
 * how many, from how many agents, and each, sorted (the order they arrive in is the run's own).
 * Each sub-agent appends its name to effects.txt through the MCP server, then replies.
 */
function fanOut(names: readonly string[]): Parameters<typeof historyHandler>[0] {
  const scripts: Record<string, ((request: ReceivedRequest) => ServerPlan)[]> = {
    root: [
      () =>
        stream(
          { toolCalls: [...names.map((name) => call('agent', { name, task: `Record ${name}.` })), call('wait_for_agents', {})] },
          { latencyMs: latency('root', 0) },
        ),
      (request) => {
        const reports = [...heard(request).matchAll(REPORT)].map((m) => m[2] ?? '');
        const agents = new Set([...heard(request).matchAll(REPORT)].map((m) => m[1]));
        return stream({ text: `${reports.length} reports from ${agents.size} agents\n${reports.sort().join('\n')}` }, { latencyMs: latency('root', 1) });
      },
    ],
  };
  for (const name of names) {
    scripts[name] = [
      () => stream({ toolCalls: [call('mcp__test_server__append', { file: 'effects.txt', line: name })] }, { latencyMs: latency(name, 0) }),
      () => stream({ toolCalls: [call('reply', { result: `${name} done` })] }, { latencyMs: latency(name, 1) }),
    ];
  }
  return scripts;
}

/** Why a run did not end well: its sessions' failed or capped outcomes, and the root's last records. */
async function failures(db: string, id: string): Promise<string> {
  const bad = await query<{ session: string; body: string }>(
    db,
    `SELECT session, body FROM exarch.journal WHERE run_id = '${id}' AND type = 'outcome' AND body NOT LIKE '%"outcome":"replied"%' ORDER BY seq`,
  );
  const root = await query<{ seq: number; type: string; body: string }>(
    db,
    `SELECT seq, type, left(body, 300) AS body FROM exarch.journal WHERE run_id = '${id}' AND session IN ('root', '') ORDER BY seq DESC LIMIT 12`,
  );
  return [...bad.map((r) => `${r.session}: ${r.body.slice(0, 300)}`), '--- the root, last first', ...root.map((r) => `${r.seq} ${r.type} ${r.body}`)].join(
    '\n',
  );
}

/** Where a spread run stands: its sessions that never ended, the root's last records, its jobs by state. */
async function spreadState(db: string, id: string): Promise<string> {
  const open = await query<{ session: string; last: string }>(
    db,
    `SELECT session, (array_agg(type ORDER BY seq DESC))[1] AS last FROM exarch.journal WHERE run_id = '${id}' GROUP BY session
     HAVING count(*) FILTER (WHERE type = 'outcome') = 0 ORDER BY session LIMIT 20`,
  );
  const jobs = await query<{ state: string; session: string | null; n: number }>(
    db,
    `SELECT state, data->>'session' AS session, count(*)::int AS n FROM pgboss.job WHERE data->>'runId' = '${id}' AND state <> 'completed' GROUP BY 1, 2 ORDER BY 1, 2 LIMIT 20`,
  );
  const claims = await query<{ session: string; owner_pid: number | null; lease_until: string }>(
    db,
    `SELECT session, owner_pid, lease_until FROM exarch.sessions WHERE run_id = '${id}' AND owner_token IS NOT NULL LIMIT 20`,
  );
  return [
    `--- sessions without an outcome: ${open.map((r) => `${r.session} (last ${r.last})`).join(', ')}`,
    `--- jobs not completed: ${jobs.map((j) => `${j.state} ${j.session ?? 'root'} ×${j.n}`).join(', ')}`,
    `--- claims held: ${claims.map((c) => `${c.session} by ${c.owner_pid} until ${c.lease_until}`).join(', ')} (now ${Date.now()})`,
    await failures(db, id),
  ].join('\n');
}

async function until(check: () => boolean | Promise<boolean>, what: string, ms: number, log: () => string = () => ''): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface WorkerProcess {
  readonly name: string;
  readonly child: ReturnType<typeof spawn>;
  readonly closed: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
}

function startWorker(name: string, db: string, env: NodeJS.ProcessEnv, cwd: string, extra: readonly string[] = []): WorkerProcess {
  const child = spawn(process.execPath, [MAIN, 'worker', '--db', db, '--job-expiry', '4', '--drain-timeout', '1', ...extra], {
    cwd,
    env,
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await closed;
  });
  return { name, child, closed, stderr: () => stderr };
}

/** Each line of effects.txt: one per run of the side-effecting call. */
function effects(cwd: string): string[] {
  const file = join(cwd, 'effects.txt');
  return existsSync(file)
    ? readFileSync(file, 'utf8')
        .trimEnd()
        .split('\n')
        .filter((line) => line !== '')
    : [];
}

/**
 * Each side-effecting call of run `id` ran at most once (one in flight at a fault is answered, not
 * run again), and a call its agent was told had run did run.
 */
async function expectEffectsAtMostOnce(db: string, id: string, cwd: string, names: readonly string[]): Promise<void> {
  const done = effects(cwd);
  expect(new Set(done).size).toBe(done.length);
  expect(done.every((line) => names.includes(line))).toBe(true);
  const ran = await query<{ session: string }>(
    db,
    `SELECT DISTINCT session FROM exarch.journal WHERE run_id = '${id}' AND type = 'message' AND body LIKE '%appended to effects.txt%'`,
  );
  const told = ran.map((r) => r.session.slice('root/'.length)).sort();
  expect(told.length).toBeGreaterThan(0);
  expect(told.filter((name) => !done.includes(name))).toEqual([]);
}

describe.skipIf(!postgres.available)('workers under faults', () => {
  it(`a run of ${AGENTS} sub-agents survives a SIGKILLed worker, a SIGTERMed one and a Postgres restart: each report once, each effect at most once, the answer of one process`, {
    timeout: 900_000,
  }, async () => {
    const names = Array.from({ length: AGENTS }, (_, i) => `c${String(i).padStart(3, '0')}`);
    const scripted = historyHandler(fanOut(names));
    // While set, the root's requests wait: a run cannot end while a worker is being stopped, so
    // the SIGTERMed worker must hand it back however fast the rest of the tree goes.
    let rootHeld: Promise<void> | undefined;
    const model = await startAnthropicServer(async (request) => {
      if (request.agent === 'root' && rootHeld) await rootHeld;
      return scripted(request);
    });
    onCleanup(() => model.close());
    // A word the MCP server ignores, to find (and clean up) the servers this test starts.
    const marker = `faults-${process.pid}-${Date.now()}`;
    onCleanup(() => {
      for (const pid of processesWith(marker)) process.kill(pid, 'SIGKILL');
    });
    const mcp = `'${process.execPath}' '${MCP_SERVER}' stdio normal ${marker}`;
    const task = 'Have every sub-agent record its name.';

    // The oracle: the same run in one process, no faults.
    const alone = workdir();
    const single = await exarch(['run', '--no-store', '--mcp', mcp, task], { server: model, cwd: alone });
    expect(single.code, single.stderr.slice(-2000)).toBe(0);
    expect(single.stdout).toBe(`${AGENTS} reports from ${AGENTS} agents\n${names.map((n) => `${n} done`).join('\n')}\n`);
    expect(effects(alone).sort()).toEqual(names);

    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const env = { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url };
    const workers = ['w1', 'w2', 'w3'].map((name) => startWorker(name, db, env, cwd));
    const log = (): string => workers.map((w) => `--- ${w.name}\n${w.stderr()}`).join('\n');
    await until(() => workers.every((w) => w.stderr().includes('exarch worker: ready')), 'the workers to be ready', 60_000, log);
    const submitted = await exarch(['run', '--db', db, '--detach', '--mcp', mcp, task], { cwd, env: { ANTHROPIC_API_KEY: 'test-key' } });
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stdout.trim();
    const subAgentRequests = (): number => model.requests.filter((r) => r.agent !== 'root').length;
    const holder = (event: 'started' | 'resumed', except: readonly WorkerProcess[]): WorkerProcess | undefined =>
      workers.find((w) => !except.includes(w) && w.stderr().includes(`exarch worker: run ${id} ${event}`));

    // 1. SIGKILL the worker running it, a third of the way through its sub-agents' requests.
    const base = subAgentRequests();
    await until(() => holder('started', []) !== undefined, 'a worker to take the run', 60_000, log);
    const first = holder('started', []) as WorkerProcess;
    await until(() => subAgentRequests() - base >= (2 * AGENTS) / 3, 'the sub-agents to get going', 300_000, log);
    let releaseRoot = (): void => undefined;
    rootHeld = new Promise<void>((resolve) => (releaseRoot = resolve));
    first.child.kill('SIGKILL');
    expect((await first.closed).signal).toBe('SIGKILL');

    // 2. The job expires, another worker resumes the run; SIGTERM it a while later.
    await until(() => holder('resumed', [first]) !== undefined, 'another worker to resume the run', 120_000, log);
    const second = holder('resumed', [first]) as WorkerProcess;
    const resumedAt = subAgentRequests();
    await until(async () => subAgentRequests() - resumedAt >= 1 || (await statusOf(db, id)) === 'done', 'the second worker to get going', 300_000, log);
    expect(await statusOf(db, id)).toBe('running');
    second.child.kill('SIGTERM');
    expect(await second.closed).toEqual({ code: 0, signal: null });
    expect(second.stderr()).toContain(`exarch worker: run ${id} handed back to the queue`);
    rootHeld = undefined;
    releaseRoot();

    // 3. The third takes it up and finishes it.
    const third = workers.find((w) => w !== first && w !== second) as WorkerProcess;
    await until(async () => ['done', 'failed', 'capped'].includes((await statusOf(db, id)) ?? ''), 'the third worker to finish the run', 300_000, log);
    expect(await statusOf(db, id), await failures(db, id)).toBe('done');
    expect(third.stderr()).toContain(`exarch worker: run ${id} resumed`);
    expect(third.stderr()).toContain(`exarch worker: run ${id} done`);

    // Every report delivered to the root exactly once: the root counted them and listed each.
    expect(await rootAnswer(db, id)).toBe(single.stdout.trimEnd());
    await expectEffectsAtMostOnce(db, id, cwd, names);
    expect(model.pairingViolations).toEqual([]);

    // 4. Postgres restarts under a run the last worker is running: it completes, nothing lost.
    const again = workdir();
    const restartedAt = subAgentRequests();
    const next = await exarch(['run', '--db', db, '--detach', '--mcp', mcp, task], { cwd: again, env: { ANTHROPIC_API_KEY: 'test-key' } });
    const id2 = next.stdout.trim();
    await until(() => subAgentRequests() - restartedAt >= AGENTS / 2, 'the run to get going', 300_000, log);
    expect(await statusOf(db, id2)).toBe('running');
    await postgres.server().restart({ downMs: 2_000 });
    await until(async () => ['done', 'failed', 'capped'].includes((await statusOf(db, id2)) ?? ''), 'the run to finish after the restart', 300_000, log);
    expect(await statusOf(db, id2), await failures(db, id2)).toBe('done');
    expect(await rootAnswer(db, id2)).toBe(single.stdout.trimEnd());
    expect(effects(again).sort()).toEqual(names);
    // The same worker ran it through the restart: it was never handed over or failed.
    expect(third.stderr()).toContain(`exarch worker: run ${id2} started`);
    expect(third.stderr()).toContain(`exarch worker: run ${id2} done`);
    expect(third.stderr()).not.toContain(`exarch worker: run ${id2} resumed`);
    expect(third.child.exitCode).toBeNull();
    expect(model.pairingViolations).toEqual([]);
  });
  it(`--spread: a run of ${AGENTS} sub-agents, each a job of its own, survives a SIGKILLed worker, a SIGTERMed one and a Postgres restart: each report once, each effect at most once, the answer of one process`, {
    timeout: 900_000,
  }, async () => {
    const names = Array.from({ length: AGENTS }, (_, i) => `c${String(i).padStart(3, '0')}`);
    const scripted = historyHandler(fanOut(names));
    // While set, every request waits: the SIGTERMed worker's sessions cannot end or park in time,
    // so it must hand them back.
    let held: Promise<void> | undefined;
    const model = await startAnthropicServer(async (request) => {
      if (held) await held;
      return scripted(request);
    });
    onCleanup(() => model.close());
    const marker = `spread-${process.pid}-${Date.now()}`;
    onCleanup(() => {
      for (const pid of processesWith(marker)) process.kill(pid, 'SIGKILL');
    });
    const mcp = `'${process.execPath}' '${MCP_SERVER}' stdio normal ${marker}`;
    const task = 'Have every sub-agent record its name.';

    const alone = workdir();
    const single = await exarch(['run', '--no-store', '--mcp', mcp, task], { server: model, cwd: alone });
    expect(single.code, single.stderr.slice(-2000)).toBe(0);

    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const env = { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url };
    const workers = ['w1', 'w2', 'w3'].map((name) => startWorker(name, db, env, cwd, ['--concurrency', '16']));
    const log = (): string => workers.map((w) => `--- ${w.name}\n${w.stderr().slice(-3000)}`).join('\n');
    await until(() => workers.every((w) => w.stderr().includes('exarch worker: ready')), 'the workers to be ready', 60_000, log);
    const submitted = await exarch(['run', '--db', db, '--detach', '--spread', '--mcp', mcp, task], { cwd, env: { ANTHROPIC_API_KEY: 'test-key' } });
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = submitted.stdout.trim();
    const subAgentRequests = (): number => model.requests.filter((r) => r.agent !== 'root').length;
    const ranSessions = (w: WorkerProcess): number => w.stderr().split(`exarch worker: run ${id} session root/`).length - 1;

    // 1. SIGKILL the first worker once a third of the sub-agents' requests are made, while it runs some.
    const [first, second, third] = workers as [WorkerProcess, WorkerProcess, WorkerProcess];
    const base = subAgentRequests();
    await until(() => subAgentRequests() - base >= (2 * AGENTS) / 3 && ranSessions(first) > 0, 'the sub-agents to get going', 300_000, log);
    first.child.kill('SIGKILL');
    expect((await first.closed).signal).toBe('SIGKILL');

    // 2. A while later, SIGTERM the second with every request held: it hands its sessions back.
    const killedAt = subAgentRequests();
    await until(() => subAgentRequests() - killedAt >= AGENTS / 3, 'the run to go on without the first worker', 300_000, log);
    let release = (): void => undefined;
    held = new Promise<void>((resolve) => (release = resolve));
    await new Promise((resolve) => setTimeout(resolve, 300));
    second.child.kill('SIGTERM');
    expect(await second.closed).toEqual({ code: 0, signal: null });
    expect(second.stderr()).toMatch(new RegExp(`exarch worker: run ${id} session \\S+ handed back to the queue`));
    held = undefined;
    release();

    // 3. The third finishes the run.
    let state = '';
    await until(
      async () => {
        const ended = ['done', 'failed', 'capped'].includes((await statusOf(db, id)) ?? '');
        if (!ended) state = await spreadState(db, id);
        return ended;
      },
      'the third worker to finish the run',
      300_000,
      () => {
        // Every line a worker wrote about a session that never ended, and every error line.
        const stuck = [...state.matchAll(/(root\/c\d+) \(last/g)].map((m) => m[1] ?? '');
        const about = workers.flatMap((w) =>
          w
            .stderr()
            .split('\n')
            .filter((line) => stuck.some((session) => line.includes(`${session} `)) || / run \S+: /.test(line))
            .map((line) => `${w.name}: ${line}`),
        );
        return `${log()}\n${state}\n--- about them:\n${about.join('\n')}`;
      },
    );
    expect(await statusOf(db, id), await failures(db, id)).toBe('done');
    expect(third.stderr()).toContain(`exarch worker: run ${id} done`);
    // Every worker ran sessions of the run: it was spread, not moved whole.
    for (const w of workers) expect(ranSessions(w), w.name).toBeGreaterThan(0);

    // Every report delivered to the root exactly once: the root counted them and listed each, and its journal took each once.
    expect(await rootAnswer(db, id)).toBe(single.stdout.trimEnd());
    const inbox = await query<{ n: number }>(
      db,
      `SELECT count(*)::int AS n FROM exarch.journal WHERE run_id = '${id}' AND session = 'root' AND type = 'inbox' GROUP BY body::jsonb #>> '{result,name}' ORDER BY n DESC`,
    );
    expect(inbox).toHaveLength(AGENTS);
    expect(inbox[0]).toEqual({ n: 1 });
    await expectEffectsAtMostOnce(db, id, cwd, names);
    expect(model.pairingViolations).toEqual([]);

    // 4. Postgres restarts under a spread run the last worker runs: it completes, nothing lost.
    const again = workdir();
    const restartedAt = subAgentRequests();
    const next = await exarch(['run', '--db', db, '--detach', '--spread', '--mcp', mcp, task], { cwd: again, env: { ANTHROPIC_API_KEY: 'test-key' } });
    const id2 = next.stdout.trim();
    await until(() => subAgentRequests() - restartedAt >= AGENTS / 2, 'the run to get going', 300_000, log);
    expect(await statusOf(db, id2)).toBe('running');
    await postgres.server().restart({ downMs: 2_000 });
    await until(async () => ['done', 'failed', 'capped'].includes((await statusOf(db, id2)) ?? ''), 'the run to finish after the restart', 300_000, log);
    expect(await statusOf(db, id2), await failures(db, id2)).toBe('done');
    expect(await rootAnswer(db, id2)).toBe(single.stdout.trimEnd());
    expect(effects(again).sort()).toEqual(names);
    expect(third.child.exitCode).toBeNull();
    expect(model.pairingViolations).toEqual([]);
  });
});
