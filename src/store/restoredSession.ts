import type { AgentBudget } from '../engine/budget.js';
import type { LatchCount } from '../engine/nudges.js';
import type { AgentIdentity, AgentResult, AssistantBlock, Message, StopReason, ToolResultBlock, Usage } from '../engine/types.js';

/** The states a resumed session picks up in (a final session is not resumed: its result is delivered). */
export type ResumeState = 'readyForUser' | 'streaming' | 'dispatchingBatch' | 'awaitingApproval' | 'waitingForAgents' | 'nudged';

/**
 * A session as its journal left it, ready to be taken up again (the `restore` input of the session
 * machine). Replayed from the journal by `restoreRun`; see machines/resume.ts for how each part
 * re-enters the machine.
 */
export interface RestoredSession {
  readonly agent: AgentIdentity;
  /** Where it stopped: `streaming` re-asks the model (a stream in flight was never committed). */
  readonly state: ResumeState;
  readonly messages: readonly Message[];
  readonly pendingUser: readonly string[];
  /** Results delivered but not yet seen by the session. */
  readonly inbox: readonly AgentResult[];
  /** Model responses committed in the current turn (a re-asked request counts as it starts). */
  readonly steps: number;
  readonly latchCounts: Readonly<Record<string, LatchCount>>;
  /** Model requests it made that reached the provider (retried, failed and aborted ones included). */
  readonly requests: number;
  /** Its own tokens, those of requests it did not keep included. */
  readonly usage: Usage;
  readonly childUsage: Usage;
  /** Children ever spawned, and spawns per name (reused names get fresh ids). */
  readonly spawned: number;
  readonly uses: readonly (readonly [string, number])[];
  /** Children still running: each is resumed too. */
  readonly children: readonly RestoredChild[];
  /** Children that finished but whose result never reached this session's inbox: delivered on resume, once. */
  readonly undelivered: readonly { readonly actorId: string; readonly result: AgentResult }[];
  /** The open batch of `dispatchingBatch`: the response that opened it and the calls answered so far. */
  readonly batch: RestoredBatch | null;
  /** Restored alone, as one session of a spread run (`restoreAlone`). */
  readonly alone?: true;
  /** The root only: tools a person approved for the rest of the run (`always`), anywhere in the tree. */
  readonly approvedTools?: readonly string[];
}

export interface RestoredChild {
  readonly actorId: string;
  readonly agent: AgentIdentity;
  readonly task: string;
  /** The declared agent type it was started as, if any: it is resumed with that profile. */
  readonly profile?: string;
  /** The budget its parent gave it, if any: it is resumed bounded by it (what it spent counts). */
  readonly budget?: AgentBudget;
  /** Undefined when the child had not recorded anything yet: it starts afresh on its task. */
  readonly restore: RestoredSession | undefined;
}

export interface RestoredBatch {
  readonly content: readonly AssistantBlock[];
  readonly stopReason: StopReason;
  readonly incomplete: readonly string[];
  readonly results: readonly ToolResultBlock[];
  /** In `awaitingApproval`: the calls still waiting for a person, and those approved (they run on resume). */
  readonly awaiting?: readonly string[];
  readonly approved?: readonly string[];
}
