import { finalAssistantText } from '../engine/history.js';
import { estimateCost } from '../engine/pricing.js';
import { DEFAULTS } from '../session/options.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import { restoreRun } from '../store/restoreRun.js';
import { waitingCalls } from '../store/runApprovals.js';
import type { RunRow } from '../store/runStore.js';
import type { ProgressBoard } from './progress.js';
import { budgetLine, listWaiting, storedTotals, writeSummary } from './runEnding.js';
import { EXIT, type RunIo } from './runIo.js';
import type { CliRunRecord } from './runRecord.js';
import { defaultLogDir } from './runSession.js';

/**
 * How a run followed from the store ends once its worker set its last status, as a run here ends:
 * the summary, then the calls that wait (exit 4), the failure, or the root's answer on stdout with
 * the budget's and the step cap's lines.
 */
export async function storedEnding(
  store: PostgresRunStore,
  id: string,
  run: RunRow,
  record: CliRunRecord,
  board: ProgressBoard,
  target: string,
  io: RunIo,
): Promise<number> {
  const { model, maxSteps } = record;
  const stored = await storedTotals(store, id);
  const totals = board.totals();
  const logDir = record.logDir ?? defaultLogDir(run.cwd, run.startedAt);
  const summary = (): void =>
    writeSummary(
      io.stderr,
      stored ? { ...totals, agents: stored.agents, steps: stored.requests, usage: stored.usage } : totals,
      model,
      `${logDir} (on the workers)`,
    );
  if (run.status === 'waiting') {
    summary();
    const calls = await waitingCalls(store, id);
    listWaiting(
      io.stderr,
      id,
      calls.map((call) => ({ callId: call.callId, tool: call.tool, agent: call.agent, input: call.input })),
      target,
      true,
    );
    return EXIT.waiting;
  }
  const restored = restoreRun(await store.journal(id));
  const messages = restored.kind === 'ended' || restored.kind === 'settled' ? restored.messages : restored.kind === 'resumable' ? restored.root.messages : [];
  if (run.status === 'failed') {
    summary();
    io.stderr.write(`exarch: the root agent failed: ${(restored.kind === 'ended' ? restored.result.reason : undefined) ?? 'unknown reason'}\n`);
    return EXIT.fatal;
  }
  const text = finalAssistantText(messages);
  if (text) io.stdout.write(text.endsWith('\n') ? text : `${text}\n`);
  summary();
  // The budget's meter was on the worker; what it counted, the journal's usage says.
  const usage = stored?.usage ?? totals.usage;
  const tokens = usage.inputTokens + usage.outputTokens + usage.cacheCreationInputTokens + usage.cacheReadInputTokens;
  const cost = estimateCost(model, usage) ?? 0;
  if ((record.maxTokens !== undefined && tokens >= record.maxTokens) || (record.maxCost !== undefined && cost >= record.maxCost)) {
    io.stderr.write(budgetLine(tokens, cost, run.status === 'capped'));
    if (run.status === 'capped') return EXIT.capped;
  }
  if (run.status === 'capped') {
    io.stderr.write(`exarch: the root agent stopped at its step cap (${maxSteps ?? DEFAULTS.maxSteps} model requests in one turn)\n`);
    return EXIT.capped;
  }
  return EXIT.ok;
}
