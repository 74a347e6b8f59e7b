import { existsSync, lstatSync } from 'node:fs';
import { join } from 'node:path';
import { ExarchError } from '../engine/exarchError.js';
import { RunError } from '../store/runError.js';
import { writeViewer } from '../watch/viewer/index.js';
import { writeViewerForRun } from '../watch/trace/fromJournal.js';
import type { WrittenViewer } from '../watch/viewer/write.js';
import { acceptFlags, type Values } from './flags.js';
import { usableTarget } from './runChecks.js';
import { EXIT } from './runIo.js';
import { openExistingStore, storeName, storeTargetOf } from './storeTarget.js';
import { UsageError } from './usageError.js';

/** `trace.jsonl` → `trace.html`, next to it. */
export function htmlFor(trace: string): string {
  return trace.endsWith('.jsonl') ? `${trace.slice(0, -'.jsonl'.length)}.html` : `${trace}.html`;
}

/** What `exarch view` was given names neither a trace file nor a run of the store: one line, exit 1. */
export class ViewTargetError extends ExarchError<'view-target'> {
  constructor(message: string) {
    super('view-target', message);
  }
}

/** The line for a target that is neither: both places it was looked for. */
function notFound(target: string, store: string): string {
  return `${target} is neither a file nor a run id in ${store}`;
}

/** Nothing at `path` (a file that cannot be read for another reason is said by writeViewer, as that). */
function isMissing(path: string): boolean {
  try {
    lstatSync(path);
    return false;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    return code === 'ENOENT' || code === 'ENOTDIR';
  }
}

/** A run id as `exarch run` prints it (a ULID); anything else names a trace file. */
const RUN_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** `exarch view TRACE|RUN_ID`: the turn-flow viewer of a trace file or of a recorded run, as one HTML file. */
export async function view(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length !== 1) throw new UsageError('view takes one trace file or run id: exarch view TRACE|RUN_ID [--out FILE.html]');
  acceptFlags('view', values, ['out', 'store', 'db']);
  const target = positionals[0] ?? '';
  const where = storeTargetOf(values, process.env);
  let written: WrittenViewer;
  if (RUN_ID.test(target) && !existsSync(target)) {
    usableTarget(where);
    const store = await openExistingStore(process.cwd(), where);
    if (!store) throw new ViewTargetError(`${notFound(target, storeName(process.cwd(), where))} (there is no run store there yet)`);
    try {
      written = await writeViewerForRun(store, target, values.out ?? join('.exarch', 'view', `${target}.html`));
    } catch (error) {
      if (error instanceof RunError && error.kind === 'unknown-run') throw new ViewTargetError(notFound(target, store.file));
      throw error;
    } finally {
      await store.close();
    }
  } else {
    if (values.store !== undefined || values.db !== undefined)
      throw new UsageError(`--${values.store === undefined ? 'db' : 'store'} goes with a run id, not a trace file`);
    // Not a file, and (not shaped as one) not a run id either: both lookups said at once.
    if (isMissing(target)) throw new ViewTargetError(notFound(target, storeName(process.cwd(), where)));
    written = writeViewer(target, values.out ?? htmlFor(target));
  }
  process.stdout.write(`${written.outFile}\n`);
  const [first] = written.leftOut;
  if (first) {
    const count = written.leftOut.length;
    process.stderr.write(
      `exarch: ${target}: left out ${count === 1 ? 'a line that is not a trace record' : `${count} lines that are not trace records`} (line ${first.line}: ${first.problem})\n`,
    );
  }
  process.stderr.write(`exarch: wrote the turn-flow viewer for ${written.agents} agent${written.agents === 1 ? '' : 's'} (${written.records} trace records)\n`);
  return EXIT.ok;
}
