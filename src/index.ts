/** exarch: agent sessions as explicit XState v5 machines. */
export { sessionMachine, type SessionMachine } from '../machines/session.js';
export { validateSessionInput } from '../machines/sessionStart.js';
export type { SessionContext, SessionEvent, SessionFixed, SessionInput } from '../machines/sessionTypes.js';
export { ROOT_AGENT, childIdentity, hostedSubAgent } from './engine/identity.js';
export { ChildRegistry, type LiveChild } from '../machines/childRegistry.js';
export { createRunObserver, events, observe, RunObserver } from './watch/observe/runObserver.js';
export type * from './watch/observe/events.js';
export { createSessionActor, isSettled, runAgent, waitForSettled, type RunResult, type SessionActor, type SessionSnapshot } from './run/runtime.js';
export { defineTool, type Tool, type ToolContext, type ToolDefinition } from './tools/defineTool.js';
export { toolAxes, type ToolAxes } from './tools/toolbox.js';
export { ToolErrorResult } from './tools/toolErrorResult.js';
// The MCP SDK itself is loaded only when a server is connected.
export {
  connectMcpServers,
  McpServerError,
  McpSpecError,
  parseMcpFlag,
  type McpConnectOptions,
  type McpHttpServer,
  type McpServerInfo,
  type McpServerSpec,
  type McpStdioServer,
  type McpToolset,
} from './tools/mcp/index.js';
export type { McpOption } from './tools/mcp/mcpOption.js';
export { renderValue, clip, elisionMarker } from './engine/render.js';
export { renderAgentResult, renderInbox } from './engine/inbox.js';
export { assertToolPairing, findPairingProblems, PairingError } from './engine/pairing.js';
export { replyReminder, truncationReminder, REPLY_REMINDER_ID, TRUNCATION_REMINDER_ID, type NudgeLatch, type NudgeView } from './engine/nudges.js';
export { ExarchError } from './engine/exarchError.js';
export { FileError, type FileErrorKind } from './engine/fs/fileError.js';
export { ProviderError, StallError, describeError, type ProviderErrorKind } from './engine/model/errors.js';
export type { RetryPolicy } from './engine/model/streamModel.js';
export { DEFAULTS, type SessionOptions } from './session/options.js';
export type { AgentProfile, AgentProfiles } from './session/agentProfiles.js';
export { cancelAgent, findAgent, messageAgent, runningAgents } from './engine/steering.js';
export { BudgetScope, type AgentBudget, type AgentSpend, type BudgetCrossing, type TreeBudget } from './engine/budget.js';
export { BudgetMeter } from './engine/budgetMeter.js';
export {
  ApprovalDesk,
  denialMessage,
  respond,
  type ApprovalAnswer,
  type ApprovalCall,
  type ApprovalDecision,
  type ApprovalPolicy,
  type ApprovalRequest,
  type ApprovalRoot,
} from './engine/approvals.js';
export { JsonlLogSink, MemoryLogSink, nullLogSink, type JsonlLogSinkOptions, type LogRecord, type LogSink, type SessionLog } from './engine/log/sessionLog.js';
export { Redactor, REDACTED, MIN_SECRET_CHARS, secretsIn } from './engine/redact.js';
export { finalAssistantText } from './engine/history.js';
export { addUsage, ZERO_USAGE } from './engine/usage.js';
export * from './engine/types.js';
// The workspace tools are their own entry point (`exarch/workspace`); their errors and limits stay
// here, light modules a host may match against without loading the tools.
export { WorkspaceError, type WorkspaceErrorKind } from './tools/workspace/paths.js';
export { ShellSandboxError } from './tools/workspace/shellSandboxError.js';
export { DEFAULT_SHELL_LIMITS, type ShellLimit, type ShellLimits } from './tools/workspace/shellLimits.js';
export type { WorkspaceToolsOptions } from './tools/workspace/index.js';
export { AnthropicProvider, DEFAULT_MODEL, type AnthropicProviderOptions } from './providers/anthropic.js';
export {
  listRuns,
  newRunId,
  resumeRun,
  RunError,
  startRun,
  type DurableRun,
  type DurableRunOptions,
  type DurableRunResult,
  type DurableSessionInput,
  type FinishedRun,
  type RunErrorKind,
} from './run/durableRun.js';
// The SQLite store is its own entry point (`exarch/sqlite`): a host that does not ask for
// durability does not load a native module.
export { MemoryRunStore } from './store/memoryStore.js';
export { StoreError, type StoreErrorKind } from './store/storeError.js';
export { RunJournal, type SessionJournal } from './store/runJournal.js';
export { restoreRun, type RestoredRun } from './store/restoreRun.js';
export type { RestoredSession, RestoredChild, RestoredBatch, ResumeState } from './store/restoredSession.js';
export type { JournalRecord } from './engine/log/journalRecord.js';
export type {
  ClaimResult,
  JournalRow,
  NewRun,
  RunListing,
  RunOptionsRecord,
  RunOwner,
  RunRow,
  RunStatus,
  RunStore,
  RunSummary,
  UnreadableRun,
} from './store/runStore.js';
