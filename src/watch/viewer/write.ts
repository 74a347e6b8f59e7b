import { readFileSync, writeFileSync } from 'node:fs';
import { makeDirs } from '../../engine/fs/makeDirs.js';
import { basename, dirname } from 'node:path';
import { describeError } from '../../engine/model/errors.js';
import type { TraceRecord } from '../trace/format.js';
import { readTrace, type LeftOutLine } from '../trace/readTrace.js';
import { renderViewerHtml } from './html.js';

export interface WrittenViewer {
  readonly outFile: string;
  /** Agents in the trace (its `agent.start` records). */
  readonly agents: number;
  readonly records: number;
  /** Lines of the trace that were not trace records, left out of the page (none for a run from a store). */
  readonly leftOut: readonly LeftOutLine[];
}

/**
 * `exarch view TRACE --out FILE.html`: reads a JSONL trace and writes the turn-flow viewer for it.
 * A file that cannot be read or is not a trace throws one line naming it; lines that are not
 * trace records are left out of the page (`leftOut`).
 */
export function writeViewer(traceFile: string, outFile: string): WrittenViewer {
  let text: string;
  try {
    text = readFileSync(traceFile, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new Error(code === 'ENOENT' ? `${traceFile}: no such file` : `${traceFile}: cannot read it: ${describeError(error)}`);
  }
  let records: TraceRecord[];
  let leftOut: readonly LeftOutLine[];
  try {
    ({ records, leftOut } = readTrace(text));
  } catch (error) {
    throw new Error(`${traceFile}: ${describeError(error)}`);
  }
  const html = renderViewerHtml(records, { title: titleOf(records[0], traceFile) });
  makeDirs(dirname(outFile));
  writeFileSync(outFile, html);
  return { outFile, agents: records.filter((record) => record.kind === 'agent.start').length, records: records.length, leftOut };
}

/** The trace's own title, with the file's name when the title is the recorder's default. */
function titleOf(first: TraceRecord | undefined, traceFile: string): string {
  const title = first?.kind === 'trace.start' ? first.title : '';
  return title && title !== 'exarch run' ? title : `${title || 'exarch'} · ${basename(traceFile)}`;
}
