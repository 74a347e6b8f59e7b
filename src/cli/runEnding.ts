import { clip } from '../engine/render.js';
import { estimateCost } from '../engine/pricing.js';
import type { RunStore, RunSummary } from '../store/runStore.js';
import { formatCount } from './formatCount.js';
import type { ProgressBoard } from './progress.js';

/** The run's totals as its store counted them; undefined when the store has no readable row for it. */
export async function storedTotals(store: Pick<RunStore, 'listRuns'>, id: string): Promise<RunSummary | undefined> {
  const listed = (await store.listRuns()).find((r) => r.id === id);
  return listed?.status === 'unreadable' ? undefined : listed;
}

/**
 * The exit-4 listing: each waiting call with its tool, its agent and the commands that answer it.
 * `queued`: a run of the workers, continued by them once every call is answered.
 */
export function listWaiting(
  out: NodeJS.WritableStream,
  runId: string | undefined,
  waiting: readonly { readonly callId: string; readonly tool: string; readonly agent: string; readonly input: unknown }[],
  target: string,
  queued: boolean,
): void {
  const n = waiting.length;
  out.write(`exarch: stopped: ${n} tool call${n === 1 ? '' : 's'} wait${n === 1 ? 's' : ''} for approval\n`);
  for (const request of waiting) {
    out.write(`  ${request.callId}  ${request.tool}  by ${request.agent}  ${clip(JSON.stringify(request.input), 160)}\n`);
    if (runId !== undefined)
      out.write(`    exarch approve ${runId} ${request.callId}${target}    or: exarch deny ${runId} ${request.callId} "reason"${target}\n`);
  }
  if (runId === undefined) out.write('exarch: this run was not recorded (--no-store), so it cannot be answered and resumed\n');
  else if (queued) out.write(`exarch: once every call is answered, a worker continues the run (or continue it here with: exarch resume ${runId}${target})\n`);
  else out.write(`exarch: then continue with: exarch resume ${runId}${target}\n`);
}

/** What a run the budget stopped says about it. */
export function budgetLine(tokens: number, cost: number, capped: boolean): string {
  return `exarch: the budget stopped the run: the tree spent ${formatCount(tokens)} tokens${cost > 0 ? ` (about $${cost.toFixed(3)})` : ''}; running and queued sub-agents were cancelled and the root ${capped ? 'could not answer within the budget' : 'answered in its final turn'}\n`;
}

/**
 * The summary line of a run: agents, model requests, tokens, an estimate of the cost, where the
 * logs are. A replay (`replayed`) spent nothing: its tokens are the recording's, and so is the
 * estimate, said as such beside the $0.
 */
export function writeSummary(out: NodeJS.WritableStream, totals: ReturnType<ProgressBoard['totals']>, model: string, logDir: string, replayed = false): void {
  const { agents, steps, usage, outcomes } = totals;
  const estimate = estimateCost(model, usage);
  const cost =
    estimate === undefined
      ? replayed
        ? ', $0 (replayed)'
        : ''
      : replayed
        ? `, $0 (replayed; recorded at about ${dollars(estimate)})`
        : `, about ${dollars(estimate)}`;
  const children = Object.entries(outcomes)
    .map(([state, n]) => `${n} ${state}`)
    .join(', ');
  const input = usage.inputTokens + usage.cacheReadInputTokens + usage.cacheCreationInputTokens;
  out.write(
    `exarch: ${agents} agent${agents === 1 ? '' : 's'}${children ? ` (sub-agents: ${children})` : ''}, ${steps} model request${steps === 1 ? '' : 's'}, ` +
      `${formatCount(input)} input tokens (${formatCount(usage.cacheReadInputTokens)} cache reads), ${formatCount(usage.outputTokens)} output tokens` +
      `${cost} · logs: ${logDir}\n`,
  );
}

function dollars(cost: number): string {
  return `$${cost.toFixed(cost < 1 ? 3 : 2)}`;
}
