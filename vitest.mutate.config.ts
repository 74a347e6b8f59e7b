import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * The tests Stryker runs against each mutant (`npm run mutate`): the ones that drive the
 * library in-process. The CLI, browser, crash and package tests run the compiled dist/, which a
 * mutant of src/ never reaches, so they would only cost time.
 */
const SUITE = [
  'test/unit/session/contract.oracles.test.ts',
  'test/property/clip.property.test.ts',
  'test/unit/session/session.transitions.test.ts',
  'test/unit/session/reply.test.ts',
  'test/unit/engine/nudges.test.ts',
  'test/unit/engine/pairing.test.ts',
  'test/unit/engine/render.test.ts',
  'test/unit/session/stopReasons.test.ts',
  'test/unit/session/subagents.test.ts',
  'test/unit/session/waitForAgents.test.ts',
  // Session logs, and what is on disk whenever a session rests (the states' flushLog entries).
  'test/unit/engine/logs.test.ts',
  'test/unit/tools/tools.test.ts',
  'test/e2e/sandbox/workspaceTools.test.ts',
  'test/unit/session/regressions.test.ts',
  'test/unit/engine/deadlines.test.ts',
  'test/unit/providers/anthropicProvider.test.ts',
  'test/unit/tools/readOnlyTools.test.ts',
  'test/property/modelBased.test.ts',
  // run_shell in-process: the CLI tests that also drive it run dist/.
  'test/unit/tools/shell/shellEnvironment.test.ts',
  'test/unit/tools/shell/seccompProgram.test.ts',
  'test/e2e/sandbox/shellSandboxSetup.test.ts',
  'test/e2e/sandbox/shellSandboxed.test.ts',
  'test/unit/tools/shell/shellCommandResult.test.ts',
  'test/unit/tools/shell/shellCommandLifetime.test.ts',
  // The workspace file tools, the MCP client against real stdio servers (the quick files; mcp.test's
  // handshake timeout costs 12 s a run), and the session's turn edges.
  'test/unit/tools/workspace/workspaceGlob.test.ts',
  'test/unit/tools/workspace/workspaceConfinement.test.ts',
  'test/unit/tools/workspace/workspaceListDir.test.ts',
  'test/unit/tools/workspace/workspaceSearchFiles.test.ts',
  'test/unit/tools/workspace/workspaceReadFile.test.ts',
  'test/unit/tools/workspace/workspaceWriteFile.test.ts',
  // Targets swapped between write_file's checks, at a chosen moment (its fs calls wrapped).
  'test/unit/tools/workspace/workspaceWriteRaces.test.ts',
  'test/unit/tools/workspace/workspaceFsErrors.test.ts',
  // The walk to a path (openInside.ts) against a directory or link swapped between two of its steps.
  'test/unit/tools/workspace/workspaceOpenRaces.test.ts',
  // As `nobody` in a child process (test/support/asUser.ts), for the refusals root never meets.
  'test/e2e/sandbox/workspaceUnprivileged.test.ts',
  'test/e2e/sandbox/workspaceToolSet.test.ts',
  'test/unit/tools/workspace/workspaceToolSpecs.test.ts',
  'test/unit/tools/mcp/mcp.toolOffer.test.ts',
  'test/unit/tools/mcp/mcp.callResults.test.ts',
  'test/unit/tools/mcp/mcp.specs.test.ts',
  'test/e2e/mcp/mcp.serverTrouble.test.ts',
  'test/e2e/mcp/mcp.option.test.ts',
  'test/e2e/mcp/mcp.calls.test.ts',
  'test/unit/tools/mcp/mcp.http.test.ts',
  'test/unit/tools/mcp/mcp.cappedFetch.test.ts',
  'test/unit/session/sessionTurnEdges.test.ts',
  // What a batch hands a sub-agent started elsewhere, the spawn record, the answers a crash keeps.
  'test/unit/session/sessionBatchOpen.test.ts',
  // A turn's edges: results joining a turn's first request, a profile's model, tool time limits.
  'test/unit/session/sessionTurnInput.test.ts',
  // Resuming from a journal whose last burst was written only in part.
  'test/unit/resume/sessionResumeEdges.test.ts',
  // A durable turn's first request: late results join it, a resumed one is asked from the committed history.
  'test/unit/resume/durableWake.test.ts',
  // Durable runs, budgets, approvals and declared agents in-process: they reach the session
  // machine's journal notes, resume paths and budget handlers that the tests above do not.
  'test/unit/resume/runJournal.test.ts',
  'test/e2e/watch/journalTrace.test.ts',
  'test/unit/resume/restoreAlone.test.ts',
  'test/unit/resume/durable.regressions.test.ts',
  'test/unit/resume/durableTurns.test.ts',
  'test/unit/budget/agentBudget.test.ts',
  'test/unit/budget/budget.test.ts',
  // A cancel that meets a sub-agent as it replies (the crew's guard against cancelling an ended member).
  'test/unit/budget/budgetAdmission.test.ts',
  // A host's own inspect callback that cancels as a sub-agent replies; when an interrupt takes effect.
  'test/unit/session/crewCancel.test.ts',
  'test/unit/resume/interruptTiming.test.ts',
  'test/unit/approvals/approvals.test.ts',
  'test/unit/session/declaredAgents.test.ts',
  'test/unit/engine/errors.test.ts',
  // Host steering: a message to a sub-agent, a cancel by path (and what a cancel leaves of a queued message).
  'test/unit/steering/steering.test.ts',
];

/**
 * `MUTATE_TESTS` (comma-separated test files) narrows the run to the tests that exercise one area,
 * e.g. `MUTATE_TESTS=test/unit/engine/render.test.ts,test/property/clip.property.test.ts npx stryker run --mutate src/engine/render.ts`:
 * every mutant they kill, the whole suite kills too, so a narrowed score is a lower bound, and a
 * run of one area takes minutes instead of one that runs every session test per mutant.
 */
const narrowed = process.env['MUTATE_TESTS']
  ?.split(',')
  .map((file) => file.trim())
  .filter((file) => file.length > 0);

export default defineConfig({
  resolve: base.resolve,
  test: {
    testTimeout: 30_000,
    // A session a mutant stalls fails its test in 5 s with the states it passed (test/support/helpers.ts),
    // so Stryker counts it killed, with a reason, not timed out.
    env: { EXARCH_TEST_SESSION_WAIT_MS: '5000' },
    include: narrowed && narrowed.length > 0 ? narrowed : SUITE,
  },
});
