import { spawn } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest, type ServerPlan } from '../../support/anthropicServer.js';
import { call, exarch, freePort, lastUserText, MAIN, onCleanup, startExarch, stream, workdir, type CliRun } from '../../support/cliHarness.js';
import { postgresForFile } from '../../support/postgresServer.js';
import { collector, INTERNAL } from '../../support/otlpCollector.js';
import { query, rootAnswer, statusOf } from '../../support/storedRuns.js';
import { startInTerminal, tmux, tmuxForFile, waitFor } from '../../support/terminal.js';
import { processesWith } from '../../support/processes.js';

/**
 * `exarch run/runs/resume/view --db postgres://…` (issue 18): the durable-run commands against a
 * real PostgreSQL server the test starts. The store is checked with the test's own connection.
 */

const postgres = postgresForFile('test/e2e/workers/cli.postgres.test.ts');
const terminalTests = tmuxForFile('test/e2e/workers/cli.postgres.test.ts');

async function serveByHistory(scripts: Parameters<typeof historyHandler>[0]): Promise<AnthropicTestServer> {
  const model = await startAnthropicServer(historyHandler(scripts));
  onCleanup(() => model.close());
  return model;
}

const echo = (request: ReceivedRequest): ServerPlan => stream({ text: `Heard:\n${lastUserText(request)}` });

/** `slowMs`: the pause between the chunks of the worker's first answer, read as each request comes in. */
function delegatingScripts(slowMs: number | (() => number)): Parameters<typeof historyHandler>[0] {
  return {
    root: [stream({ toolCalls: [call('agent', { name: 'worker', task: 'List the files.' })] }), stream({ text: 'Waiting for worker.' }), echo],
    worker: [
      () => stream({ toolCalls: [call('list_dir', { path: '.' })] }, { chunkDelayMs: typeof slowMs === 'number' ? slowMs : slowMs() }),
      stream({ toolCalls: [call('reply', { result: 'two files' })] }),
    ],
  };
}

function runIdOf(run: CliRun): string {
  const id = /^exarch: run (\S+) started/m.exec(run.stderr)?.[1];
  if (!id) throw new Error(`no run id in:\n${run.stderr}`);
  return id;
}

async function until(check: () => boolean, what: string, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** `exarch worker` in the background; its stderr kept for the test. */
function startWorker(db: string, model: AnthropicTestServer, cwd: string, extra: readonly string[] = [], env: NodeJS.ProcessEnv = {}) {
  const child = spawn(process.execPath, [MAIN, 'worker', '--db', db, '--job-expiry', '4', ...extra], {
    cwd,
    env: { PATH: process.env['PATH'], CI: 'true', ANTHROPIC_API_KEY: 'test-key', ANTHROPIC_BASE_URL: model.url, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('close', (code, signal) => resolve({ code, signal })),
  );
  onCleanup(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await closed;
  });
  return { child, closed, stderr: () => stderr };
}

/**
 * A worker, once it says it is ready: it has set the queue's policy (a 4 s job expiry), which a
 * job takes when it is queued.
 */
async function readyWorker(db: string, model: AnthropicTestServer, cwd: string, extra: readonly string[] = [], env: NodeJS.ProcessEnv = {}) {
  const worker = startWorker(db, model, cwd, extra, env);
  await until(() => worker.stderr().includes('exarch worker: ready'), `the worker to be ready:\n${worker.stderr()}`, 30_000);
  return worker;
}

/**
 * The plain progress lines (stderr without a terminal: `+1.2s root/a  streaming  step 1  12 tok  0.3s`)
 * of each agent, in order, without the times and tokens: `streaming step 1`.
 */
function progressOf(stderr: string, withTokens = false): Map<string, string[]> {
  const byAgent = new Map<string, string[]>();
  for (const [, agent = '', state, step, tokens] of stderr.matchAll(/^\+\d+\.\ds (\S+)\s+(\S+)\s+step (\d+)\s+(\S+) tok\s+\d+\.\ds$/gm)) {
    byAgent.set(agent, [...(byAgent.get(agent) ?? []), `${state} step ${step}${withTokens ? ` ${tokens} tok` : ''}`]);
  }
  return byAgent;
}

const MCP_SERVER = fileURLToPath(new URL('../../fixtures/mcp/server.mjs', import.meta.url));

async function eventually(check: () => Promise<boolean>, what: string, ms = 60_000, log: () => string = () => ''): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${log()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.skipIf(!postgres.available)('durable runs in PostgreSQL from the command line', () => {
  it('run --db queues the run, a worker runs it, run follows it to the answer; runs, view and resume read it back', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serveByHistory(delegatingScripts(0));
    const worker = await readyWorker(db, model, cwd, ['--concurrency', '2']);
    const run = await exarch(['run', '--db', db, 'Survey the\nworkspace'], { server: model, cwd });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe("Heard:\n[agent 'worker' replied]\ntwo files\n");
    const id = runIdOf(run);
    // The progress lines a run here prints, read from the journal as the worker wrote it.
    expect(progressOf(run.stderr).get('root/worker')).toEqual([
      'starting step 0',
      'streaming step 1',
      'dispatchingBatch step 1',
      'streaming step 2',
      'dispatchingBatch step 2',
      'replied step 2',
    ]);
    expect(run.stderr).toMatch(/^exarch: 2 agents \(sub-agents: 1 replied\), 5 model requests, .* · logs: .*\(on the workers\)$/m);
    expect(existsSync(join(cwd, '.exarch', 'exarch.db'))).toBe(false);
    expect(await query(db, 'SELECT id, status, cwd FROM exarch.runs')).toEqual([{ id, status: 'done', cwd }]);
    const dump = await query<{ text: string }>(
      db,
      "SELECT (SELECT string_agg(r::text, '|') FROM exarch.runs AS r) || (SELECT string_agg(j::text, '|') FROM exarch.journal AS j) AS text",
    );
    expect(dump[0]?.text).toContain('two files');
    expect(dump[0]?.text).not.toContain('test-key');
    expect(worker.stderr()).toContain(`exarch worker: run ${id} done`);

    const listed = await exarch(['runs', '--db', db], { cwd });
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout.trim().split('\n')[1]).toMatch(
      new RegExp(`^${id}\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d\\s+done\\s+2\\s+5\\s+\\$\\d+\\.\\d+\\s+Survey the$`),
    );

    const viewed = await exarch(['view', id, '--db', db], { cwd });
    expect(viewed.code, viewed.stderr).toBe(0);
    expect(viewed.stderr).toMatch(/wrote the turn-flow viewer for 2 agents/);
    expect(readFileSync(join(cwd, viewed.stdout.trim()), 'utf8')).toContain('root/worker');

    const requests = model.requests.length;
    const again = await exarch(['resume', id, '--db', db], { server: model, cwd });
    expect(again.stderr.trim().split('\n')).toEqual([`exarch: run ${id} is already finished (done); nothing to resume`]);
    expect(model.requests.length).toBe(requests);

    worker.child.kill('SIGTERM');
    expect(await worker.closed).toEqual({ code: 0, signal: null });
    expect(worker.stderr()).toMatch(/exarch worker: stopped\n$/);
  });

  it('run --db --ui serves the run live from its journal: a page that connects mid-run gets it from trace.start to trace.end', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    const model = await serveByHistory(delegatingScripts(300));
    await readyWorker(db, model, cwd);
    const port = await freePort();
    const running = startExarch(['run', '--db', db, '--ui', '--ui-port', String(port), 'Survey'], model, cwd);
    // A page connects while the sub-agent's slow stream is still coming in, at the address printed (with its token).
    await until(() => model.requests.some((r) => r.agent === 'worker'), 'the sub-agent to start', 30_000);
    const url = new RegExp(`exarch: live turn flow at (http://127\\.0\\.0\\.1:${port}/\\?token=[\\w-]{43}) \\(open it in a browser\\)`).exec(
      running.stderr(),
    )?.[1];
    expect(url, running.stderr()).toBeDefined();
    const eventsUrl = new URL('events', url);
    eventsUrl.searchParams.set('token', new URL(url ?? '').searchParams.get('token') ?? '');
    const response = await fetch(eventsUrl);
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
    const body = await response.text();
    const run = await running.closed;
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toBe("Heard:\n[agent 'worker' replied]\ntwo files\n");
    // Server-sent events, one record each, numbered from 0, then the end of the run.
    const events = [...body.matchAll(/^id: (\d+)\ndata: (.*)$/gm)];
    expect(events.map(([, id]) => Number(id))).toEqual(events.map((_, i) => i));
    expect(body.endsWith('event: end\ndata: \n\n')).toBe(true);
    const records = events.map(([, , data]) => JSON.parse(data ?? '') as { kind: string; agent?: string; state?: string });
    expect(records[0]?.kind).toBe('trace.start');
    expect(records.at(-1)?.kind).toBe('trace.end');
    const statesOf = (agent: string): string[] => records.filter((r) => r.agent === agent && r.state !== undefined).map((r) => r.state ?? '');
    expect(statesOf('root/worker')).toEqual(expect.arrayContaining(['streaming', 'dispatchingBatch', 'replied']));
    expect(statesOf('root').at(-1)).toBe('readyForUser');
  });

  it('worker --otel sends the spans of the runs it runs, under the run id as the conversation; run --db --otel says where spans come from', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    const model = await serveByHistory(delegatingScripts(0));
    const otlp = await collector();
    const worker = await readyWorker(db, model, cwd, ['--otel'], { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url });
    expect(worker.stderr()).toContain(`exarch worker: sending the runs' spans to ${otlp.url}/v1/traces`);
    const run = await exarch(['run', '--db', db, 'Survey'], { server: model, cwd });
    expect(run.code, run.stderr).toBe(0);
    const id = runIdOf(run);
    worker.child.kill('SIGTERM');
    expect(await worker.closed).toEqual({ code: 0, signal: null });
    const { spans } = otlp;
    expect(worker.stderr()).toContain(`exarch worker: --otel: ${spans.length} spans sent to ${otlp.url}/v1/traces`);
    const root = spans.find((s) => s.name === 'invoke_agent root');
    const sub = spans.find((s) => s.name === 'invoke_agent worker');
    expect(root?.kind).toBe(INTERNAL);
    expect(sub?.parent).toBe(root?.id);
    expect(root?.attributes['gen_ai.conversation.id']).toBe(id);
    // Three requests of the root, two of the sub-agent: a chat span each, under its agent.
    const chats = spans.filter((s) => s.attributes['gen_ai.operation.name'] === 'chat');
    expect(chats.filter((c) => c.parent === root?.id)).toHaveLength(3);
    expect(chats.filter((c) => c.parent === sub?.id)).toHaveLength(2);
    expect(spans.find((s) => s.name === 'execute_tool list_dir')?.parent).toBe(sub?.id);
    const refused = await exarch(['run', '--db', db, '--otel', 'Survey'], { cwd });
    expect(refused.code).toBe(2);
    expect(refused.stderr.split('\n')[0]).toBe('exarch: --otel with --db: the workers run the agents and send the spans: start them with exarch worker --otel');
  });

  it('run --db --steer: the lines go to the worker that runs the run, its answers come back; /cancel a sub-agent over there', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serveByHistory({
      root: [
        stream({
          toolCalls: [call('agent', { name: 'slow', task: 'Take forever.' }), call('agent', { name: 'quick', task: 'Say hi.' }), call('wait_for_agents', {})],
        }),
        (request) => stream({ text: `Root heard:\n${lastUserText(request)}` }),
      ],
      // message_start, then silence until it is cancelled.
      slow: [stream({ text: 'thinking about it' }, { stallAfter: 1 })],
      quick: [stream({ toolCalls: [call('reply', { result: 'hi' })] })],
    });
    const worker = await readyWorker(db, model, cwd);
    const run = startExarch(['run', '--db', db, '--steer', 'Delegate'], model, cwd);
    await run.until('the slow sub-agent streaming', () => model.requests.some((r) => r.agent === 'slow'));
    run.send('/help');
    await run.until('the worker to answer /help', () => /^exarch: running: .*root\/slow/m.test(run.stderr()));
    run.send('/cancel root/nobody');
    run.send('/cancel root/slow');
    expect(await run.exit, run.stderr()).toBe(0);
    const stderr = run.stderr();
    expect(stderr).toContain('  /cancel PATH      cancel a sub-agent and everything it started');
    // Said by the worker, for the person following: Ctrl-C here does not stop the run.
    expect(stderr).toContain('The whole run goes on on the workers; Ctrl-C stops following it.');
    expect(stderr).toMatch(/^exarch: no sub-agent root\/nobody is running \(running: root, [^)]*root\/slow[^)]*\)$/m);
    expect(stderr).toMatch(/^exarch: cancelling root\/slow and everything it started$/m);
    expect(stderr).not.toContain('not taken');
    expect(await query(db, 'SELECT count(*)::int AS n FROM exarch.commands WHERE answer IS NULL')).toEqual([{ n: 0 }]);
    // The cancel happened on the worker: the root was told there, and the answer came back here.
    expect(run.stdout()).toContain("[agent 'slow' was cancelled]");
    expect(run.stdout()).toContain("[agent 'quick' replied]\nhi");
    const id = /^exarch: run (\S+) started/m.exec(stderr)?.[1] ?? '';
    expect(worker.stderr()).toContain(`exarch worker: run ${id}: /cancel root/slow`);
    expect(await query(db, `SELECT count(*)::int AS n FROM exarch.commands WHERE run_id = '${id}' AND answer IS NOT NULL`)).toEqual([{ n: 3 }]);
    expect(model.requests.filter((r) => r.agent === 'slow')).toHaveLength(1);
    expect(model.pairingViolations).toEqual([]);
  });

  it('run --db --spread --steer: the lines act through the store on agents in jobs of their own, stalled or parked', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serveByHistory({
      root: [
        stream({
          toolCalls: [call('agent', { name: 'slow', task: 'Take forever.' }), call('agent', { name: 'lead', task: 'Lead.' }), call('wait_for_agents', {})],
        }),
        (request) => stream({ text: `Root heard:\n${lastUserText(request)}` }),
      ],
      slow: [stream({ text: 'thinking about it' }, { stallAfter: 1 })],
      // Rests with a sub-agent running (parked), until a message comes.
      lead: [
        stream({ toolCalls: [call('agent', { name: 'deep', task: 'Wait.' })] }),
        stream({ text: 'resting' }),
        (request) => stream({ toolCalls: [call('reply', { result: `lead read: ${lastUserText(request)}` })] }),
      ],
      deep: [stream({ text: 'deep thinking' }, { stallAfter: 1 })],
    });
    const worker = await readyWorker(db, model, cwd, ['--concurrency', '8']);
    const run = startExarch(['run', '--db', db, '--spread', '--steer', 'Delegate'], model, cwd);
    await run.until(
      'lead to rest and the others to stream',
      () =>
        model.requests.filter((r) => r.agent === 'lead').length === 2 &&
        model.requests.some((r) => r.agent === 'deep') &&
        model.requests.some((r) => r.agent === 'slow'),
    );
    await run.until('lead to park', () => worker.stderr().includes('session root/lead parked'));
    run.send('/help');
    await run.until('the answer to /help', () => /^exarch: running: root, /m.test(run.stderr()));
    run.send('/msg lead wrap it up');
    run.send('/cancel root/slow');
    await run.until('lead to read its message', () => model.requests.filter((r) => r.agent === 'lead').length === 3);
    run.send('/cancel root/lead/deep');
    expect(await run.exit, run.stderr()).toBe(0);
    const stderr = run.stderr();
    expect(stderr).toMatch(/^exarch: running: root, root\/slow, root\/lead, root\/lead\/deep$/m);
    expect(stderr).toMatch(/^exarch: root\/lead gets the message at its next boundary$/m);
    expect(stderr).toMatch(/^exarch: cancelling root\/slow and everything it started$/m);
    expect(stderr).toMatch(/^exarch: cancelling root\/lead\/deep and everything it started$/m);
    // No line went to the whole-run queue, where no worker of a spread run looks.
    expect(await query(db, 'SELECT count(*)::int AS n FROM exarch.commands')).toEqual([{ n: 0 }]);
    expect(run.stdout()).toContain("[agent 'slow' was cancelled]");
    expect(run.stdout()).toMatch(/\[agent 'lead' replied\]\nlead read: .*wrap it up/s);
    expect(model.requests.filter((r) => r.agent === 'slow')).toHaveLength(1);
    expect(model.pairingViolations).toEqual([]);
  });

  it('--detach prints the id; a worker SIGKILLed mid-run loses nothing: another takes the run up and finishes it', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    // Slow while the first worker runs it, so that it is killed mid-stream; fast for the second.
    let slowMs = 300;
    const model = await serveByHistory(delegatingScripts(() => slowMs));
    const first = await readyWorker(db, model, cwd);
    const detached = await exarch(['run', '--db', db, '--detach', 'Survey'], { cwd });
    expect(detached.code, detached.stderr).toBe(0);
    const id = detached.stdout.trim();
    expect(id).toMatch(/^[0-9A-HJKMNP-TV-Z]{26}$/);
    await until(() => model.requests.some((r) => r.agent === 'worker'), 'the sub-agent to start on the first worker', 30_000);
    first.child.kill('SIGKILL');
    expect((await first.closed).signal).toBe('SIGKILL');
    expect(await statusOf(db, id)).toBe('running');
    expect((await exarch(['runs', '--db', db], { cwd })).stdout).toMatch(new RegExp(`${id}\\s+\\S+ \\S+\\s+interrupted`));

    slowMs = 0;
    const second = startWorker(db, model, cwd);
    await eventually(async () => (await statusOf(db, id)) === 'done', 'the second worker to finish the run', 60_000, second.stderr);
    expect(second.stderr()).toContain(`exarch worker: run ${id} resumed`);
    expect(await rootAnswer(db, id)).toBe("Heard:\n[agent 'worker' replied]\ntwo files");
    expect(model.pairingViolations).toEqual([]);
  });

  it('SIGTERM drains: a run that does not finish in time is handed back, and another worker finishes it', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    // Slow while the first worker runs it, so that it cannot finish within its drain timeout; the
    // second worker's answer comes at once (the wait is the drain's, not the model's).
    let slowMs = 3000;
    const model = await serveByHistory(delegatingScripts(() => slowMs));
    const first = await readyWorker(db, model, cwd, ['--drain-timeout', '1']);
    const id = (await exarch(['run', '--db', db, '--detach', 'Survey'], { cwd })).stdout.trim();
    await until(() => model.requests.some((r) => r.agent === 'worker'), 'the sub-agent to start on the first worker', 30_000);
    first.child.kill('SIGTERM');
    expect(await first.closed).toEqual({ code: 0, signal: null });
    expect(first.stderr()).toContain(`exarch worker: run ${id} handed back to the queue`);
    expect(await statusOf(db, id)).toBe('interrupted');

    slowMs = 0;
    const second = startWorker(db, model, cwd);
    await eventually(async () => (await statusOf(db, id)) === 'done', 'the second worker to finish the run', 60_000, second.stderr);
    expect(second.stderr()).toContain(`exarch worker: run ${id} resumed`);
    expect(await rootAnswer(db, id)).toBe("Heard:\n[agent 'worker' replied]\ntwo files");
    expect(model.pairingViolations).toEqual([]);
  });

  it('run --db prints the progress a run here prints, and the same answer and summary', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    const model = await serveByHistory({
      root: [
        stream({ toolCalls: [call('agent', { name: 'a', task: 'List.' }), call('agent', { name: 'b', task: 'Say b.' }), call('wait_for_agents', {})] }),
        echo,
      ],
      a: [stream({ toolCalls: [call('list_dir', { path: '.' })] }), stream({ toolCalls: [call('reply', { result: 'a listed' })] })],
      // b answers slowly, so that a (two requests) always finishes first, here and on the worker:
      // the reports reach the root in the order the sub-agents finish, and both runs must print one order.
      b: [stream({ toolCalls: [call('reply', { result: 'b said' })] }, { chunkDelayMs: 400 })],
    });
    const here = await exarch(['run', '--no-store', 'Survey'], { server: model, cwd });
    expect(here.code, here.stderr).toBe(0);
    await readyWorker(db, model, cwd);
    const there = await exarch(['run', '--db', db, 'Survey'], { server: model, cwd });
    expect(there.code, there.stderr).toBe(0);
    expect(there.stdout).toBe(here.stdout);
    // Agent by agent, the same lines (state, request count, tokens); only the times differ.
    const lines = progressOf(here.stderr, true);
    expect([...lines.keys()].sort()).toEqual(['root', 'root/a', 'root/b']);
    expect(progressOf(there.stderr, true)).toEqual(lines);
    const summary = (stderr: string): string | undefined => /^(exarch: \d+ agents .*) · logs: /m.exec(stderr)?.[1];
    expect(summary(here.stderr)).toMatch(/^exarch: 3 agents \(sub-agents: 2 replied\), 5 model requests, /);
    expect(summary(there.stderr)).toBe(summary(here.stderr));
  });

  it('run --db --spread: each sub-agent a job of its own, the root parked while they run; the follower prints the answer a run here prints', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    const model = await serveByHistory({
      root: [
        stream({ toolCalls: [call('agent', { name: 'a', task: 'List.' }), call('agent', { name: 'b', task: 'Say b.' }), call('wait_for_agents', {})] }),
        echo,
      ],
      a: [stream({ toolCalls: [call('list_dir', { path: '.' })] }), stream({ toolCalls: [call('reply', { result: 'a listed' })] })],
      b: [stream({ toolCalls: [call('reply', { result: 'b said' })] }, { chunkDelayMs: 400 })],
    });
    const here = await exarch(['run', '--no-store', 'Survey'], { server: model, cwd });
    expect(here.code, here.stderr).toBe(0);
    const worker = await readyWorker(db, model, cwd, ['--concurrency', '4']);
    const there = await exarch(['run', '--db', db, '--spread', 'Survey'], { server: model, cwd });
    expect(there.code, there.stderr).toBe(0);
    expect(there.stdout).toBe(here.stdout);
    // Agent by agent, the same progress lines as here: a root parked and taken up again shows no state it was not in.
    const id = runIdOf(there);
    expect(progressOf(there.stderr, true)).toEqual(progressOf(here.stderr, true));
    for (const session of ['root', 'root/a', 'root/b']) expect(worker.stderr()).toContain(`exarch worker: run ${id} session ${session} taken`);
    expect(worker.stderr()).toContain(`exarch worker: run ${id} session root parked`);
    expect(await statusOf(db, id)).toBe('done');
    // What needs one process is refused, one line each.
    for (const [flags, line] of [
      [['--spread'], '--spread needs --db: sub-agents are spread over the workers of a database'],
      [['--db', db, '--spread', '--max-tokens', '100'], '--spread with --max-tokens: such a run runs whole on one worker; leave out --spread'],
    ] as const) {
      const refused = await exarch(['run', ...flags, 'Survey'], { cwd });
      expect(refused.code).toBe(2);
      expect(refused.stderr.split('\n')[0]).toBe(`exarch: ${line}`);
    }
    expect(model.pairingViolations).toEqual([]);
  });

  it('resume --db of a spread run whose jobs were lost queues its unfinished sessions again and follows it to the answer', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serveByHistory({
      root: [stream({ toolCalls: [call('agent', { name: 'a', task: 'Say a.' }), call('wait_for_agents', {})] }), echo],
      a: [stream({ toolCalls: [call('reply', { result: 'a said' })] })],
    });
    const detached = await exarch(['run', '--db', db, '--spread', '--detach', 'Ask a'], { cwd });
    expect(detached.code, detached.stderr).toBe(0);
    const id = detached.stdout.trim();
    // The queue lost the run's job (no worker was there to take it).
    await query(db, `DELETE FROM pgboss.job WHERE data ->> 'runId' = '${id}'`);
    await readyWorker(db, model, cwd);
    const resumed = await exarch(['resume', id, '--db', db], { server: model, cwd });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.stderr).toContain(`exarch: run ${id}: 1 session queued again for the workers (root)`);
    expect(resumed.stdout).toContain("[agent 'a' replied]\na said");
    expect(await statusOf(db, id)).toBe('done');
    // Its sessions ran as jobs of their own; the viewer reads the run back as any other.
    const viewed = await exarch(['view', id, '--db', db], { cwd });
    expect(viewed.code, viewed.stderr).toBe(0);
    expect(viewed.stderr).toMatch(/wrote the turn-flow viewer for 2 agents/);
    expect(readFileSync(join(cwd, viewed.stdout.trim()), 'utf8')).toContain('root/a');
    expect(model.pairingViolations).toEqual([]);
  });

  it('run --db --spread --approve: the sub-agent that asks parks, the run is waiting, and approve --db wakes that sub-agent alone', {
    timeout: 120_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serveByHistory({
      root: [
        stream({ toolCalls: [call('agent', { name: 'w', task: 'Write.' }), call('agent', { name: 'r', task: 'Read.' }), call('wait_for_agents', {})] }),
        (request) => stream({ text: `Root heard:\n${lastUserText(request)}` }),
      ],
      w: [stream({ toolCalls: [call('write_file', { path: 'w.md', content: 'W' })] }), stream({ toolCalls: [call('reply', { result: 'written' })] })],
      r: [stream({ toolCalls: [call('list_dir', { path: '.' })] }), stream({ toolCalls: [call('reply', { result: 'read' })] })],
    });
    const worker = await readyWorker(db, model, cwd, ['--concurrency', '4']);
    const first = await exarch(['run', '--db', db, '--spread', '--allow-write', '--approve', 'write_file', 'Write and read'], { server: model, cwd });
    // No terminal: the follower lists the call once nothing else can move, as for a whole run.
    expect(first.code, first.stderr).toBe(4);
    const id = runIdOf(first);
    const callId = /^ {2}(toolu_\S+) {2}write_file {2}by root\/w {2}/m.exec(first.stderr)?.[1] ?? '';
    expect(callId, first.stderr).toMatch(/^toolu_/);
    expect(first.stderr).toContain(`exarch approve ${id} ${callId} --db ${db}`);
    // r finished on its own; w and the root let go of their slots while they wait.
    expect(model.requests.filter((r) => r.agent === 'r')).toHaveLength(2);
    expect(worker.stderr()).toContain(`exarch worker: run ${id} session root/w parked`);
    expect(existsSync(join(cwd, 'w.md'))).toBe(false);
    const listed = await exarch(['runs', '--db', db], { cwd });
    expect(listed.stdout).toMatch(new RegExp(`^${id} +[\\d-]+ [\\d:]+ +waiting `, 'm'));

    const approved = await exarch(['approve', id, callId, '--db', db], { cwd });
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr.trim()).toBe(
      `exarch: write_file call ${callId} of root/w approved; the agent that asked goes on on the workers (follow it with exarch runs --db ${db})`,
    );
    await eventually(async () => (await statusOf(db, id)) === 'done', 'the workers to finish the run', 60_000, worker.stderr);
    expect(readFileSync(join(cwd, 'w.md'), 'utf8')).toBe('W');
    expect(await rootAnswer(db, id)).toMatch(/\[agent 'w' replied\]\nwritten/);
    // Woken for its answer, w was taken again; r, done before, was not.
    expect(worker.stderr().split(`exarch worker: run ${id} session root/w taken`)).toHaveLength(3);
    expect(worker.stderr().split(`exarch worker: run ${id} session root/r taken`)).toHaveLength(2);
    expect(model.requests.filter((r) => r.agent === 'w')).toHaveLength(2);
    expect(model.pairingViolations).toEqual([]);
  });

  it('a worker runs the run as recorded: --approve stops it waiting, approve --db queues it, MCP servers and declared agents naming their tools', {
    timeout: 180_000,
  }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    writeFileSync(
      join(cwd, 'exarch.config.json'),
      JSON.stringify({ agents: { prober: { description: 'Asks the server for its pid.', tools: ['mcp__test_server__pid'] } } }),
    );
    const model = await serveByHistory({
      root: [
        stream({
          toolCalls: [
            call('agent', { name: 'p', type: 'prober', task: 'Ask the pid.' }),
            call('write_file', { path: 'notes.md', content: 'hello\n' }),
            call('wait_for_agents', {}),
          ],
        }),
        (request) => stream({ text: `Root heard:\n${lastUserText(request)}` }),
      ],
      p: [
        stream({ toolCalls: [call('mcp__test_server__pid', {})] }),
        (request) => stream({ toolCalls: [call('reply', { result: `server ${lastUserText(request)}` })] }),
      ],
    });
    const worker = await readyWorker(db, model, cwd);
    // A word the server ignores, to find its processes by.
    const marker = `marker-${process.pid}-${Date.now()}`;
    const mcp = `'${process.execPath}' '${MCP_SERVER}' stdio normal ${marker}`;
    const first = await exarch(['run', '--db', db, '--allow-write', '--approve', 'write_file', '--mcp', mcp, 'Take notes'], { server: model, cwd });
    expect(first.code, first.stderr).toBe(4);
    const id = runIdOf(first);
    // The submitter started the server once, to check the agents' tools and record the names.
    expect(first.stderr).toContain("exarch: MCP server 'test_server': 14 tools");
    const callId = /^ {2}(toolu_\S+) {2}write_file {2}by root {2}/m.exec(first.stderr)?.[1] ?? '';
    expect(callId).toMatch(/^toolu_/);
    expect(first.stderr).toContain(`exarch approve ${id} ${callId} --db ${db}`);
    expect(first.stderr).toContain(
      `exarch: once every call is answered, a worker continues the run (or continue it here with: exarch resume ${id} --db ${db})`,
    );
    expect(first.stdout).toBe('');
    expect(await statusOf(db, id)).toBe('waiting');
    expect(worker.stderr()).toContain(`exarch worker: run ${id} waiting`);
    expect(existsSync(join(cwd, 'notes.md'))).toBe(false);
    // The declared agent ran on the worker with the server's tool, and only it besides the protocol's.
    const offered = (model.requests.find((r) => r.agent === 'p')?.body.tools ?? []).map((tool) => String((tool as { name?: unknown }).name));
    expect(offered).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply', 'mcp__test_server__pid']);
    // Closed once the run stopped, on the worker as on the submitter.
    await eventually(async () => processesWith(marker).length === 0, 'the MCP servers to be closed', 15_000);

    const approved = await exarch(['approve', id, callId, '--db', db], { cwd });
    expect(approved.code, approved.stderr).toBe(0);
    expect(approved.stderr.trim()).toBe(
      `exarch: write_file call ${callId} of root approved; no call of the run waits any more: it is queued for the workers (or continue it here: exarch resume ${id} --db ${db})`,
    );
    await eventually(async () => (await statusOf(db, id)) === 'done', 'the worker to continue the run', 60_000, worker.stderr);
    expect(readFileSync(join(cwd, 'notes.md'), 'utf8')).toBe('hello\n');
    const answer = await rootAnswer(db, id);
    expect(answer).toContain('[result ok: "wrote 6 bytes to notes.md"]');
    expect(answer).toMatch(/\[agent 'p' replied\]\nserver \[result ok: "\d+"\]/);
    // The worker started the recorded server again to continue the run, and closed it after.
    expect(worker.stderr().match(/exarch: MCP server 'test_server'/g)).toHaveLength(2);
    await eventually(async () => processesWith(marker).length === 0, 'the MCP servers to be closed', 15_000);
    expect(model.requests.filter((r) => r.agent === 'p')).toHaveLength(2);
    expect(model.pairingViolations).toEqual([]);
    const wrong = await exarch(['deny', id, callId, '--db', db], { cwd });
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toBe(`exarch: call ${callId} of run ${id} does not wait for approval (no call of it waits for approval)\n`);
  });

  it.skipIf(!terminalTests)(
    'run --db on a terminal asks about each waiting call, records the answers, queues the run again and follows it to the answer',
    {
      timeout: 180_000,
    },
    async () => {
      const db = await postgres.server().createDatabase();
      const cwd = workdir();
      const model = await serveByHistory({
        root: [
          stream({ toolCalls: [call('write_file', { path: 'a.md', content: 'A' }), call('write_file', { path: 'b.md', content: 'B' })] }),
          // Taken up by a worker with the answers, it stops waiting a second time.
          stream({ toolCalls: [call('write_file', { path: 'c.md', content: 'C' })] }),
          (request) => stream({ text: `Root heard:\n${lastUserText(request)}` }),
        ],
      });
      const worker = await readyWorker(db, model, cwd);
      const session = startInTerminal('db-approve', cwd, model.url, `run --db '${db}' --allow-write --approve write_file 'Write two files'`);
      // The worker has no one to ask: the run stops waiting, and the follower asks here.
      const first = await waitFor(session, /Approve\? \[y\]es, \[n\]o, \[a\]lways for write_file: $/m, 'the first question', 60_000);
      const id = /exarch: run (\S+) started/.exec(first)?.[1] ?? '';
      expect(await statusOf(db, id)).toBe('waiting');
      expect(first).toMatch(/^exarch: root wants to run write_file \(toolu_\S+\)$/m);
      expect(first).toContain('  input: {"path":"a.md","content":"A"}');
      expect(first).not.toContain('b.md');
      tmux('send-keys', '-t', session, 'y', 'Enter');
      await waitFor(session, /input: \{"path":"b\.md","content":"B"\}\n.*Approve\?/, 'the second question');
      tmux('send-keys', '-t', session, 'n', 'Enter');
      await waitFor(session, /Reason, for the agent \(optional\): $/m, 'the reason question');
      tmux('send-keys', '-t', session, 'not b', 'Enter');
      // The second stop: asked again, once, about the new call only.
      await waitFor(session, /input: \{"path":"c\.md","content":"C"\}\n.*Approve\?/, 'the question of the second stop', 60_000);
      tmux('send-keys', '-t', session, 'y', 'Enter');
      const final = await waitFor(session, /^EXIT=\d+$/m, 'the end of the run', 90_000);
      expect(final).toMatch(/^EXIT=0$/m);
      expect(final.split(`exarch: run ${id} answered; queued for the workers again`)).toHaveLength(3);
      expect(final.match(/Approve\? /g)).toHaveLength(3);
      // The answers were taken up by a worker: one file written, once; the refusal reached the model.
      expect(readFileSync(join(cwd, 'a.md'), 'utf8')).toBe('A');
      expect(readFileSync(join(cwd, 'c.md'), 'utf8')).toBe('C');
      expect(existsSync(join(cwd, 'b.md'))).toBe(false);
      expect(await statusOf(db, id)).toBe('done');
      // The refusal reached the model with the first batch's results; the last answer heard the third file.
      const rootRequests = model.requests.filter((r) => r.agent === 'root');
      expect(JSON.stringify(rootRequests[1]?.body.messages.at(-1))).toContain("tool 'write_file' was not run: a person denied this call: not b");
      expect(await rootAnswer(db, id)).toMatch(/^Root heard:\n\[result ok: "wrote 1 bytes? to c\.md"\]$/);
      expect(final).toContain('Root heard:');
      expect(worker.stderr()).toContain(`exarch worker: run ${id} waiting`);
      expect(model.requests.filter((r) => r.agent === 'root')).toHaveLength(3);
      expect(model.pairingViolations).toEqual([]);
    },
  );

  it.skipIf(!terminalTests)(
    "run --db --spread on a terminal asks about a sub-agent's calls once nothing else moves, and the woken sub-agent goes on",
    {
      timeout: 180_000,
    },
    async () => {
      const db = await postgres.server().createDatabase();
      const cwd = workdir();
      const model = await serveByHistory({
        root: [
          stream({ toolCalls: [call('agent', { name: 'w', task: 'Write two.' }), call('agent', { name: 'r', task: 'Read.' }), call('wait_for_agents', {})] }),
          (request) => stream({ text: `Root heard:\n${lastUserText(request)}` }),
        ],
        w: [
          stream({ toolCalls: [call('write_file', { path: 'a.md', content: 'A' }), call('write_file', { path: 'b.md', content: 'B' })] }),
          (request) => stream({ toolCalls: [call('reply', { result: `w saw: ${lastUserText(request)}` })] }),
        ],
        r: [stream({ toolCalls: [call('list_dir', { path: '.' })] }, { chunkDelayMs: 300 }), stream({ toolCalls: [call('reply', { result: 'r read' })] })],
      });
      const worker = await readyWorker(db, model, cwd, ['--concurrency', '4']);
      const session = startInTerminal('db-spread-approve', cwd, model.url, `run --db '${db}' --spread --allow-write --approve write_file 'Write and read'`);
      const first = await waitFor(session, /Approve\? \[y\]es, \[n\]o, \[a\]lways for write_file: $/m, 'the first question', 60_000);
      const id = /exarch: run (\S+) started/.exec(first)?.[1] ?? '';
      // Asked once nothing else could move: r had finished by then.
      expect(model.requests.filter((r) => r.agent === 'r')).toHaveLength(2);
      expect(first).toMatch(/^exarch: root\/w wants to run write_file \(toolu_\S+\)$/m);
      tmux('send-keys', '-t', session, 'y', 'Enter');
      await waitFor(session, /input: \{"path":"b\.md","content":"B"\}\n.*Approve\?/, 'the second question');
      tmux('send-keys', '-t', session, 'n', 'Enter');
      await waitFor(session, /Reason, for the agent \(optional\): $/m, 'the reason question');
      tmux('send-keys', '-t', session, 'not b', 'Enter');
      const final = await waitFor(session, /^EXIT=\d+$/m, 'the end of the run', 90_000);
      expect(final).toMatch(/^EXIT=0$/m);
      expect(final).toContain(`exarch: run ${id} answered; the sessions that asked go on on the workers`);
      expect(final.match(/Approve\? /g)).toHaveLength(2);
      expect(readFileSync(join(cwd, 'a.md'), 'utf8')).toBe('A');
      expect(existsSync(join(cwd, 'b.md'))).toBe(false);
      expect(await statusOf(db, id)).toBe('done');
      expect(await rootAnswer(db, id)).toMatch(/\[agent 'w' replied\]\nw saw: .*wrote 1 bytes? to a\.md.*a person denied this call: not b/s);
      expect(worker.stderr()).toContain(`exarch worker: run ${id} session root/w parked`);
      expect(model.pairingViolations).toEqual([]);
    },
  );

  it('a worker keeps to the recorded budget: --max-tokens stops the tree, and run --db says so', { timeout: 120_000 }, async () => {
    const db = await postgres.server().createDatabase();
    const cwd = workdir();
    const model = await serveByHistory({ root: Array.from({ length: 10 }, () => stream({ toolCalls: [call('list_dir', { path: '.' })] })) });
    await readyWorker(db, model, cwd);
    const run = await exarch(['run', '--db', db, '--max-tokens', '1', 'Loop'], { server: model, cwd });
    expect(run.code, run.stderr).toBe(3);
    expect(run.stderr).toMatch(
      /^exarch: the budget stopped the run: the tree spent [\d.k]+ tokens( \(about \$[\d.]+\))?; running and queued sub-agents were cancelled and the root could not answer within the budget$/m,
    );
    // One request crossed the budget; it left no room for a final turn, so none was made.
    expect(model.requests.filter((r) => r.agent === 'root')).toHaveLength(1);
    expect(await statusOf(db, runIdOf(run))).toBe('capped');
  });

  it('bad --db usage and an unreachable server each get one line', async () => {
    const cwd = workdir();
    const both = await exarch(['runs', '--db', postgres.server().url, '--store', 'x.db'], { cwd });
    expect(both.code).toBe(2);
    expect(both.stderr.split('\n')[0]).toBe('exarch: --store and --db cannot be used together');
    const notUrl = await exarch(['runs', '--db', 'mydb'], { cwd });
    expect(notUrl.code).toBe(2);
    expect(notUrl.stderr.split('\n')[0]).toBe("exarch: --db takes a PostgreSQL URL (postgres://user@host:port/database), got 'mydb'");
    const down = await exarch(['runs', '--db', 'postgres://exarch:pw-secret@127.0.0.1:1/none'], { cwd });
    expect(down.code).toBe(1);
    const lines = down.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^exarch: the run store postgres:\/\/exarch:\*\*\*@127\.0\.0\.1:1\/none cannot be opened \(.+\)$/);
  });
});
