import { createSessionActor, runResultOf, waitForSettled } from '../run/runtime.js';
import { newRunId, startRun, type DurableSessionInput } from '../run/durableRun.js';
import type { RunStore } from '../store/runStore.js';
import { openStore } from './storeTarget.js';
import { agentsSource } from './agentsConfig.js';
import type { InspectionEvent } from 'xstate';
import type { CliUi } from './liveUi.js';
import { checkApproveNames, recordFromFlags, storedRecord, type CliRunRecord } from './runRecord.js';
import { buildRunSession } from './runSession.js';
import { UsageError } from './usageError.js';
import { sealingStore } from './recordSeal.js';
import { runKey } from './runKey.js';
import { SqliteRunStore } from '../store/sqliteStore.js';
import { WriteFaults } from './writeFaults.js';
import { ownFiles, storeApart, targetFlags, uiPort, UNSANDBOXED_WARNING, usableTarget } from './runChecks.js';
import type { RunFlags, RunIo } from './runIo.js';
import { RunOutput, type FollowedRun } from './runOutput.js';
import { submitAndFollow } from './submitAndFollow.js';

/**
 * `exarch run "<task>"` (CONTRACT §7): the root works on the task with Claude until it settles.
 * stdout gets the root's final answer only; stderr gets progress, the summary and errors. The run
 * is recorded in the run store (unless `--no-store`) and its id printed first, so that
 * `exarch resume` can take it up again after a crash or Ctrl-C.
 */
export async function runCommand(task: string, flags: RunFlags, io: RunIo): Promise<number> {
  const port = checkRunFlags(task, flags);
  // The flags validated into the run's record: what this process, a resume and a worker build the sessions from.
  const record = recordFromFlags(flags, io.env, io.cwd);
  if (!flags.noStore) storeApart(io.cwd, flags, io.cwd, record);
  if (record.allowShell === 'unsandboxed') io.stderr.write(UNSANDBOXED_WARNING);
  const agentsSourceName = agentsSource(flags.agents);
  if (flags.db !== undefined) {
    const follow = {
      detach: flags.detach === true,
      noWait: flags.noWait === true,
      steer: flags.steer === true,
      spread: flags.spread === true,
      ...(flags.ui ? { ui: port === undefined ? {} : { port } } : {}),
    };
    return submitAndFollow({ db: flags.db, dbFromEnv: flags.dbFromEnv === true }, task, record, agentsSourceName, follow, io);
  }
  return runHere(task, flags, record, agentsSourceName, port, io);
}

/** The flags of `exarch run` checked against each other before anything starts (a mistake is a usage error); the `--ui-port` given. */
function checkRunFlags(task: string, flags: RunFlags): number | undefined {
  if (task.trim() === '') throw new UsageError('the task is empty');
  if (flags.noStore && (flags.store !== undefined || flags.db !== undefined))
    throw new UsageError(`--${flags.db === undefined ? 'store' : 'db'} and --no-store cannot be used together`);
  usableTarget(flags);
  if (flags.detach && flags.db === undefined) throw new UsageError('--detach needs --db: only a run queued for workers goes on without this process');
  if (flags.spread && flags.db === undefined) throw new UsageError('--spread needs --db: sub-agents are spread over the workers of a database');
  if (flags.spread) {
    // A whole-tree budget is kept by the one process that runs the tree.
    const whole = flags.maxTokens !== undefined ? 'max-tokens' : flags.maxCost !== undefined ? 'max-cost' : undefined;
    if (whole) throw new UsageError(`--spread with --${whole}: such a run runs whole on one worker; leave out --spread`);
  }
  if (flags.record !== undefined && flags.replay !== undefined) throw new UsageError('--record and --replay cannot be used together');
  const port = uiPort(flags.ui === true, flags.uiPort);
  if (flags.db !== undefined) {
    if (flags.ui && flags.detach) throw new UsageError('--ui with --detach: nothing here follows the run; view it with exarch view RUN_ID --db URL');
    if (flags.steer && flags.detach) throw new UsageError('--steer with --detach: nothing here reads the lines; follow the run to steer it');
    if (flags.otel) throw new UsageError('--otel with --db: the workers run the agents and send the spans: start them with exarch worker --otel');
    if (flags.record !== undefined || flags.replay !== undefined)
      throw new UsageError(`--${flags.record === undefined ? 'replay' : 'record'} with --db: the workers make the model requests; run it here without --db`);
  }
  return port;
}

/**
 * `exarch run` in this process: the sessions built from the record, the run recorded in the store
 * (unless `--no-store`) and signed, then followed to its end by `RunOutput`.
 */
async function runHere(task: string, flags: RunFlags, record: CliRunRecord, agentsSourceName: string, port: number | undefined, io: RunIo): Promise<number> {
  const diverged = new AbortController();
  const recording = {
    ...(flags.record === undefined ? {} : { record: flags.record }),
    ...(flags.replay === undefined ? {} : { replay: flags.replay, diverged }),
  };
  // The person's key, which signs the run's record as it is stored (made on first use): a key that
  // cannot be had stops the run here, before anything starts.
  const key = flags.noStore ? undefined : runKey(io.env, true, io.cwd);
  // A log, the trace or the recording that cannot be written stops the run, resumable (writeFaults.ts).
  const faults = new WriteFaults();
  // Before anything is recorded: no key, a server that does not start, a config or --approve naming
  // a tool the run does not have, a log directory that cannot be one: one line each.
  const built = await buildRunSession(
    { cwd: io.cwd, startedAt: Date.now(), record },
    {
      env: io.env,
      stderr: io.stderr,
      ...(io.provider ? { provider: io.provider } : {}),
      recording,
      agentsSource: agentsSourceName,
      protectedPaths: ownFiles(io.cwd, flags.noStore ? undefined : flags, [flags.trace, flags.record]),
      onFileFault: faults.report,
    },
  );
  let store: RunStore | undefined;
  let ui: CliUi | undefined;
  try {
    checkApproveNames(record.approve, built.tools);
    // No endpoint, or one that is not a URL, is one line (OtelSetupError, exit 1).
    const otel = flags.otel ? await (await import('./otlpExport.js')).startOtlpExport(io.env) : undefined;
    // A store that cannot be read stops the run before anything starts (StoreError: one line, exit 1).
    store = flags.noStore ? undefined : await openStore(io.cwd, flags);
    const { model, logDir, maxSteps } = built;
    const title = `exarch run: ${task.slice(0, 80)}`;
    // The viewer's server (and what it serves) is loaded with --ui only.
    if (flags.ui) ui = await (await import('./liveUi.js')).CliUi.start({ title, model, ...(port === undefined ? {} : { port }) }, io.stderr);
    const output = new RunOutput(io, flags.trace, title, model, logDir, maxSteps, {
      noWait: flags.noWait === true,
      target: targetFlags(flags),
      steer: flags.steer === true,
      faults,
      ...(otel ? { otel } : {}),
      ...(flags.record === undefined ? {} : { record: flags.record }),
      ...(flags.replay === undefined ? {} : { diverged: diverged.signal }),
      ...(ui ? { ui } : {}),
    });
    const session: DurableSessionInput = { ...built.session, ...(record.approve === undefined ? {} : { onApprovalRequest: output.onApprovalRequest }) };
    if (!store) return await output.follow(localRun(task, session, output.inspect), io.interrupt);
    const id = newRunId();
    io.stderr.write(`exarch: run ${id} started\n`);
    // Stored without an --mcp URL's secrets (this process connected with them; a resume reads them
    // from ${NAME}: see storedRecord), and signed as stored: a resume checks the record before it
    // takes any power from it.
    const recorded = key !== undefined && store instanceof SqliteRunStore ? sealingStore(store, key) : store;
    const run = await startRun(task, session, {
      store: recorded,
      id,
      cwd: io.cwd,
      record: { ...storedRecord(record), logDir },
      actor: { inspect: output.inspect },
    });
    return await output.follow(run, io.interrupt, store);
  } finally {
    await store?.close();
    await built.close();
    await ui?.finish(io.interrupt);
  }
}

/** A run that is not recorded: the root actor alone. */
function localRun(task: string, session: DurableSessionInput, inspect: (event: InspectionEvent) => void): FollowedRun {
  const actor = createSessionActor({ ...session, task }, { inspect });
  actor.start();
  const result = (async () => {
    try {
      return runResultOf(await waitForSettled(actor));
    } finally {
      actor.stop();
      // Let stopped sessions close their logs (their teardown runs on the next microtasks).
      await new Promise((resolve) => setImmediate(resolve));
    }
  })();
  const cancel = (reason: string): void => actor.send({ type: 'cancel', reason });
  return { actor, result, interrupt: () => cancel('interrupted'), suspend: () => cancel('waiting for approval'), fail: cancel };
}
