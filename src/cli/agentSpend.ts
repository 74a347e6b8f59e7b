import { tokensOf, type AgentSpend } from '../engine/budget.js';
import { estimateCost } from '../engine/pricing.js';

/** Widest agent path before the column stops growing (longer ones push their own line only). */
const PATH_WIDTH = 40;

/**
 * The summary's spend per agent: one line each, in tree order, with every token the agent's
 * requests reported (aborted and retried ones included) and, where the model's prices are known,
 * the estimated cost at list prices. `model` is the run's, for agents whose profile names none.
 * A replay (`replayed`) spent nothing: its tokens are the recording's, and no cost is shown (the
 * summary line says $0).
 */
export function agentSpendLines(spends: readonly AgentSpend[], model: string, replayed = false): string[] {
  if (spends.length === 0) return [];
  const sorted = [...spends].sort((a, b) => (a.agent.id < b.agent.id ? -1 : a.agent.id > b.agent.id ? 1 : 0));
  const width = Math.min(PATH_WIDTH, Math.max(...sorted.map((s) => s.agent.id.length)));
  const tokenWidth = Math.max(...sorted.map((s) => String(tokensOf(s.usage)).length));
  const lines = ['exarch: spend per agent:'];
  for (const { agent, model: own, usage } of sorted) {
    const cost = replayed ? undefined : estimateCost(own ?? model, usage);
    const tokens = `${String(tokensOf(usage)).padStart(tokenWidth)} tokens`;
    lines.push(`  ${agent.id.padEnd(width)}  ${tokens}${cost === undefined ? '' : `  about $${cost.toFixed(4)}`}`);
  }
  return lines;
}
