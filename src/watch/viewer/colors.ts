import type { AgentOutcome } from '../../engine/types.js';

/**
 * The viewer's colours, by meaning: starting is light blue, waiting is grey (waiting for sub-agents a darker grey, for room in a budget a slate grey, for a person's approval orange), working blue, a tool batch amber, a nudge
 * purple, done green, and the bad endings red. The page, its legend and the statechart all read
 * them from here.
 */
export const STATE_COLORS: Readonly<Record<string, string>> = {
  starting: '#93c5fd',
  readyForUser: '#cbd5e1',
  streaming: '#3b82f6',
  queued: '#64748b',
  dispatchingBatch: '#f59e0b',
  waitingForAgents: '#94a3b8',
  awaitingApproval: '#ea580c',
  nudged: '#a855f7',
  replied: '#16a34a',
  finishedWithoutReply: '#84cc16',
  capped: '#f43f5e',
  failed: '#dc2626',
  cancelled: '#9f1239',
};

/** A state the viewer does not know (a newer machine than this viewer). */
export const UNKNOWN_STATE_COLOR = '#9ca3af';

/** What each state means, in a few words, for the legend and tooltips. */
export const STATE_MEANINGS: Readonly<Record<string, string>> = {
  starting: 'starting: its task is its first turn, at the next tick',
  readyForUser: 'waiting: turn over, for the user or its inbox',
  streaming: 'working: a model request in flight',
  queued: 'waiting for room in its budget to make its request',
  dispatchingBatch: 'tool batch running',
  waitingForAgents: 'waiting for its sub-agents (wait_for_agents), no request',
  awaitingApproval: 'waiting for a person to approve a tool call',
  nudged: 'reminded, streams again',
  replied: 'done: replied to its parent',
  finishedWithoutReply: 'done without a reply (empty)',
  capped: 'hit the step cap',
  failed: 'failed',
  cancelled: 'cancelled',
};

export const OUTCOME_COLORS: Readonly<Record<AgentOutcome, string>> = {
  replied: '#16a34a',
  empty: '#65a30d',
  capped: '#f43f5e',
  failed: '#dc2626',
  cancelled: '#9f1239',
};

export function stateColor(state: string): string {
  return STATE_COLORS[state] ?? UNKNOWN_STATE_COLOR;
}
