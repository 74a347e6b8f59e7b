import type { LogRecord } from './sessionLog.js';
import type { ApprovalDecision } from '../approvals.js';
import type { ToolResultBlock } from '../types.js';

/**
 * What a durable run's journal holds: every record of every session's log, plus what only a
 * resume needs. Records are appended as the sessions make them and never rewritten; a resume
 * replays them (see `restoreRun`).
 */
export type JournalRecord =
  | LogRecord
  /** One call of the open batch was answered (before the batch is committed as one message). */
  | { readonly type: 'tool'; readonly result: ToolResultBlock }
  /** The session waits for its sub-agents (`wait_for_agents`), its batch open: a resume waits on. */
  | { readonly type: 'waiting' }
  /** The session waits for a person to answer these calls of its open batch (`awaitingApproval`). */
  | { readonly type: 'awaiting'; readonly calls: readonly string[] }
  /** A person answered one waiting call (live, or recorded by `exarch approve|deny` for the next resume). */
  | { readonly type: 'approval'; readonly callId: string; readonly tool: string; readonly decision: ApprovalDecision; readonly reason?: string }
  /** Every waiting call was answered and the batch runs: an approved call without a result ran, or may have. */
  | { readonly type: 'dispatching' }
  /** A user message queued for the session's next turn. */
  | { readonly type: 'queued'; readonly text: string }
  /** Run-level (session ''): the process was interrupted (Ctrl-C); the cancellations that follow are undone by a resume. */
  | { readonly type: 'interrupt' }
  /** Run-level (session ''): a process took the run up again. */
  | { readonly type: 'resume' };
