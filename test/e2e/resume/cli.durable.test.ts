import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { historyHandler, startAnthropicServer, type AnthropicTestServer, type ReceivedRequest, type ServerPlan } from '../../support/anthropicServer.js';
import { canSwitchUser, giveToNobody } from '../../support/asUser.js';
import { call, exarch, lastUserText, onCleanup, startExarch, stream, workdir, type CliRun } from '../../support/cliHarness.js';

/**
 * Durable runs from the command line (issue 12): every `exarch run` is recorded in the run store,
 * `exarch runs` lists runs, `exarch resume` takes one up again after Ctrl-C or SIGKILL, and a store
 * that cannot be read stops everything with one line. The store is checked with SQLite itself,
 * not with exarch's code.
 */

async function serveByHistory(scripts: Parameters<typeof historyHandler>[0]): Promise<AnthropicTestServer> {
  const server = await startAnthropicServer(historyHandler(scripts));
  onCleanup(() => server.close());
  return server;
}

const echo = (request: ReceivedRequest): ServerPlan => stream({ text: `Heard:\n${lastUserText(request)}` });

function runIdOf(run: CliRun): string {
  const id = /^exarch: run (\S+) started$/m.exec(run.stderr)?.[1];
  if (!id) throw new Error(`no run id in:\n${run.stderr}`);
  return id;
}

function sha(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

/** The runs table as SQLite has it. */
function storedRuns(file: string): { id: string; status: string; cwd: string; options: string }[] {
  const db = new Database(file, { readonly: true });
  try {
    return db.prepare('SELECT id, status, cwd, options FROM runs').all() as { id: string; status: string; cwd: string; options: string }[];
  } finally {
    db.close();
  }
}

async function until(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** A root that delegates to a child whose tool call is slow, then answers with what it heard. */
function delegatingScripts(slowMs: number): Parameters<typeof historyHandler>[0] {
  return {
    root: [stream({ toolCalls: [call('agent', { name: 'worker', task: 'List the files.' })] }), stream({ text: 'Waiting for worker.' }), echo],
    worker: [
      stream({ toolCalls: [call('list_dir', { path: '.' })] }, { chunkDelayMs: slowMs }),
      stream({ toolCalls: [call('reply', { result: 'two files' })] }),
    ],
  };
}

/**
 * A root delegating to a worker whose shell command writes a line, then sleeps; resolves once the
 * line is written (the command is running). The worker then replies with what it was told.
 */
async function startShellWorker(cwd: string) {
  // Run as root (CI), exarch runs sandboxed commands as the working directory's owner: make it a user's.
  if (canSwitchUser) await giveToNobody(cwd);
  const server = await serveByHistory({
    root: [stream({ toolCalls: [call('agent', { name: 'worker', task: 'Build it.' })] }), stream({ text: 'Waiting for worker.' }), echo],
    worker: [
      stream({ toolCalls: [call('run_shell', { command: 'echo started >> effects.txt; sleep 30' })] }),
      (r) => stream({ toolCalls: [call('reply', { result: lastUserText(r) })] }),
    ],
  });
  const first = startExarch(['run', '--allow-shell', 'Build'], server, cwd);
  await until(() => existsSync(join(cwd, 'effects.txt')), 'the shell command to start');
  return { server, first };
}

describe('durable runs from the command line', () => {
  it('records every run: the id comes first on stderr, runs lists it, and resuming a finished run makes no request', async () => {
    const cwd = workdir();
    const server = await serveByHistory(delegatingScripts(0));
    const run = await exarch(['run', 'Survey the\nworkspace'], { server, cwd });
    expect(run.code).toBe(0);
    expect(run.stderr.split('\n')[0]).toMatch(/^exarch: run [0-9A-HJKMNP-TV-Z]{26} started$/);
    const id = runIdOf(run);
    const db = join(cwd, '.exarch', 'exarch.db');
    expect(storedRuns(db)).toEqual([expect.objectContaining({ id, status: 'done', cwd })]);
    // No secret is recorded: not in the run row, not in the journal.
    const raw = readFileSync(db);
    expect(raw.includes('test-key')).toBe(false);

    const listed = await exarch(['runs'], { cwd });
    expect(listed.code).toBe(0);
    const [header, row] = listed.stdout.trim().split('\n');
    expect(header).toMatch(/^ID\s+STARTED\s+STATUS\s+AGENTS\s+REQUESTS\s+COST\s+TASK$/);
    expect(row).toMatch(new RegExp(`^${id}\\s+\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d\\s+done\\s+2\\s+5\\s+\\$\\d+\\.\\d+\\s+Survey the$`));

    // The turn-flow viewer, drawn from the store: both agents, the worker's reply delivered.
    const viewed = await exarch(['view', id], { cwd });
    expect(viewed.code).toBe(0);
    const page = join(cwd, viewed.stdout.trim());
    expect(viewed.stdout.trim()).toBe(join('.exarch', 'view', `${id}.html`));
    expect(viewed.stderr).toMatch(/wrote the turn-flow viewer for 2 agents/);
    const html = readFileSync(page, 'utf8');
    expect(html).toContain('root/worker');
    expect(html).toContain('two files');
    const missing = await exarch(['view', '01ARZ3NDEKTSV4RRFFQ69G5FAV'], { cwd });
    expect(missing.code).toBe(1);
    expect(missing.stderr.trim()).toBe(`exarch: 01ARZ3NDEKTSV4RRFFQ69G5FAV is neither a file nor a run id in ${join(cwd, '.exarch', 'exarch.db')}`);

    const requests = server.requests.length;
    const again = await exarch(['resume', id], { server, cwd });
    expect(again.code).toBe(0);
    expect(again.stdout).toBe('');
    expect(again.stderr.trim().split('\n')).toEqual([`exarch: run ${id} is already finished (done); nothing to resume`]);
    expect(server.requests.length).toBe(requests);
  });

  it('an unknown run id, a run of another directory and bad usage each get one line', async () => {
    const cwd = workdir();
    const server = await serveByHistory({ root: [stream({ text: 'ok' })] });
    const run = await exarch(['run', 'go'], { server, cwd });
    const id = runIdOf(run);
    const unknown = await exarch(['resume', '01ARZ3NDEKTSV4RRFFQ69G5FAV'], { server, cwd });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr.trim().split('\n')).toHaveLength(1);
    expect(unknown.stderr).toMatch(/no run 01ARZ3NDEKTSV4RRFFQ69G5FAV in .*exarch\.db/);

    // The run's store, used from another directory: refused with where the run belongs.
    const elsewhere = workdir();
    const store = join(cwd, '.exarch', 'exarch.db');
    const db = new Database(store);
    db.prepare("UPDATE runs SET status = 'interrupted' WHERE id = ?").run(id);
    db.close();
    const moved = await exarch(['resume', id, '--store', store], { server, cwd: elsewhere });
    expect(moved.code).toBe(1);
    expect(moved.stderr.trim()).toBe(`exarch: run ${id} belongs to ${cwd}: resume it from there`);

    const usage = await exarch(['resume'], { cwd });
    expect(usage.code).toBe(2);
    expect(usage.stderr.split('\n')[0]).toMatch(/resume takes one run id/);
    const both = await exarch(['run', '--no-store', '--store', 'x.db', 'go'], { server, cwd });
    expect(both.code).toBe(2);
  });

  it('runs, resume and view only read: without a store they say so and create nothing', async () => {
    const cwd = workdir();
    const listed = await exarch(['runs'], { cwd });
    expect(listed.code).toBe(0);
    expect(listed.stdout).toBe('');
    expect(listed.stderr.trim()).toBe(`exarch: no runs recorded in ${join(cwd, '.exarch', 'exarch.db')}`);
    const resumed = await exarch(['resume', '01ARZ3NDEKTSV4RRFFQ69G5FAV'], { cwd });
    expect(resumed.code).toBe(1);
    expect(resumed.stderr.trim().split('\n')).toHaveLength(1);
    const viewed = await exarch(['view', '01ARZ3NDEKTSV4RRFFQ69G5FAV'], { cwd });
    expect(viewed.code).toBe(1);
    expect(viewed.stderr.trim()).toMatch(
      /^exarch: 01ARZ3NDEKTSV4RRFFQ69G5FAV is neither a file nor a run id in .*exarch\.db \(there is no run store there yet\)$/,
    );
    expect(existsSync(join(cwd, '.exarch'))).toBe(false);
  });

  it('--no-store records nothing; --store FILE records there', async () => {
    const cwd = workdir();
    const server = await serveByHistory({ root: [stream({ text: 'ok' }), stream({ text: 'ok' })] });
    const plain = await exarch(['run', '--no-store', 'go'], { server, cwd });
    expect(plain.code).toBe(0);
    expect(plain.stderr).not.toMatch(/exarch: run \S+ started/);
    expect(existsSync(join(cwd, '.exarch', 'exarch.db'))).toBe(false);
    const other = join(cwd, 'elsewhere', 'runs.db');
    const recorded = await exarch(['run', '--store', other, 'go'], { server: await serveByHistory({ root: [stream({ text: 'ok' })] }), cwd });
    expect(recorded.code).toBe(0);
    expect(storedRuns(other).map((r) => r.id)).toEqual([runIdOf(recorded)]);
  });

  it('a store that cannot be read: exit 1, one line naming the file, its bytes unchanged, no request made', async () => {
    const cwd = workdir();
    const server = await serveByHistory({ root: [stream({ text: 'should never be asked' })] });
    const text = join(cwd, 'notes.db');
    writeFileSync(text, 'these are my notes, not a database\n'.repeat(200));
    const other = join(cwd, 'other.db');
    const foreign = new Database(other);
    foreign.exec("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers (name) VALUES ('Ada');");
    foreign.close();
    const newer = join(cwd, 'newer.db');
    const good = await exarch(['run', '--store', newer, 'go'], { server: await serveByHistory({ root: [stream({ text: 'ok' })] }), cwd });
    expect(good.code).toBe(0);
    const bump = new Database(newer);
    bump.pragma('user_version = 99');
    bump.close();
    for (const file of [text, other, newer]) {
      const before = sha(file);
      for (const args of [
        ['run', '--store', file, 'go'],
        ['runs', '--store', file],
        ['resume', '01ARZ3NDEKTSV4RRFFQ69G5FAV', '--store', file],
      ]) {
        const run = await exarch(args, { server, cwd });
        expect(run.code, `${args.join(' ')}: ${run.stderr}`).toBe(1);
        const lines = run.stderr.trim().split('\n');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toContain(file);
        expect(run.stderr).not.toMatch(/\n\s+at /);
        expect(sha(file)).toBe(before);
      }
    }
    expect(server.requests).toHaveLength(0);
  });

  it('Ctrl-C during a shell command: the call is answered cancelled, and resume re-asks the model with that history', async () => {
    const cwd = workdir();
    const { server, first } = await startShellWorker(cwd);
    first.child.kill('SIGINT');
    const interrupted = await first.closed;
    expect(interrupted.code).toBe(130);
    const id = runIdOf(interrupted);
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    // The worker was asked again with its shell call answered `cancelled`, and replied with what it saw.
    expect(resumed.stdout).toBe('Heard:\n[agent \'worker\' replied]\n[result error: "cancelled"]\n');
    expect(readFileSync(join(cwd, 'effects.txt'), 'utf8')).toBe('started\n');
    expect(server.pairingViolations).toEqual([]);
  });

  it('SIGKILL during a shell command: it is not run again, and the model is told its effect is unknown', async () => {
    const cwd = workdir();
    const { server, first } = await startShellWorker(cwd);
    first.child.kill('SIGKILL');
    const id = runIdOf(await first.closed);
    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(
      /^Heard:\n\[agent 'worker' replied\]\n\[result error: "tool 'run_shell' was running when the process stopped, so its effect is unknown[^"]*"\]\n$/,
    );
    expect(readFileSync(join(cwd, 'effects.txt'), 'utf8')).toBe('started\n');
    expect(server.pairingViolations).toEqual([]);
  });

  it('Ctrl-C leaves the run interrupted and resumable; resume re-asks the model from the committed history', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    const server = await serveByHistory(delegatingScripts(400));
    const first = startExarch(['run', 'Survey'], server, cwd);
    // The worker's tool call is streaming slowly: interrupt then.
    await until(() => server.requests.some((r) => r.agent === 'worker'), 'the worker to start');
    first.child.kill('SIGINT');
    const interrupted = await first.closed;
    expect(interrupted.code).toBe(130);
    const id = runIdOf(interrupted);
    expect(interrupted.stderr).toContain(`resume with: exarch resume ${id}`);
    expect(storedRuns(join(cwd, '.exarch', 'exarch.db'))[0]?.status).toBe('interrupted');
    const listed = await exarch(['runs'], { cwd });
    expect(listed.stdout).toMatch(new RegExp(`${id}\\s+\\S+ \\S+\\s+interrupted`));

    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe("Heard:\n[agent 'worker' replied]\ntwo files\n");
    expect(storedRuns(join(cwd, '.exarch', 'exarch.db'))[0]?.status).toBe('done');
    expect(server.pairingViolations).toEqual([]);
  });

  it('resume says `run … resumed` first, and each agent’s steps go on from where the run stopped', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    // The worker's first request streams slowly until the kill: the run is killed while it is in
    // flight, with the root at rest after its two requests.
    let killed = false;
    const slow = historyHandler(delegatingScripts(2_000));
    const fast = historyHandler(delegatingScripts(0));
    const server = await startAnthropicServer((request) => (killed ? fast(request) : slow(request)));
    onCleanup(() => server.close());
    const first = startExarch(['run', 'Survey'], server, cwd);
    await until(
      () => /^\+[\d.]+s root\s+readyForUser\s+step 2\b/m.test(first.stderr()) && server.requests.some((r) => r.agent === 'worker'),
      'the root at rest after two requests, the worker streaming',
    );
    first.child.kill('SIGKILL');
    killed = true;
    const id = runIdOf(await first.closed);

    const resumed = await exarch(['resume', id], { server, cwd });
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toBe("Heard:\n[agent 'worker' replied]\ntwo files\n");
    const lines = resumed.stderr.split('\n');
    expect(lines[0]).toBe(`exarch: run ${id} resumed`);
    // `+0.0s root   readyForUser   step 2  …`: each agent's states and step numbers, in order.
    const steps = (agent: string): string[] =>
      lines.flatMap((line) => {
        const match = new RegExp(`^\\+[\\d.]+s ${agent}\\s+(\\S+)\\s+step (\\d+)`).exec(line);
        return match ? [`${match[1]} ${match[2]}`] : [];
      });
    // The root had made two requests: its next is its third.
    expect(steps('root')).toEqual(['readyForUser 2', 'streaming 3', 'readyForUser 3']);
    // The worker's request in flight was never answered: it is asked again, as its first.
    expect(steps('root/worker')[0]).toBe('streaming 1');
  });

  it('after SIGKILL the run is listed as interrupted; a second resume is refused while the first lives; resume finishes it', async () => {
    const cwd = workdir();
    writeFileSync(join(cwd, 'a.txt'), 'a');
    mkdirSync(join(cwd, 'sub'));
    // Once the first process is killed, the worker's requests wait until the second resume has
    // been refused: the first resume is still running then, however slow the machine.
    let killedFirst = false;
    let refusalChecked = (): void => undefined;
    const checked = new Promise<void>((resolve) => (refusalChecked = resolve));
    const scripted = historyHandler(delegatingScripts(300));
    const server = await startAnthropicServer(async (request) => {
      if (killedFirst && request.agent === 'worker') await checked;
      return scripted(request);
    });
    onCleanup(() => server.close());
    const first = startExarch(['run', 'Survey'], server, cwd);
    await until(() => server.requests.some((r) => r.agent === 'worker'), 'the worker to start');
    killedFirst = true;
    first.child.kill('SIGKILL');
    const killed = await first.closed;
    expect(killed.signal).toBe('SIGKILL');
    const id = runIdOf(killed);
    // The row still says running, with a dead owner: listed as interrupted.
    expect(storedRuns(join(cwd, '.exarch', 'exarch.db'))[0]?.status).toBe('running');
    expect((await exarch(['runs'], { cwd })).stdout).toMatch(new RegExp(`${id}\\s+\\S+ \\S+\\s+interrupted`));

    const second = startExarch(['resume', id], server, cwd);
    await until(() => /resumed/.test(second.stderr()), 'the resume to start');
    const refused = await exarch(['resume', id], { server, cwd });
    expect(refused.code).toBe(1);
    expect(refused.stderr.trim()).toMatch(new RegExp(`^exarch: run ${id} is being run by process ${second.child.pid} on \\S+; try again once it has stopped$`));
    refusalChecked();
    const done = await second.closed;
    expect(done.code).toBe(0);
    expect(done.stdout).toBe("Heard:\n[agent 'worker' replied]\ntwo files\n");
    expect(server.pairingViolations).toEqual([]);
  });
});
