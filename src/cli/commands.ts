import type { LiveInspector } from '../watch/inspect/liveInspector.js';
import { acceptFlags, explicitTarget, RUN_FLAGS, type Values } from './flags.js';
import { liveInspector } from './inspectFlag.js';
import { interruptSignal } from './interruptSignal.js';
import { usableTarget } from './runChecks.js';
import { storeTargetOf } from './storeTarget.js';
import { UsageError } from './usageError.js';

/*
 * The commands main.ts dispatches to (view and demo have files of their own): each checks its
 * words and refuses the flags it has no use for (a usage error), then calls what does the work
 * with the flags it takes. What does the work is imported when the command runs, not with this
 * file: `exarch runs` need not load the SDK and the session machines that `exarch run` does.
 */

/** `exarch run "<task>"`: the flags into `RunFlags`, with Ctrl-C and `--inspect` set up around the run. */
export async function run(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length === 0) throw new UsageError('run needs a task: exarch run "<task>"');
  if (positionals.length > 1) throw new UsageError(`run takes one task; quote it: exarch run "${positionals.join(' ')}"`);
  acceptFlags('run', values, [
    ...RUN_FLAGS,
    'trace',
    'inspect',
    'inspect-port',
    'ui',
    'ui-port',
    'store',
    'db',
    'no-store',
    'detach',
    'spread',
    'approve',
    'no-wait',
    'steer',
  ]);
  const interrupt = interruptSignal();
  const live = await liveInspector(values);
  try {
    return await runLive(positionals, values, interrupt, live);
  } finally {
    await live?.stop();
  }
}

async function runLive(positionals: readonly string[], values: Values, interrupt: AbortSignal, live: LiveInspector | undefined): Promise<number> {
  const { runCommand } = await import('./run.js');
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

/** `exarch resume RUN_ID`: the flags a resume takes (a run's own options come from its record). */
export async function resume(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length !== 1) throw new UsageError('resume takes one run id: exarch resume RUN_ID (exarch runs lists them)');
  acceptFlags('resume', values, ['trace', 'ui', 'ui-port', 'store', 'db', 'no-wait', 'steer']);
  const interrupt = interruptSignal();
  const { resumeCommand } = await import('./resume.js');
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

/** `exarch worker`: its code loaded only when asked for, as it brings in the workers and their Postgres queue. */
export async function worker(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 0) throw new UsageError(`worker takes no arguments, got '${positionals.join(' ')}'`);
  acceptFlags('worker', values, ['otel', 'db', 'concurrency', 'drain-timeout', 'job-expiry']);
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
export async function answer(command: 'approve' | 'deny', positionals: readonly string[], values: Values): Promise<number> {
  const usage =
    command === 'approve'
      ? 'exarch approve RUN_ID CALL_ID [--always] [--store FILE | --db URL]'
      : 'exarch deny RUN_ID CALL_ID ["reason"] [--store FILE | --db URL]';
  const most = command === 'approve' ? 2 : 3;
  if (positionals.length < 2 || positionals.length > most) throw new UsageError(`${command} takes a run id and a call id: ${usage}`);
  acceptFlags(command, values, command === 'approve' ? ['store', 'db', 'always'] : ['store', 'db']);
  const [runId = '', callId = '', reason] = positionals;
  const decision = command === 'deny' ? 'deny' : values.always === true ? 'always' : 'approve';
  const target = storeTargetOf(values, process.env);
  usableTarget(target);
  const { answerCommand } = await import('./approve.js');
  return answerCommand(runId, callId, { decision, ...(reason === undefined ? {} : { reason }) }, target, {
    stdout: process.stdout,
    stderr: process.stderr,
    cwd: process.cwd(),
  });
}

/** `exarch runs`: the recorded runs, listed. */
export async function runs(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 0) throw new UsageError(`runs takes no arguments, got '${positionals.join(' ')}'`);
  acceptFlags('runs', values, ['store', 'db']);
  const { listRunsCommand } = await import('./runs.js');
  return listRunsCommand(storeTargetOf(values, process.env), { stdout: process.stdout, stderr: process.stderr, cwd: process.cwd() });
}
