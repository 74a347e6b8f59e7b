import { ExarchError } from '../engine/exarchError.js';

/**
 * Why a run could not be started or resumed: `unknown-run`; `held`: another live process runs it;
 * `wrong-directory`; `tools-differ`: resumed with other tools; `agents-differ`: with other
 * declared agents; `not-waiting`: an approval for a call that does not wait for one; `spread`: a
 * run whose sessions are jobs of their own (`--spread`), which only workers take up;
 * `inconsistent`: a journal whose records, each readable, do not make a run (a session's records
 * without its `session` record), as no exarch writes one.
 */
export type RunErrorKind = 'unknown-run' | 'held' | 'wrong-directory' | 'tools-differ' | 'agents-differ' | 'not-waiting' | 'spread' | 'inconsistent';

/** Why a run could not be started or resumed (besides a store that cannot be read: `StoreError`). */
export class RunError extends ExarchError<RunErrorKind> {
  constructor(
    message: string,
    kind: RunErrorKind,
    readonly runId: string,
  ) {
    super(kind, message);
  }
}
