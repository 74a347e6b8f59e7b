import type { Submission } from '../workers/runQueue.js';
import { followStored } from './followStored.js';
import type { PostgresTarget } from './runChecks.js';
import { EXIT, type RunIo } from './runIo.js';
import { checkApproveNames, storedRecord, type CliRunRecord } from './runRecord.js';
import { runToolsOf } from './runSession.js';

/**
 * `exarch run --db URL "task"`: the run is recorded and queued for the workers (`exarch worker`);
 * this process then follows it from the store (`followStored`: the progress, answer and summary of
 * a run here) or, with `--detach`, prints its id and returns. Ctrl-C stops following; the run goes
 * on on the workers.
 */
export async function submitAndFollow(
  target: PostgresTarget,
  task: string,
  record: CliRunRecord,
  agentsSourceName: string,
  {
    detach,
    noWait,
    steer,
    spread,
    ui: uiOptions,
  }: { readonly detach: boolean; readonly noWait: boolean; readonly steer: boolean; readonly spread: boolean; readonly ui?: { readonly port?: number } },
  io: RunIo,
): Promise<number> {
  const { db } = target;
  // The tools checked as a run here checks them (the MCP servers started once, to list theirs),
  // and their names recorded: every worker that takes the run must offer the same.
  const tools = await runToolsOf({ cwd: io.cwd, record }, { env: io.env, stderr: io.stderr, agentsSource: agentsSourceName });
  let submission: Submission;
  try {
    checkApproveNames(record.approve, tools.tools);
    const agentTypes = Object.keys(tools.agents ?? {}).sort();
    submission = {
      task,
      cwd: io.cwd,
      record: {
        ...storedRecord(record),
        tools: tools.tools.map((tool) => tool.name).sort(),
        ...(agentTypes.length > 0 ? { agentTypes } : {}),
        // Each session a job of its own, spread over the workers (docs/scaling.md).
        ...(spread ? { spread: true } : {}),
      },
    };
  } finally {
    await tools.close();
  }
  // Loaded only here: a command without --db never pays for pg and pg-boss.
  const { openPostgresStore } = await import('../store/postgresStore.js');
  const { startBoss, submitRun } = await import('../workers/runQueue.js');
  // `--ui`: the page, fed the trace records the follower makes of the journal. Started before the
  // run is queued, as a run here starts it: a port in use stops the command with nothing queued.
  const ui = uiOptions ? await (await import('./liveUi.js')).CliUi.startFed(uiOptions, io.stderr) : undefined;
  const store = openPostgresStore(db);
  try {
    // The store's line (a server that cannot be reached, a password not given) before pg-boss's words.
    await store.open();
    const boss = await startBoss(db);
    let id: string;
    try {
      id = await submitRun(store, boss, submission);
    } finally {
      await boss.stop({ graceful: false, wait: true });
    }
    if (detach) {
      io.stdout.write(`${id}\n`);
      io.stderr.write(`exarch: run ${id} queued for the workers; follow it with exarch runs --db, resume or view it by id\n`);
      return EXIT.ok;
    }
    io.stderr.write(`exarch: run ${id} started (queued for the workers)\n`);
    return await followStored(store, id, record, target, { noWait, steer, spread }, io, ui);
  } finally {
    await store.close();
    await ui?.finish(io.interrupt);
  }
}
