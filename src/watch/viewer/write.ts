import { fileErrorOf } from '../../engine/fs/fileError.js';
import { makeDirs } from '../../engine/fs/makeDirs.js';
import { readRegular, writeRegular } from '../../engine/fs/regularFile.js';
import { basename, dirname } from 'node:path';
import { ExarchError } from '../../engine/exarchError.js';
import { MAX_TRACE_BYTES, type TraceRecord } from '../trace/format.js';
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

/** The trace `exarch view` was given cannot be read, or is not a trace: one line naming it. */
export class ViewerInputError extends ExarchError<'viewer-input'> {
  constructor(message: string, options?: ErrorOptions) {
    super('viewer-input', message, options);
  }
}

/**
 * `exarch view TRACE --out FILE.html`: reads a JSONL trace and writes the turn-flow viewer for it.
 * A file that cannot be read or is not a trace throws one line naming it; so does a page that
 * cannot be written (`FileError`: a full disk leaves no part of it behind). Neither file may be a
 * FIFO or a device (refused without waiting on it), and a trace over MAX_TRACE_BYTES is refused
 * by its size. Lines that are not trace records are left out of the page (`leftOut`).
 */
export function writeViewer(traceFile: string, outFile: string): WrittenViewer {
  let text: string;
  try {
    text = readRegular(traceFile, MAX_TRACE_BYTES, { what: 'the trace' }).toString('utf8');
  } catch (error) {
    const fault = fileErrorOf(error, traceFile, { what: 'the trace', writing: false });
    throw new ViewerInputError(fault.kind === 'missing' ? `${traceFile}: no such file` : fault.message, { cause: error });
  }
  let records: TraceRecord[];
  let leftOut: readonly LeftOutLine[];
  try {
    ({ records, leftOut } = readTrace(text));
  } catch (error) {
    // Only what readTrace says of the file is the file's fault; anything else is a bug, said as one (see failureLine).
    if (!(error instanceof ExarchError)) throw error;
    throw new ViewerInputError(`${traceFile}: ${error.message}`, { cause: error });
  }
  const html = renderViewerHtml(records, { title: titleOf(records[0], traceFile) });
  writeViewerPage(outFile, html);
  return { outFile, agents: records.filter((record) => record.kind === 'agent.start').length, records: records.length, leftOut };
}

/** The trace's own title, with the file's name when the title is the recorder's default. */
function titleOf(first: TraceRecord | undefined, traceFile: string): string {
  const title = first?.kind === 'trace.start' ? first.title : '';
  return title && title !== 'exarch run' ? title : `${title || 'exarch'} · ${basename(traceFile)}`;
}

/** Writes a viewer page: its directory made, the file a regular one, all of the page or none of it (`FileError` otherwise). */
export function writeViewerPage(outFile: string, html: string): void {
  try {
    makeDirs(dirname(outFile));
  } catch (error) {
    throw fileErrorOf(error, outFile, VIEWER_PAGE);
  }
  writeRegular(outFile, html, VIEWER_PAGE);
}

const VIEWER_PAGE = { what: 'the viewer page', writing: true } as const;
