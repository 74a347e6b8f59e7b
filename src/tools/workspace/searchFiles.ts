import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { defineTool, type Tool } from '../defineTool.js';
import { compileGlob, type Glob } from './glob.js';
import { errorCode, fsError, joinDisplay, quote, resolveInside, WorkspaceError } from './paths.js';
import { SKIPPED_DIRS, walk } from './walk.js';

/** Matching lines one call reports at most. */
export const SEARCH_MAX_MATCHES = 200;
/** Characters of a matching line shown. */
export const SEARCH_MAX_LINE_CHARS = 300;
/** Files larger than this are not searched. */
export const SEARCH_MAX_FILE_BYTES = 5 * 1024 * 1024;

const input = z.object({
  pattern: z.string().min(1).describe('A JavaScript regular expression, matched against each line.'),
  path: z.string().optional().describe("File or directory to search, relative to the working directory. Default '.'."),
  glob: z.string().min(1).optional().describe("Only files whose name matches, e.g. '*.ts' or '*.{ts,tsx}'; with a '/', matched against the path, e.g. 'src/**/*.ts'."),
  ignoreCase: z.boolean().optional().describe('Match case-insensitively. Default false.'),
});

export function searchFilesTool(root: string): Tool {
  return defineTool({
    name: 'search_files',
    // Reads only: running it again after a crash is safe.
    idempotent: true,
    // It only reads: in a durable run it may start before its response is journaled.
    readOnly: true,
    description:
      'Search file contents in the working directory with a regular expression (like grep -rn). Returns matching lines as ' +
      `"path:line: text", at most ${SEARCH_MAX_MATCHES} matches per call, long lines shortened. Skips binary files, files over ` +
      `${SEARCH_MAX_FILE_BYTES / 1024 / 1024} MB, ${[...SKIPPED_DIRS].join(' and ')}; symlinks are not followed.`,
    input,
    run: ({ pattern, path: shown, glob, ignoreCase }, { signal }) =>
      searchFiles(root, { pattern, shown: shown ?? '.', glob: glob === undefined ? undefined : compileGlob(glob), globText: glob, ignoreCase: ignoreCase === true }, signal),
  });
}

interface Search {
  readonly pattern: string;
  readonly shown: string;
  readonly glob: Glob | undefined;
  readonly globText: string | undefined;
  readonly ignoreCase: boolean;
}

interface Candidate {
  readonly abs: string;
  /** As shown to the model. */
  readonly display: string;
  /** Relative to the searched directory, for the glob. */
  readonly rel: string;
}

async function searchFiles(root: string, search: Search, signal: AbortSignal): Promise<string> {
  signal.throwIfAborted();
  const regex = compileRegex(search.pattern, search.ignoreCase);
  const target = await resolveInside(root, search.shown);
  const stats = await stat(target.real).catch((error: unknown) => {
    throw fsError(error, search.shown);
  });

  const results: string[] = [];
  const skippedDirs = new Set<string>();
  let tooLarge = 0;
  let binary = 0;
  let cut = false;

  const searchOne = async (file: Candidate): Promise<void> => {
    if (search.glob !== undefined && !search.glob.matches(file.rel)) return;
    let content: Buffer;
    try {
      const info = await stat(file.abs);
      if (!info.isFile()) return;
      if (info.size > SEARCH_MAX_FILE_BYTES) {
        tooLarge += 1;
        return;
      }
      content = await readFile(file.abs, { signal });
    } catch (error) {
      // A file that vanished or cannot be read is passed over, like grep -s.
      if (errorCode(error) !== undefined) return;
      throw error;
    }
    if (content.includes(0)) {
      binary += 1;
      return;
    }
    const lines = content.toString('utf8').split('\n');
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i] ?? '';
      const match = regex.exec(line);
      if (match === null) continue;
      if (results.length === SEARCH_MAX_MATCHES) {
        cut = true;
        return;
      }
      results.push(`${file.display}:${i + 1}: ${excerpt(line.replace(/\r$/, ''), match.index)}`);
    }
  };

  if (stats.isFile()) {
    await searchOne({ abs: target.real, display: target.display, rel: path.basename(target.real) });
  } else if (stats.isDirectory()) {
    try {
      for await (const entry of walk(target.real, { maxDepth: Number.POSITIVE_INFINITY, signal })) {
        if (entry.notDescended === 'skipped') skippedDirs.add(entry.rel.slice(entry.rel.lastIndexOf('/') + 1));
        if (entry.kind !== 'file') continue;
        await searchOne({ abs: entry.abs, display: joinDisplay(target.display, entry.rel), rel: entry.rel });
        if (cut) break;
      }
    } catch (error) {
      throw fsError(error, search.shown);
    }
  } else {
    throw new WorkspaceError(`${quote(search.shown)} is not a regular file or directory`);
  }

  const notes: string[] = [];
  if (cut) notes.push(`[stopped at ${SEARCH_MAX_MATCHES} matches: narrow the pattern, path or glob to see the rest]`);
  const passedOver = [
    binary > 0 ? `${binary} binary file${binary === 1 ? '' : 's'}` : '',
    tooLarge > 0 ? `${tooLarge} file${tooLarge === 1 ? '' : 's'} over ${SEARCH_MAX_FILE_BYTES / 1024 / 1024} MB` : '',
    skippedDirs.size > 0 ? `${[...skippedDirs].sort().map((d) => `${d}/`).join(', ')} directories` : '',
  ].filter((part) => part !== '');
  if (passedOver.length > 0) notes.push(`[not searched: ${passedOver.join('; ')}]`);
  if (results.length === 0) {
    const where = `${quote(target.display)}${search.globText === undefined ? '' : ` (files matching ${quote(search.globText)})`}`;
    return [`no matches for /${search.pattern}/ in ${where}`, ...notes].join('\n');
  }
  return [...results, ...notes].join('\n');
}

function compileRegex(pattern: string, ignoreCase: boolean): RegExp {
  try {
    return new RegExp(pattern, ignoreCase ? 'i' : '');
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    // V8 says "Invalid regular expression: /(/: Unterminated group"; keep the reason.
    const reason = message.slice(message.lastIndexOf(': ') + 2) || message;
    throw new WorkspaceError(`invalid regular expression ${quote(pattern)}: ${reason}`);
  }
}

/** The line, or a window of it around the match when it is long. */
function excerpt(line: string, at: number): string {
  if (line.length <= SEARCH_MAX_LINE_CHARS) return line;
  const start = Math.max(0, Math.min(at - 100, line.length - SEARCH_MAX_LINE_CHARS));
  const end = start + SEARCH_MAX_LINE_CHARS;
  return `${start > 0 ? '…' : ''}${line.slice(start, end)}${end < line.length ? '…' : ''}`;
}
