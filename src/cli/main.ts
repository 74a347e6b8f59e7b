#!/usr/bin/env node
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import type { LiveInspector } from '../watch/inspect/liveInspector.js';
import { writeViewer } from '../watch/viewer/index.js';
import { describeError } from '../engine/model/errors.js';
import { runDemo } from './demo.js';
import { resumeCommand } from './resume.js';
import { runCommand, UsageError } from './run.js';
import { uiPort, usableTarget } from './runChecks.js';
import { EXIT } from './runIo.js';
import { CliUi } from './liveUi.js';
import { openExistingStore, storeTargetOf, type StoreTarget } from './storeTarget.js';
import { writeViewerForRun } from '../watch/trace/fromJournal.js';
import type { WrittenViewer } from '../watch/viewer/write.js';
import { answerCommand } from './approve.js';
import { listRunsCommand } from './runs.js';
import { DEFAULT_MODEL } from '../providers/anthropic.js';
import { Redactor } from '../engine/redact.js';
import { redactProcessOutput } from './redactedOutput.js';
import { failureLine } from './failureLine.js';
import { isUrl, urlSecrets } from '../engine/urlSecrets.js';

/**
 * The `exarch` command line (CONTRACT §7). Exit codes: 0 done, 1 fatal, 2 bad usage. Errors are
 * one line on stderr, never a stack trace: a user of the CLI cannot act on our internals.
 */

const USAGE = `Usage:
  exarch run [options] "<task>"   a root agent works on the task with Claude; sub-agents report
                                  back through reply. stdout: the final answer; stderr: progress
      --model ID          model (default: $EXARCH_MODEL, else ${DEFAULT_MODEL})
      --max-steps N       model requests per turn before an agent is capped (default 50)
      --max-depth N       how deep sub-agents may nest (default 2: root → child → grandchild)
      --reply-cap CHARS   longest reply a sub-agent hands up (default 16000)
      --max-retry-wait S  longest wait a rate-limited or overloaded API may ask for before a
                          request is retried (default 60, at most 2147483); longer, and the
                          request fails
      --wake each|all     an agent that ended its turn while sub-agents run is woken by each
                          result (each, the default) or once, when all have reported (all)
      --log-dir DIR       where each agent's JSONL log goes (default .exarch/runs/<time>/)
      --agents FILE       declared agents (JSON; default ./exarch.config.json when it exists):
                          { "agents": { "NAME": { "description", "system", "tools", "model",
                          "maxSteps", "reply": JSON Schema } } }; the model starts one by type
      --allow-write       let agents write files in the working directory
      --allow-shell       let agents run shell commands, in a bubblewrap sandbox: the working
                          directory writable, the rest read-only, no network (Linux)
      --allow-shell=unsandboxed
                          the same without a sandbox: commands get your full access
      --allow-network     let sandboxed shell commands reach the network
      --allow-git-hooks   let agents change git's hooks and config (.git/hooks, .git/config,
                          core.hooksPath), which git runs outside any sandbox; without it they
                          are read-only in the sandbox and write_file refuses anything in .git
      --shell-limits processes=N,memory=SIZE,file-size=SIZE,cpu=SECONDS,open-files=N
                          limits of each sandboxed command (default processes=1024,
                          memory=8G, file-size=4G, cpu=600, open-files=8192; any may be
                          unlimited); memory, cpu and open files count per process
      --shell-user NAME|UID
                          run as root, exarch runs sandboxed commands as another user: by
                          default the working directory's owner, or nobody when that is
                          root; --shell-user root runs them as root (said on stderr)
      --mcp "CMD ARGS"    offer the tools of an MCP server to every agent, as mcp__<server>__<tool>:
                          a command line (quoted as in a shell) runs the server over stdio; an
                          http(s):// URL reaches a streamable HTTP server (\${NAME} in it is read
                          from the environment: a token off the command line). Repeatable. A
                          server that does not start stops the run; one that crashes or hangs
                          later gives the agent an error result; servers are closed when the run
                          ends
      --trace FILE        record the run as a JSONL trace (view it with exarch view)
      --otel              send the run as OpenTelemetry spans (GenAI conventions: invoke_agent,
                          chat, execute_tool) over OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT;
                          message content too when
                          OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
      --record FILE       keep every model exchange (the request as sent, the response stream)
                          in FILE, for --replay; no key and no *_KEY/*_TOKEN/*_SECRET value in it
      --replay FILE       answer from a recording instead of Claude: offline, no key, at full
                          speed, the same tool calls and answer; give the same task and options.
                          A request that differs from the recording stops the run: exit 1 and
                          one line naming the first differing field
      --inspect           stream every agent to the live Stately inspector (--inspect-port N,
                          default 8080 on 127.0.0.1)
      --ui                serve the turn-flow viewer live on 127.0.0.1 (any free port, or
                          --ui-port N; the address is printed on stderr): the page follows the
                          run as it goes. On a terminal it is served on after the answer until
                          Ctrl-C; otherwise the server closes when the run ends
      --store FILE        the run store (default .exarch/exarch.db under the working directory);
                          the run's id is printed first, and exarch resume takes it up again
      --db URL            keep the run in PostgreSQL (postgres://user@host:port/database)
                          instead of the file, and queue it for the workers (exarch worker);
                          this process follows it with the same progress and answer.
                          Default: $EXARCH_DB_URL, for every command that takes --db
      --no-store          run without recording it (it cannot be resumed)
      --approve TOOLS|all calls of these tools (comma-separated), by any agent, wait for a
                          person's approval: asked inline on a terminal, one at a time
                          (with --db: once the workers have done all they can without them)
      --no-wait           never ask: once only approvals are left, stop as waiting (exit 4)
                          and list them (also what happens without a terminal)
      --steer             read steering commands from stdin, one a line, even when it is not
                          a terminal (on a terminal they are read anyway: type a command while
                          the tree draws): /cancel PATH cancels a sub-agent and its subtree,
                          /msg PATH TEXT gives a running agent a message, /help lists them
                          and the agents running (PATH: root/lead/scribe)
      --max-tokens N      a budget for the whole tree: no request starts once its responses
      --max-cost USD      have used N tokens (or cost USD at list prices); running sub-agents
                          are cancelled and the root answers in one final turn (else exit 3)
      --detach            with --db: print the run id once it is queued and return
      --spread            with --db: each sub-agent a job of its own, spread over the workers;
                          a parent waiting for its sub-agents or a person holds no worker
                          slot (not with --max-tokens or --max-cost: such a run runs whole on
                          one worker)
  exarch worker --db URL [--concurrency N] [--drain-timeout S] [--job-expiry S] [--otel]
                                  take runs queued with run --db and run them here, N at a time
                                  (default 1; of a --spread run, N sessions at a time: its
                                  sub-agents are jobs of their own), with the options each was started with (its --mcp
                                  servers started here); with no one to ask, a run whose calls
                                  wait for approval stops waiting (its follower on a terminal asks,
                                  or exarch approve --db answers them). SIGTERM drains: runs get S seconds (default 30) to
                                  finish, the rest go back to the queue; a job not finished within
                                  --job-expiry seconds (default 900) is offered to another worker;
                                  --otel sends the spans of what it runs, as run --otel does
  exarch resume RUN_ID [--store FILE | --db URL] [--trace FILE] [--no-wait] [--ui] [--steer]
                                  take up a run that was killed, crashed, interrupted or left
                                  waiting, with the options it was started with; ends as run would.
                                  A run whose stored options do not match the signature exarch
                                  recorded them with (changed, or never signed) is refused
  exarch approve RUN_ID CALL_ID [--always] [--store FILE | --db URL]
  exarch deny RUN_ID CALL_ID ["reason"] [--store FILE | --db URL]
                                  record an answer to a call a waiting run asks about (--always:
                                  approve that tool for the rest of the run); resume runs it.
                                  With --db, once no call waits any more, a worker continues it
  exarch runs [--store FILE | --db URL]
                                  list the recorded runs: id, start, status, agents, requests,
                                  estimated cost, task
  exarch demo [--speed N] [--trace FILE] [--inspect] [--ui]
                                  offline demo, no API key: a sub-agent returns its report through
                                  the reply tool while the turn flow of every agent prints live;
                                  writes a trace (default .exarch/demo/trace.jsonl) and its viewer
  exarch view TRACE|RUN_ID [--out FILE.html] [--store FILE | --db URL]
                                  write the turn-flow viewer for a trace or a recorded run: one
                                  self-contained HTML file (default: next to the trace, .html
                                  instead of .jsonl; for a run, .exarch/view/RUN_ID.html), the
                                  page run --ui serves live, once the run has ended
  exarch help                     show this help
  exarch --version                print the version

Environment: ANTHROPIC_API_KEY (required by run, not by --replay), ANTHROPIC_BASE_URL, EXARCH_MODEL,
EXARCH_STALL_TIMEOUT_MS (default 120000), EXARCH_DEBUG (1: an internal error in full), EXARCH_STATE_DIR
(where the key that signs run records is kept; default $XDG_STATE_HOME/exarch, else
~/.local/state/exarch); EXARCH_DB_URL (the default --db), PGPASSWORD, PGPASSFILE and libpq's other
PG* variables (the database's password and more, off the command line); with --otel:
OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), OTEL_EXPORTER_OTLP_HEADERS (the
collector's credentials), OTEL_EXPORTER_OTLP_TIMEOUT (default 10000), OTEL_SERVICE_NAME. A URL is
shown with its password and secret parameters masked.
Exit codes: 0 done, 1 fatal, 2 bad usage, 3 root capped, 4 waiting for approval (resumable),
5 stopped: a file the run writes could not be written (disk full, file-size limit, read-only; resumable),
130 interrupted (resumable).`;

const EXIT_OK = EXIT.ok;
const EXIT_FATAL = EXIT.fatal;
const EXIT_USAGE = EXIT.usage;

async function main(argv: readonly string[]): Promise<number> {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(argv);
  } catch (error) {
    // parseArgs explains how to pass a positional that starts with '-'; the first sentence is the error.
    const message = error instanceof Error ? error.message : String(error);
    return usageError(lowerFirst(message.split('. ', 1)[0] ?? message));
  }
  const { values, positionals } = parsed;
  if (values.version) {
    process.stdout.write(`${version()}\n`);
    return EXIT_OK;
  }
  const [command, ...rest] = positionals;
  if (values.help || command === 'help') {
    process.stdout.write(`exarch — agent sessions as explicit XState machines\n\n${USAGE}\n`);
    return EXIT_OK;
  }
  if (command === undefined) return usageError('missing command');
  try {
    if (command === 'run') return await run(rest, values);
    if (command === 'resume') return await resume(rest, values);
    if (command === 'runs') return await runs(rest, values);
    if (command === 'approve' || command === 'deny') return await answer(command, rest, values);
    if (command === 'view') return await view(rest, values);
    if (command === 'worker') return await worker(rest, values);
    if (command !== 'demo') throw new UsageError(`unknown command '${command}'`);
    if (rest.length > 0) throw new UsageError(`demo takes no arguments, got '${rest.join(' ')}'`);
    refuseFlags('demo', values, [
      ...RUN_FLAGS,
      'out',
      'store',
      'db',
      'no-store',
      'detach',
      'spread',
      'concurrency',
      'drain-timeout',
      'job-expiry',
      'approve',
      'no-wait',
      'steer',
      'always',
    ]);
    const trace = values.trace ?? join('.exarch', 'demo', 'trace.jsonl');
    const speed = speedOf(values.speed);
    const port = uiPort(values.ui === true, values['ui-port']);
    const live = await liveInspector(values);
    let ui: CliUi | undefined;
    try {
      if (values.ui) ui = await CliUi.start({ title: 'exarch demo', ...(port === undefined ? {} : { port }) }, process.stderr);
      // Like `run`: the narration on stderr, the root's answer on stdout (so `exarch demo > answer.txt` keeps just the answer).
      const result = await runDemo({
        out: process.stderr,
        answer: process.stdout,
        err: process.stderr,
        color: wantsColor(process.stderr),
        speed,
        trace,
        ...(live ? { inspect: live.inspect } : {}),
        ...(ui ? { onEvent: ui.onEvent } : {}),
      });
      ui?.end();
      if (result.traceFault) {
        process.stderr.write(`exarch: ${result.traceFault.message}\n`);
        return EXIT_FATAL;
      }
      const viewer = writeViewer(trace, htmlFor(trace));
      process.stderr.write(`\nTurn flow recorded: ${trace}\nOpen it in a browser: ${viewer.outFile}\n`);
      if ((live || ui) && process.stderr.isTTY) {
        // The demo ends in seconds: keep serving so a browser opened late still sees the whole run.
        if (live) process.stderr.write(`exarch: still serving the live inspector at ${live.url}; press Ctrl-C to quit\n`);
        if (ui) process.stderr.write(`exarch: still serving the turn flow at ${ui.url}; press Ctrl-C to quit\n`);
        await new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
      }
      return result.ok ? EXIT_OK : EXIT_FATAL;
    } finally {
      await live?.stop();
      await ui?.close();
    }
  } catch (error) {
    if (error instanceof UsageError) return usageError(error.message);
    process.stderr.write(`${failureLine(error)}\n`);
    return EXIT_FATAL;
  }
}

function parse(argv: readonly string[]) {
  return parseArgs({
    // parseArgs has no optional values: `--allow-shell=unsandboxed` becomes a flag of its own.
    args: argv.map((arg) => (arg === '--allow-shell=unsandboxed' ? '--allow-shell-unsandboxed' : arg)),
    allowPositionals: true,
    strict: true,
    options: {
      help: { type: 'boolean', short: 'h' },
      version: { type: 'boolean', short: 'v' },
      speed: { type: 'string' },
      model: { type: 'string' },
      'max-steps': { type: 'string' },
      'max-depth': { type: 'string' },
      'reply-cap': { type: 'string' },
      wake: { type: 'string' },
      'max-retry-wait': { type: 'string' },
      'log-dir': { type: 'string' },
      agents: { type: 'string' },
      'allow-write': { type: 'boolean' },
      'allow-shell': { type: 'boolean' },
      'allow-shell-unsandboxed': { type: 'boolean' },
      'allow-network': { type: 'boolean' },
      'allow-git-hooks': { type: 'boolean' },
      'shell-limits': { type: 'string' },
      'shell-user': { type: 'string' },
      mcp: { type: 'string', multiple: true },
      trace: { type: 'string' },
      out: { type: 'string' },
      inspect: { type: 'boolean' },
      'inspect-port': { type: 'string' },
      ui: { type: 'boolean' },
      'ui-port': { type: 'string' },
      store: { type: 'string' },
      db: { type: 'string' },
      detach: { type: 'boolean' },
      spread: { type: 'boolean' },
      concurrency: { type: 'string' },
      'drain-timeout': { type: 'string' },
      'job-expiry': { type: 'string' },
      'no-store': { type: 'boolean' },
      approve: { type: 'string' },
      'max-tokens': { type: 'string' },
      'max-cost': { type: 'string' },
      'no-wait': { type: 'boolean' },
      steer: { type: 'boolean' },
      always: { type: 'boolean' },
      otel: { type: 'boolean' },
      record: { type: 'string' },
      replay: { type: 'string' },
    },
  });
}

type Values = ReturnType<typeof parse>['values'];

/** A flag given to a command that has no use for it is a mistake worth one line, not silence. */
function refuseFlags(command: string, values: Values, flags: readonly (keyof Values)[]): void {
  const given = flags.find((flag) => values[flag] !== undefined);
  if (given !== undefined) throw new UsageError(`--${String(given)} is not an option of ${command}`);
}

/** `trace.jsonl` → `trace.html`, next to it. */
function htmlFor(trace: string): string {
  return trace.endsWith('.jsonl') ? `${trace.slice(0, -'.jsonl'.length)}.html` : `${trace}.html`;
}

/** `--inspect`: the live inspector, loaded only when asked for. Its one-line instructions go to stderr. */
async function liveInspector(values: Values): Promise<LiveInspector | undefined> {
  if (values['inspect-port'] !== undefined && !values.inspect) throw new UsageError('--inspect-port needs --inspect');
  if (!values.inspect) return undefined;
  const raw = values['inspect-port'];
  const port = raw === undefined ? undefined : Number(raw);
  if (port !== undefined && (!/^\d+$/.test(raw ?? '') || port < 1 || port > 65535))
    throw new UsageError(`--inspect-port must be a port number, got '${raw ?? ''}'`);
  const { startLiveInspector } = await import('../watch/inspect/liveInspector.js');
  const live = await startLiveInspector(port === undefined ? {} : { port });
  process.stderr.write(`exarch: ${live.instructions}\n`);
  return live;
}

/** A run id as `exarch run` prints it (a ULID); anything else names a trace file. */
const RUN_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

async function view(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length !== 1) throw new UsageError('view takes one trace file or run id: exarch view TRACE|RUN_ID [--out FILE.html]');
  refuseFlags('view', values, [
    ...RUN_FLAGS,
    'trace',
    'speed',
    'inspect',
    'inspect-port',
    'ui',
    'ui-port',
    'no-store',
    'detach',
    'spread',
    'concurrency',
    'drain-timeout',
    'job-expiry',
    'approve',
    'no-wait',
    'steer',
    'always',
  ]);
  const target = positionals[0] ?? '';
  let written: WrittenViewer;
  if (RUN_ID.test(target) && !existsSync(target)) {
    const where = storeTargetOf(values, process.env);
    usableTarget(where);
    const store = await openExistingStore(process.cwd(), where);
    if (!store) throw new Error(`no run with id ${target} (there is no run store in this directory yet)`);
    try {
      written = await writeViewerForRun(store, target, values.out ?? join('.exarch', 'view', `${target}.html`));
    } finally {
      await store.close();
    }
  } else {
    if (values.store !== undefined || values.db !== undefined)
      throw new UsageError(`--${values.store === undefined ? 'db' : 'store'} goes with a run id, not a trace file`);
    written = writeViewer(target, values.out ?? htmlFor(target));
  }
  process.stdout.write(`${written.outFile}\n`);
  const [first] = written.leftOut;
  if (first) {
    const count = written.leftOut.length;
    process.stderr.write(
      `exarch: ${target}: left out ${count === 1 ? 'a line that is not a trace record' : `${count} lines that are not trace records`} (line ${first.line}: ${first.problem})\n`,
    );
  }
  process.stderr.write(`exarch: wrote the turn-flow viewer for ${written.agents} agent${written.agents === 1 ? '' : 's'} (${written.records} trace records)\n`);
  return EXIT_OK;
}

const RUN_FLAGS = [
  'model',
  'max-tokens',
  'max-cost',
  'max-steps',
  'max-depth',
  'reply-cap',
  'wake',
  'max-retry-wait',
  'log-dir',
  'agents',
  'allow-write',
  'allow-shell',
  'allow-shell-unsandboxed',
  'allow-network',
  'allow-git-hooks',
  'shell-limits',
  'shell-user',
  'mcp',
  'otel',
  'record',
  'replay',
] as const;

async function run(positionals: readonly string[], values: ReturnType<typeof parse>['values']): Promise<number> {
  if (positionals.length === 0) throw new UsageError('run needs a task: exarch run "<task>"');
  if (positionals.length > 1) throw new UsageError(`run takes one task; quote it: exarch run "${positionals.join(' ')}"`);
  refuseFlags('run', values, ['speed', 'out', 'concurrency', 'drain-timeout', 'job-expiry', 'always']);
  const interrupt = interruptSignal();
  const live = await liveInspector(values);
  try {
    return await runLive(positionals, values, interrupt, live);
  } finally {
    await live?.stop();
  }
}

async function runLive(positionals: readonly string[], values: Values, interrupt: AbortSignal, live: LiveInspector | undefined): Promise<number> {
  return runCommand(
    positionals[0] ?? '',
    {
      ...(values.model === undefined ? {} : { model: values.model }),
      ...(values['max-steps'] === undefined ? {} : { maxSteps: values['max-steps'] }),
      ...(values['max-depth'] === undefined ? {} : { maxDepth: values['max-depth'] }),
      ...(values['reply-cap'] === undefined ? {} : { replyCap: values['reply-cap'] }),
      ...(values.wake === undefined ? {} : { wake: values.wake }),
      ...(values['max-retry-wait'] === undefined ? {} : { maxRetryWait: values['max-retry-wait'] }),
      ...(values['log-dir'] === undefined ? {} : { logDir: values['log-dir'] }),
      ...(values.agents === undefined ? {} : { agents: values.agents }),
      allowWrite: values['allow-write'] === true,
      allowShell: values['allow-shell-unsandboxed'] === true ? 'unsandboxed' : values['allow-shell'] === true,
      allowNetwork: values['allow-network'] === true,
      allowGitHooks: values['allow-git-hooks'] === true,
      ...(values['shell-limits'] === undefined ? {} : { shellLimits: values['shell-limits'] }),
      ...(values['shell-user'] === undefined ? {} : { shellUser: values['shell-user'] }),
      ...(values.mcp === undefined ? {} : { mcp: values.mcp }),
      ...(values.trace === undefined ? {} : { trace: values.trace }),
      // --no-store keeps no runs: EXARCH_DB_URL is not taken (an explicit --store or --db is refused with it).
      ...(values['no-store'] === true ? explicitTarget(values) : storeTargetOf(values, process.env)),
      noStore: values['no-store'] === true,
      detach: values.detach === true,
      spread: values.spread === true,
      ...(values.approve === undefined ? {} : { approve: values.approve }),
      ...(values['max-tokens'] === undefined ? {} : { maxTokens: values['max-tokens'] }),
      ...(values['max-cost'] === undefined ? {} : { maxCost: values['max-cost'] }),
      noWait: values['no-wait'] === true,
      otel: values.otel === true,
      ...(values.record === undefined ? {} : { record: values.record }),
      ...(values.replay === undefined ? {} : { replay: values.replay }),
      ui: values.ui === true,
      ...(values['ui-port'] === undefined ? {} : { uiPort: values['ui-port'] }),
      steer: values.steer === true,
    },
    {
      stdout: process.stdout,
      stderr: process.stderr,
      env: process.env,
      cwd: process.cwd(),
      interrupt,
      stdin: process.stdin,
      ...(live ? { inspect: live.inspect } : {}),
    },
  );
}

async function resume(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length !== 1) throw new UsageError('resume takes one run id: exarch resume RUN_ID (exarch runs lists them)');
  refuseFlags('resume', values, [
    ...RUN_FLAGS,
    'speed',
    'out',
    'no-store',
    'inspect',
    'inspect-port',
    'detach',
    'spread',
    'concurrency',
    'drain-timeout',
    'job-expiry',
    'approve',
    'always',
  ]);
  const interrupt = interruptSignal();
  return resumeCommand(
    positionals[0] ?? '',
    {
      ...storeTargetOf(values, process.env),
      ...(values.trace === undefined ? {} : { trace: values.trace }),
      noWait: values['no-wait'] === true,
      ui: values.ui === true,
      ...(values['ui-port'] === undefined ? {} : { uiPort: values['ui-port'] }),
      steer: values.steer === true,
    },
    { stdout: process.stdout, stderr: process.stderr, env: process.env, cwd: process.cwd(), interrupt, stdin: process.stdin },
  );
}

async function worker(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 0) throw new UsageError(`worker takes no arguments, got '${positionals.join(' ')}'`);
  refuseFlags('worker', values, [
    ...RUN_FLAGS.filter((flag) => flag !== 'otel'),
    'speed',
    'out',
    'trace',
    'store',
    'no-store',
    'detach',
    'spread',
    'inspect',
    'inspect-port',
    'ui',
    'ui-port',
    'approve',
    'no-wait',
    'steer',
    'always',
  ]);
  const { workerCommand } = await import('./workerCommand.js');
  return workerCommand(
    {
      ...storeTargetOf({ db: values.db }, process.env),
      otel: values.otel === true,
      ...(values.concurrency === undefined ? {} : { concurrency: values.concurrency }),
      ...(values['drain-timeout'] === undefined ? {} : { drainTimeout: values['drain-timeout'] }),
      ...(values['job-expiry'] === undefined ? {} : { jobExpiry: values['job-expiry'] }),
    },
    { stderr: process.stderr, env: process.env, stop: interruptSignal() },
  );
}

/** `exarch approve RUN_ID CALL_ID [--always]`, `exarch deny RUN_ID CALL_ID ["reason"]`: record the answer only. */
async function answer(command: 'approve' | 'deny', positionals: readonly string[], values: Values): Promise<number> {
  const usage =
    command === 'approve'
      ? 'exarch approve RUN_ID CALL_ID [--always] [--store FILE | --db URL]'
      : 'exarch deny RUN_ID CALL_ID ["reason"] [--store FILE | --db URL]';
  const most = command === 'approve' ? 2 : 3;
  if (positionals.length < 2 || positionals.length > most) throw new UsageError(`${command} takes a run id and a call id: ${usage}`);
  refuseFlags(command, values, [
    ...RUN_FLAGS,
    'speed',
    'out',
    'trace',
    'no-store',
    'inspect',
    'inspect-port',
    'ui',
    'ui-port',
    'approve',
    'no-wait',
    'steer',
    'detach',
    'spread',
    'concurrency',
    'drain-timeout',
    'job-expiry',
    ...(command === 'deny' ? (['always'] as const) : []),
  ]);
  const [runId = '', callId = '', reason] = positionals;
  const decision = command === 'deny' ? 'deny' : values.always === true ? 'always' : 'approve';
  const target = storeTargetOf(values, process.env);
  usableTarget(target);
  return answerCommand(runId, callId, { decision, ...(reason === undefined ? {} : { reason }) }, target, {
    stdout: process.stdout,
    stderr: process.stderr,
    cwd: process.cwd(),
  });
}

async function runs(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 0) throw new UsageError(`runs takes no arguments, got '${positionals.join(' ')}'`);
  refuseFlags('runs', values, [
    ...RUN_FLAGS,
    'speed',
    'out',
    'trace',
    'no-store',
    'inspect',
    'inspect-port',
    'ui',
    'ui-port',
    'detach',
    'spread',
    'concurrency',
    'drain-timeout',
    'job-expiry',
    'approve',
    'no-wait',
    'steer',
    'always',
  ]);
  return listRunsCommand(storeTargetOf(values, process.env), { stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() });
}

/** `--store` and `--db` as given, without EXARCH_DB_URL. */
function explicitTarget(values: Values): StoreTarget {
  return { ...(values.store === undefined ? {} : { store: values.store }), ...(values.db === undefined ? {} : { db: values.db }) };
}

/**
 * The secrets of the URLs on this command line (`--db`, an `--mcp` URL, a URL in the task): masked
 * where exarch shows a URL, and redacted from the rest of what it prints, as the environment's are.
 */
function commandLineSecrets(argv: readonly string[]): string[] {
  return argv.map((arg) => arg.replace(/^--[\w-]+=/, '')).flatMap((arg) => (isUrl(arg) ? urlSecrets(arg) : []));
}

/** What ends a run from outside: Ctrl-C, a supervisor's (or `kill`'s) SIGTERM, a closed terminal's SIGHUP. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * The first of those signals cancels the tree and lets it answer its calls and write its logs,
 * leaving a durable run interrupted and resumable; a second one, of any kind, quits at once.
 */
function interruptSignal(): AbortSignal {
  const interrupt = new AbortController();
  const first = (): void => {
    for (const signal of STOP_SIGNALS) process.off(signal, first);
    interrupt.abort();
    for (const signal of STOP_SIGNALS) process.once(signal, () => process.exit(EXIT.interrupted));
  };
  for (const signal of STOP_SIGNALS) process.once(signal, first);
  return interrupt.signal;
}

/** The slowest demo: its longest wait (the 30 s watchdog) at this speed is still far within what a timer holds. */
const MIN_SPEED = 0.001;

function speedOf(raw: string | undefined): number {
  if (raw === undefined) return 1;
  const speed = Number(raw);
  if (!Number.isFinite(speed) || speed <= 0) throw new UsageError(`--speed must be a positive number, got '${raw}'`);
  // The demo's delays are divided by the speed: slower than this, its timers would overflow and fire at once.
  if (speed < MIN_SPEED) throw new UsageError(`--speed must be at least ${MIN_SPEED} (slower, the demo's waits pass what a timer holds), got '${raw}'`);
  return speed;
}

function usageError(message: string): number {
  process.stderr.write(`exarch: ${message.split('\n', 1)[0] ?? message}\n\n${USAGE}\n`);
  return EXIT_USAGE;
}

/** Colour only for a person at a terminal (CONTRACT §7: plain when NO_COLOR or CI is set). */
function wantsColor(stream: NodeJS.WriteStream): boolean {
  return stream.isTTY === true && !process.env['NO_COLOR'] && !process.env['CI'];
}

/** The version in package.json: two levels up from src/cli/ in the sources, three from dist/src/cli/. */
function version(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    try {
      const pkg: unknown = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'));
      if (typeof pkg === 'object' && pkg !== null && 'name' in pkg && pkg.name === 'exarch' && 'version' in pkg) return String(pkg.version);
    } catch {
      // not here: look one level up
    }
    dir = dirname(dir);
  }
  return 'unknown';
}

function lowerFirst(text: string): string {
  return text.charAt(0).toLowerCase() + text.slice(1);
}

// No secret of the environment (the API key, any *_KEY, *_TOKEN, *_SECRET, *_PASSWORD, a URL's
// password or token) nor of a URL on the command line is printed, whoever prints it.
redactProcessOutput(Redactor.fromEnv(process.env, commandLineSecrets(process.argv.slice(2))));

// pg honours PGPASSFILE (and ~/.pgpass) as libpq does, and says on stderr that a later pg will
// stop: a notice a person at the command line cannot act on (a test proves the file still works).
process.noDeprecation = true;

// `exarch demo | head` closes the pipe early: that is the reader's choice, not an error.
process.stdout.on('error', (error: NodeJS.ErrnoException) => {
  if (error.code !== 'EPIPE') process.stderr.write(`exarch: cannot write to stdout: ${describeError(error)}\n`);
  process.exit(error.code === 'EPIPE' ? EXIT_OK : EXIT_FATAL);
});

// What no caller caught (an error thrown from a timer, a rejection no one awaited) ends the command
// as any failure does: one line, not Node's stack trace.
const fail = (error: unknown): void => {
  process.stderr.write(`${failureLine(error)}\n`);
  process.exit(EXIT_FATAL);
};
process.on('uncaughtException', fail);
process.on('unhandledRejection', fail);

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`${failureLine(error)}\n`);
    process.exitCode = EXIT_FATAL;
  },
);
