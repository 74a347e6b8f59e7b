import { resumeRun, RunError, type DurableSessionInput } from '../run/durableRun.js';
import { restoreRun } from '../store/restoreRun.js';
import type { JournalRow } from '../store/runStore.js';
import { followStored } from './followStored.js';
import type { CliUi } from './liveUi.js';
import { checkSeal, sealRefusal } from './recordSeal.js';
import { ownFiles, storeApart, targetFlags, uiPort, UNSANDBOXED_WARNING, usableTarget, type PostgresTarget } from './runChecks.js';
import { EXIT, type RunIo } from './runIo.js';
import { runKey, runKeyFile } from './runKey.js';
import { RunOutput } from './runOutput.js';
import { readRecord, type CliRunRecord } from './runRecord.js';
import { buildRunSession, type RunSession } from './runSession.js';
import { openExistingStore, storeName } from './storeTarget.js';
import { WriteFaults } from './writeFaults.js';

/** The flags of `exarch resume`: where the run is kept, and how this process follows it. */
export interface ResumeFlags {
  readonly store?: string;
  readonly db?: string;
  /** `db` came from `EXARCH_DB_URL` (see `StoreTarget`). */
  readonly dbFromEnv?: boolean;
  readonly trace?: string;
  /** As for `run`: stop as `waiting` rather than ask at the terminal. */
  readonly noWait?: boolean;
  /** As for `run`: the turn-flow viewer, live. */
  readonly ui?: boolean;
  readonly uiPort?: string;
  /** As for `run`: steering commands from stdin without a terminal. */
  readonly steer?: boolean;
}

/**
 * `exarch resume RUN_ID`: takes up a run that did not finish (killed, crashed or interrupted) in
 * the run store, with the options it was started with, and ends as `exarch run` would. A run
 * spread over the workers (`--spread`) is queued again for them and followed (`requeueAndFollow`).
 */
export async function resumeCommand(runId: string, flags: ResumeFlags, io: RunIo): Promise<number> {
  usableTarget(flags);
  const port = uiPort(flags.ui === true, flags.uiPort);
  const store = await openExistingStore(io.cwd, flags);
  if (!store) {
    io.stderr.write(`exarch: no run ${runId} in ${storeName(io.cwd, flags)} (there is no run store there yet)\n`);
    return EXIT.fatal;
  }
  let built: RunSession | undefined;
  let ui: CliUi | undefined;
  try {
    const row = await store.getRun(runId);
    if (!row) {
      io.stderr.write(`exarch: no run ${runId} in ${store.file}\n`);
      return EXIT.fatal;
    }
    if (row.status !== 'running' && row.status !== 'interrupted' && row.status !== 'waiting') {
      // A failed run says why (a replay that left its recording, a store that could not be written): resuming cannot change it.
      const why = row.status === 'failed' ? failureOf(await store.journal(runId)) : undefined;
      io.stderr.write(`exarch: run ${runId} is already finished (${row.status}${why === undefined ? '' : `: ${why}`}); nothing to resume\n`);
      return EXIT.ok;
    }
    // A record kept in the file is taken only as exarch signed it: a record that grants a shell
    // without a sandbox, an MCP command or no approvals is refused here if anyone else wrote it.
    // (One in PostgreSQL is not signed: the database's access control keeps it.)
    if (flags.db === undefined) {
      const check = checkSeal(runKey(io.env, false, row.cwd), row);
      if (check !== 'signed') {
        io.stderr.write(`exarch: ${sealRefusal(runId, check, runKeyFile(io.env))}\n`);
        return EXIT.fatal;
      }
    }
    // The sessions as the run was started, from its record: the same servers started again (their tools must be the same: see resumeRun).
    const record = readRecord(row.options);
    storeApart(io.cwd, flags, row.cwd, record);
    if (record.allowShell === 'unsandboxed') io.stderr.write(UNSANDBOXED_WARNING);
    // A spread run is taken up where it runs: its sessions queued again for the workers, and followed.
    if (row.options['spread'] === true && flags.db !== undefined)
      return await requeueAndFollow({ db: flags.db, dbFromEnv: flags.dbFromEnv === true }, row.id, record, flags, io);
    const faults = new WriteFaults();
    built = await buildRunSession(
      { id: runId, cwd: row.cwd, startedAt: row.startedAt, record },
      {
        env: io.env,
        stderr: io.stderr,
        ...(io.provider ? { provider: io.provider } : {}),
        protectedPaths: ownFiles(io.cwd, flags, [flags.trace]),
        onFileFault: faults.report,
      },
    );
    const { model, logDir, maxSteps } = built;
    const title = `exarch resume ${runId}: ${row.task.slice(0, 80)}`;
    if (flags.ui) ui = await (await import('./liveUi.js')).CliUi.start({ title, model, ...(port === undefined ? {} : { port }) }, io.stderr);
    const output = new RunOutput(io, flags.trace, title, model, logDir, maxSteps, {
      noWait: flags.noWait === true,
      target: targetFlags(flags),
      steer: flags.steer === true,
      faults,
      ...(ui ? { ui } : {}),
    });
    const session: DurableSessionInput = { ...built.session, ...(record.approve === undefined ? {} : { onApprovalRequest: output.onApprovalRequest }) };
    let run: Awaited<ReturnType<typeof resumeRun>>;
    try {
      // Said before the root starts, so it comes before the first progress line.
      const onStart = (): void => void io.stderr.write(`exarch: run ${runId} resumed\n`);
      run = await resumeRun(runId, session, { store, cwd: io.cwd, actor: { inspect: output.inspect }, onStart });
    } catch (error) {
      if (!(error instanceof RunError)) throw error;
      io.stderr.write(`exarch: ${error.message}\n`);
      return EXIT.fatal;
    }
    if ('finished' in run) {
      // Its last process died after the root settled, before it said so: end as that run would have.
      io.stderr.write(`exarch: run ${runId} had finished (${run.status}) when its process stopped\n`);
      return output.ended(run);
    }
    return await output.follow(run, io.interrupt, store);
  } finally {
    await store.close();
    await built?.close();
    await ui?.finish(io.interrupt);
  }
}

/** Why a failed run's root ended, as its journal says; undefined when it does not. */
function failureOf(rows: readonly JournalRow[]): string | undefined {
  const restored = restoreRun(rows);
  return restored.kind === 'ended' ? restored.result.reason : undefined;
}

/**
 * `exarch resume RUN_ID --db URL` of a spread run: every session of it that has not ended is
 * queued again (`requeueSpreadRun`: one whose job was lost or gave up is taken up by a worker from
 * its journal), then the run is followed as `run --db` follows it.
 */
async function requeueAndFollow(target: PostgresTarget, id: string, record: CliRunRecord, flags: ResumeFlags, io: RunIo): Promise<number> {
  const { db } = target;
  const { openPostgresStore } = await import('../store/postgresStore.js');
  const { startBoss } = await import('../workers/runQueue.js');
  const { requeueSpreadRun } = await import('../workers/spreadResume.js');
  const port = uiPort(flags.ui === true, flags.uiPort);
  const ui = flags.ui ? await (await import('./liveUi.js')).CliUi.startFed(port === undefined ? {} : { port }, io.stderr) : undefined;
  const store = openPostgresStore(db);
  try {
    const boss = await startBoss(db);
    let queued: string[];
    try {
      queued = await requeueSpreadRun(store, boss, id);
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
    io.stderr.write(`exarch: run ${id}: ${queued.length} session${queued.length === 1 ? '' : 's'} queued again for the workers (${queued.join(', ')})\n`);
    return await followStored(store, id, record, target, { noWait: flags.noWait === true, steer: flags.steer === true, spread: true }, io, ui);
  } finally {
    await store.close();
    await ui?.finish(io.interrupt);
  }
}
