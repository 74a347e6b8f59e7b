/**
 * Run by `callAsNobody` in a child process started as root: becomes `uid` (its own group too, no
 * others), calls one workspace tool on `root` and prints its outcome as JSON (argv: uid, root, tool
 * name, input as JSON).
 */
import { WorkspaceError, workspaceTools } from '../../src/tools/workspace/index.js';
import { callTool } from './workspaceFixture.js';

interface StrykerNamespace {
  mutantCoverage?: { static?: Record<string, number> };
}

async function main(): Promise<void> {
  const [uid, root, name, input] = process.argv.slice(2);
  if (uid === undefined || root === undefined || name === undefined || input === undefined) throw new Error('usage: uid root name input-json');
  // The source is loaded by now (static imports), so only the tool's own file system calls run as this user.
  process.setgroups?.([]);
  process.setgid?.(Number(uid));
  process.setuid?.(Number(uid));
  const outcome = await callTool(workspaceTools({ root, allowWrite: true }), name, JSON.parse(input)).then(
    (text) => ({ text }),
    (error: unknown) => ({ error: error instanceof Error ? error.message : String(error), kind: error instanceof WorkspaceError ? error.kind : undefined }),
  );
  // What this process ran of the source, for a mutation-testing run (undefined otherwise): see callAsNobody.
  const coverage = (globalThis as { __stryker__?: StrykerNamespace }).__stryker__?.mutantCoverage?.static;
  process.stdout.write(JSON.stringify({ outcome, coverage }));
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exitCode = 1;
});
