import { defineConfig } from 'vitest/config';
import base from './vitest.config.js';

/**
 * The tests Stryker runs against each mutant (`npm run mutate`): the ones that drive the
 * library in-process. The CLI, browser, crash and package tests run the compiled dist/, which a
 * mutant of src/ never reaches, so they would only cost time.
 */
const SUITE = [
  'test/contract.oracles.test.ts',
  'test/clip.property.test.ts',
  'test/session.transitions.test.ts',
  'test/reply.test.ts',
  'test/nudges.test.ts',
  'test/pairing.test.ts',
  'test/render.test.ts',
  'test/stopReasons.test.ts',
  'test/subagents.test.ts',
  'test/waitForAgents.test.ts',
  // Session logs, and what is on disk whenever a session rests (the states' flushLog entries).
  'test/logs.test.ts',
  'test/tools.test.ts',
  'test/workspaceTools.test.ts',
  'test/regressions.test.ts',
  'test/deadlines.test.ts',
  'test/anthropicProvider.test.ts',
  'test/readOnlyTools.test.ts',
  'test/modelBased.test.ts',
  // run_shell in-process: the CLI tests that also drive it run dist/.
  'test/shellEnvironment.test.ts',
  'test/seccompProgram.test.ts',
  'test/shellSandboxSetup.test.ts',
  'test/shellSandboxed.test.ts',
  'test/shellCommandResult.test.ts',
  'test/shellCommandLifetime.test.ts',
  // The workspace file tools, the MCP client against real stdio servers (the quick files; mcp.test's
  // handshake timeout costs 12 s a run), and the session's turn edges.
  'test/workspaceGlob.test.ts',
  'test/workspaceConfinement.test.ts',
  'test/workspaceListDir.test.ts',
  'test/workspaceSearchFiles.test.ts',
  'test/workspaceReadFile.test.ts',
  'test/workspaceWriteFile.test.ts',
  // Targets swapped between write_file's checks, at a chosen moment (its fs calls wrapped).
  'test/workspaceWriteRaces.test.ts',
  'test/workspaceFsErrors.test.ts',
  // The walk to a path (openInside.ts) against a directory or link swapped between two of its steps.
  'test/workspaceOpenRaces.test.ts',
  // As `nobody` in a child process (test/support/asUser.ts), for the refusals root never meets.
  'test/workspaceUnprivileged.test.ts',
  'test/workspaceToolSet.test.ts',
  'test/workspaceToolSpecs.test.ts',
  'test/mcp.toolOffer.test.ts',
  'test/mcp.callResults.test.ts',
  'test/mcp.specs.test.ts',
  'test/mcp.serverTrouble.test.ts',
  'test/mcp.option.test.ts',
  'test/mcp.calls.test.ts',
  'test/mcp.http.test.ts',
  'test/mcp.cappedFetch.test.ts',
  'test/sessionTurnEdges.test.ts',
  // What a batch hands a sub-agent started elsewhere, the spawn record, the answers a crash keeps.
  'test/sessionBatchOpen.test.ts',
  // A turn's edges: results joining a turn's first request, a profile's model, tool time limits.
  'test/sessionTurnInput.test.ts',
  // Resuming from a journal whose last burst was written only in part.
  'test/sessionResumeEdges.test.ts',
  // A durable turn's first request: late results join it, a resumed one is asked from the committed history.
  'test/durableWake.test.ts',
  // Durable runs, budgets, approvals and declared agents in-process: they reach the session
  // machine's journal notes, resume paths and budget handlers that the tests above do not.
  'test/runJournal.test.ts',
  'test/journalTrace.test.ts',
  'test/restoreAlone.test.ts',
  'test/durable.regressions.test.ts',
  'test/durableTurns.test.ts',
  'test/agentBudget.test.ts',
  'test/budget.test.ts',
  'test/approvals.test.ts',
  'test/declaredAgents.test.ts',
  'test/errors.test.ts',
  // Host steering: a message to a sub-agent, a cancel by path (and what a cancel leaves of a queued message).
  'test/steering.test.ts',
];

/**
 * `MUTATE_TESTS` (comma-separated test files) narrows the run to the tests that exercise one area,
 * e.g. `MUTATE_TESTS=test/render.test.ts,test/clip.property.test.ts npx stryker run --mutate src/engine/render.ts`:
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
    // A session a mutant stalls fails its test in 5 s with the states it passed (test/helpers.ts),
    // so Stryker counts it killed, with a reason, not timed out.
    env: { EXARCH_TEST_SESSION_WAIT_MS: '5000' },
    include: narrowed && narrowed.length > 0 ? narrowed : SUITE,
  },
});
