import { execFile } from 'node:child_process';
import { chown } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

/**
 * Workspace tools driven by a user without root's privileges. The tests run as root, who may open
 * any file and write any directory, so a refusal by permission is only met in a child process that
 * loads the same source through jiti and then becomes `nobody` (uid and gid 65534). It switches
 * after loading, as root, so the source may be anywhere (Stryker's sandbox is root's alone).
 */

export const NOBODY = 65534;

/**
 * A uid that no user database entry names and no other test runs as: the owner of a workspace
 * whose sandboxed commands are counted on the host by their uid (nobody is shared with other tests).
 */
export const UNLISTED_UID = 64_123;

/** Only root can start a process as another user. */
export const canSwitchUser = process.getuid?.() === 0 && process.platform === 'linux';

interface CallOutcome {
  readonly text?: string;
  readonly error?: string;
  readonly kind?: string;
}

const REPO = fileURLToPath(new URL('../..', import.meta.url));
const CHILD = fileURLToPath(new URL('../fixtures/workspaceCallChild.ts', import.meta.url));
const run = promisify(execFile);
/** jiti's transpiled files, kept between children (a child then starts in about half the time), outside the shared node_modules. */
const JITI_CACHE = path.join(tmpdir(), 'exarch-test-jiti');

/**
 * Stryker's mutant switch and coverage record (its default namespace). Under mutation testing the
 * child must run the mutant the test process runs, and what the child ran must count as covered by
 * the current test, or mutants reached only as `nobody` would never be tried.
 */
interface StrykerNamespace {
  activeMutant?: string | number;
  currentTestId?: string;
  mutantCoverage?: { static: Record<string, number>; perTest: Record<string, Record<string, number>> };
}

/** Calls tool `name` with `input` on `root` (write_file offered) as `nobody`, and returns its text or its error. */
export async function callAsNobody(root: string, name: string, input: unknown): Promise<CallOutcome> {
  const stryker = (globalThis as { __stryker__?: StrykerNamespace }).__stryker__;
  const env: NodeJS.ProcessEnv = { ...process.env, JITI_FS_CACHE: JITI_CACHE };
  if (stryker?.activeMutant !== undefined) env['__STRYKER_ACTIVE_MUTANT__'] = String(stryker.activeMutant);
  const { stdout } = await run(process.execPath, ['--import', 'jiti/register', CHILD, String(NOBODY), root, name, JSON.stringify(input)], {
    cwd: REPO,
    env,
  });
  const reply = JSON.parse(stdout) as { outcome: CallOutcome; coverage?: Record<string, number> };
  if (stryker !== undefined && reply.coverage !== undefined) {
    const record = (stryker.mutantCoverage ??= { static: {}, perTest: {} });
    const into = stryker.currentTestId === undefined ? record.static : (record.perTest[stryker.currentTestId] ??= {});
    for (const [id, hits] of Object.entries(reply.coverage)) into[id] = (into[id] ?? 0) + hits;
  }
  return reply.outcome;
}

/** Makes `nobody` the owner of `paths`. */
export async function giveToNobody(...paths: string[]): Promise<void> {
  await giveTo(NOBODY, ...paths);
}

/** Makes `uid` (and the group of the same number) the owner of `paths`. */
export async function giveTo(uid: number, ...paths: string[]): Promise<void> {
  for (const file of paths) await chown(file, uid, uid);
}
