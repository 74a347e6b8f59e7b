import { constants, type Stats } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { z } from 'zod';
import { defineTool, type Tool } from '../defineTool.js';
import { fileKind } from '../../engine/fs/fileKind.js';
import { at, changed, locate, type Location } from './openInside.js';
import { errorCode, fsError, quote, WorkspaceError } from './paths.js';

/** Lines returned by one call at most. */
const READ_MAX_LINES = 2_000;
/** Characters of one line kept; the rest is cut with a marker. */
const READ_MAX_LINE_CHARS = 2_000;
/** Characters of text returned by one call at most (under the session's tool-output cap, so the continuation note survives). */
const READ_MAX_CHARS = 40_000;

const CHUNK_BYTES = 64 * 1024;
/** Bytes of one line collected before it is cut: enough for READ_MAX_LINE_CHARS characters of any UTF-8. */
const MAX_LINE_BYTES = READ_MAX_LINE_CHARS * 4;
/** O_NONBLOCK: opening a FIFO or a device must not wait for a writer; the descriptor is fstat-ed before any read. */
const READ_FLAGS = constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0) | (constants.O_NONBLOCK ?? 0);

const input = z.object({
  path: z.string().min(1).describe('File path relative to the working directory.'),
  offset: z.number().int().min(1).optional().describe('First line to return (1-based). Default 1.'),
  limit: z.number().int().min(1).optional().describe(`Number of lines to return (at most ${READ_MAX_LINES}).`),
});

export function readFileTool(root: string): Tool {
  return defineTool({
    name: 'read_file',
    // Reads only: running it again after a crash is safe.
    idempotent: true,
    // It only reads: in a durable run it may start before its response is journaled.
    readOnly: true,
    description:
      'Read a text file in the working directory. Returns its text; when only part of the file is returned, a first line ' +
      `"PATH (lines A–B of N)" says which part. At most ${READ_MAX_LINES} lines (and about ${READ_MAX_CHARS / 1000}k characters) per call: ` +
      'use offset/limit to read further. Lines longer than 2,000 characters are cut. Binary files are refused.',
    input,
    run: ({ path, offset, limit }, { signal }) => readText(root, path, offset ?? 1, Math.min(limit ?? READ_MAX_LINES, READ_MAX_LINES), signal),
  });
}

async function readText(root: string, shown: string, start: number, limit: number, signal: AbortSignal): Promise<string> {
  signal.throwIfAborted();
  const location = await locate(root, shown);
  let handle: FileHandle;
  try {
    handle = await openRegular(location, shown);
  } finally {
    await location.release();
  }
  try {
    const scan = await scanLines(handle, start, limit, signal, shown);
    const name = location.display;
    if (scan.total === 0) return `(${name} is empty)`;
    if (start > scan.total) {
      throw new WorkspaceError(
        'invalid-input',
        `offset ${start} is past the end of ${quote(name)}, which has ${scan.total} line${scan.total === 1 ? '' : 's'}`,
      );
    }
    const partial = start > 1 || scan.last < scan.total || scan.cutLines;
    if (!partial) return scan.lines.join('\n') + (scan.endsWithNewline ? '\n' : '');
    const header = `${name} (lines ${start}–${scan.last} of ${scan.total}${scan.cutLines ? '; long lines cut' : ''})`;
    const remaining = scan.total - scan.last;
    const footer = remaining > 0 ? `\n[… ${remaining} more line${remaining === 1 ? '' : 's'}: call read_file with offset=${scan.last + 1} to read on]` : '';
    return `${header}\n${scan.lines.join('\n')}${footer}`;
  } finally {
    await handle.close();
  }
}

/**
 * Opens the file by descriptor (see openInside.ts) and checks the descriptor, not the name: what
 * is read is what was checked. A file with several hard links is read like any other: the name
 * the model gave is an entry of the working directory, and the process reads nothing through it
 * that its own permissions would not let it read anyway.
 */
async function openRegular(location: Location, shown: string): Promise<FileHandle> {
  const found = location.found;
  switch (found.kind) {
    case 'dir':
      throw isDirectory(shown);
    case 'missing':
      throw new WorkspaceError('not-found', `no such file: ${shown}`);
    case 'blocked':
      throw new WorkspaceError('not-found', `no such file: ${shown} (a part of the path is a file, not a directory)`);
    case 'entry':
      break;
  }
  // Refused by lstat before any open, so a device is never opened; the fstat below is what decides.
  if (!found.stats.isFile()) throw notRegular(shown, found.stats);
  const handle = await open(at(found.dir, found.name), READ_FLAGS).catch((error: unknown) => {
    throw errorCode(error) === 'ELOOP' ? changed(shown) : fsError(error, shown);
  });
  try {
    const stats = await handle.stat();
    if (stats.isDirectory()) throw isDirectory(shown);
    if (!stats.isFile()) throw notRegular(shown, stats);
    return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
}

function isDirectory(shown: string): WorkspaceError {
  return new WorkspaceError('wrong-type', `${quote(shown)} is a directory; use list_dir to see what it contains`);
}

/** A FIFO or device would block or never end; a socket cannot be opened at all. */
function notRegular(shown: string, stats: Stats): WorkspaceError {
  return new WorkspaceError('wrong-type', `${quote(shown)} is not a regular file (it is ${fileKind(stats)}); read_file only reads regular files`);
}

interface Scan {
  /** The selected lines, without their line breaks. */
  readonly lines: string[];
  /** The last line number returned (start − 1 when none was). */
  readonly last: number;
  readonly total: number;
  readonly cutLines: boolean;
  readonly endsWithNewline: boolean;
}

/**
 * Streams the whole file once: counts its lines, refuses it if it holds a NUL byte, and keeps the
 * lines from `start` on, within the line, per-line and character budgets.
 */
async function scanLines(handle: FileHandle, start: number, limit: number, signal: AbortSignal, shown: string): Promise<Scan> {
  const buffer = Buffer.allocUnsafe(CHUNK_BYTES);
  const lines: string[] = [];
  let chars = 0;
  let full = false;
  let cutLines = false;
  let lineNo = 1;
  let pieces: Buffer[] = [];
  let kept = 0;
  let lineBytes = 0;
  let position = 0;
  let lastByte = -1;

  const wanted = (): boolean => !full && lineNo >= start && lineNo < start + limit;
  const finishLine = (): void => {
    if (wanted()) {
      let text = Buffer.concat(pieces, kept).toString('utf8');
      if (lineBytes > kept || text.length > READ_MAX_LINE_CHARS) {
        let cut = READ_MAX_LINE_CHARS;
        const code = text.charCodeAt(cut - 1);
        if (code >= 0xd800 && code <= 0xdbff) cut -= 1;
        text = `${text.slice(0, cut)} [… line cut: ${lineBytes} bytes in all]`;
        cutLines = true;
      }
      if (lines.length > 0 && chars + text.length + 1 > READ_MAX_CHARS) full = true;
      else {
        lines.push(text);
        chars += text.length + 1;
      }
    }
    pieces = [];
    kept = 0;
    lineBytes = 0;
  };

  for (;;) {
    signal.throwIfAborted();
    const { bytesRead } = await handle.read(buffer, 0, CHUNK_BYTES, position);
    if (bytesRead === 0) break;
    position += bytesRead;
    const chunk = buffer.subarray(0, bytesRead);
    if (chunk.includes(0))
      throw new WorkspaceError('wrong-type', `${quote(shown)} looks like a binary file (it contains NUL bytes); read_file only reads text`);
    lastByte = chunk[bytesRead - 1] ?? -1;
    let from = 0;
    while (from < chunk.length) {
      const newline = chunk.indexOf(10, from);
      const end = newline === -1 ? chunk.length : newline;
      if (wanted() && kept < MAX_LINE_BYTES) {
        const piece = Buffer.from(chunk.subarray(from, Math.min(end, from + MAX_LINE_BYTES - kept)));
        pieces.push(piece);
        kept += piece.length;
      }
      lineBytes += end - from;
      if (newline === -1) break;
      finishLine();
      lineNo += 1;
      from = newline + 1;
    }
  }
  const endsWithNewline = lastByte === 10;
  let total = lineNo - 1;
  if (lineBytes > 0) {
    finishLine();
    total = lineNo;
  }
  return { lines, last: start - 1 + lines.length, total, cutLines, endsWithNewline };
}
