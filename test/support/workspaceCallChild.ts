/**
 * Run by `callAsUser` in a child process under another uid: calls one workspace tool on `root` and
 * prints its outcome as JSON (argv: root, tool name, input as JSON).
 */
import { WorkspaceError, workspaceTools } from '../../src/tools/workspace/index.js';
import { callTool } from './workspaceFixture.js';

interface StrykerNamespace {
  mutantCoverage?: { static?: Record<string, number> };
}

async function main(): Promise<void> {
  const [root, name, input] = process.argv.slice(2);
  if (root === undefined || name === undefined || input === undefined) throw new Error('usage: root name input-json');
  const outcome = await callTool(workspaceTools({ root, allowWrite: true }), name, JSON.parse(input)).then(
    (text) => ({ text }),
    (error: unknown) => ({ error: error instanceof Error ? error.message : String(error), kind: error instanceof WorkspaceError ? error.kind : undefined }),
  );
  // What this process ran of the source, for a mutation-testing run (undefined otherwise): see callAsUser.
  const coverage = (globalThis as { __stryker__?: StrykerNamespace }).__stryker__?.mutantCoverage?.static;
  process.stdout.write(JSON.stringify({ outcome, coverage }));
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
