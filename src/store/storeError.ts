import { ExarchError } from '../engine/exarchError.js';

/**
 * Why a run store refused: what a host or the CLI reports to the user, and what it branches on.
 *
 * - `not-exarch`: the file is not SQLite, or is another application's database.
 * - `corrupt`: an exarch database that SQLite cannot read back intact.
 * - `newer-schema`: written by a newer exarch; this one will not guess at it.
 * - `unreadable`: the path is a directory, or cannot be opened or created.
 * - `unknown-run`: no run with that id.
 * - `conflict`: the id (or the journal row) is taken.
 * - `full`: past what the store can number (runs in one SQLite file, records in one run).
 * - `unwritable`: a write failed for want of room or permission: a full disk (SQLITE_FULL), a
 *   file-size limit, a read-only file or directory. Nothing of that write is in the store (SQLite
 *   rolled it back); once there is room, the same write succeeds.
 * - `damaged`: one run's row or one of its journal records cannot be read back (a column of the
 *   wrong type, options that are not a JSON object, a record that is not JSON or not a journal
 *   record): that run cannot be resumed or viewed; the store's other runs can.
 */
export type StoreErrorKind = 'not-exarch' | 'corrupt' | 'newer-schema' | 'unreadable' | 'unknown-run' | 'conflict' | 'full' | 'unwritable' | 'damaged';

/**
 * A run store's refusal. The message is one line naming the file (the user sees it as is, e.g.
 * `the run store /x/y.db is not an exarch database`); `kind` and `file` are for code.
 */
export class StoreError extends ExarchError<StoreErrorKind> {
  /**
   * @param file the store's file; undefined for a store without one (memory).
   * @param detail what the message adds in its kind's wording: SQLite's complaint for
   *   `corrupt` and `unreadable`, the cause for `unwritable`, `schema 7; this exarch reads 1` for `newer-schema`, the run id
   *   for `unknown-run`, what is taken for `conflict`, the run and what is wrong with it for `damaged`.
   */
  constructor(
    kind: StoreErrorKind,
    readonly file: string | undefined,
    detail?: string,
    options?: { readonly cause?: unknown },
  ) {
    super(kind, oneLine(describe(kind, file === undefined ? '(in memory)' : file, detail)), options);
  }
}

function describe(kind: StoreErrorKind, where: string, detail: string | undefined): string {
  const paren = detail === undefined || detail === '' ? '' : ` (${detail})`;
  switch (kind) {
    case 'not-exarch':
      return `the run store ${where} is not an exarch database${paren}`;
    case 'corrupt':
      return `the run store ${where} is corrupt${paren}`;
    case 'newer-schema':
      return `the run store ${where} was written by a newer exarch${paren}`;
    case 'unreadable':
      return `the run store ${where} cannot be opened${paren}`;
    case 'unknown-run':
      return `the run store ${where} has no run ${detail ?? ''}`.trimEnd();
    case 'conflict':
      return `the run store ${where} already holds ${detail ?? 'that'}`;
    case 'full':
      return `the run store ${where} cannot hold more${paren}`;
    case 'unwritable':
      return `cannot write the run store ${where}${detail === undefined || detail === '' ? '' : `: ${detail}`}`;
    case 'damaged':
      return `the run store ${where} holds a damaged record${paren}`;
  }
}

/** Messages go to terminals and log lines: a newline in a path or in SQLite's text must not split them. */
function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ');
}

/**
 * Refusals that concern one run's rows rather than the store (the run's row gone, a seq taken, a
 * run past what it can number, a record that cannot be written): a write that grouped several
 * runs and failed with one of these is worth writing again run by run, so that one run alone
 * fails. Anything else (a full disk, a server gone for good) every run would meet again.
 */
export function concernsOneRun(error: unknown): boolean {
  return (error instanceof StoreError && ONE_RUN.has(error.kind)) || error instanceof TypeError || error instanceof RangeError;
}

const ONE_RUN: ReadonlySet<StoreErrorKind> = new Set(['conflict', 'unknown-run', 'full', 'damaged']);
