import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { RE2JS } from 're2js';
import { z } from 'zod';
import { defineTool, type Tool } from '../defineTool.js';
import { compileGlob, type Glob } from './glob.js';
import { errorCode, fsError, joinDisplay, quote, resolveInside, WorkspaceError } from './paths.js';
import { SKIPPED_DIRS, WALK_MAX_DEPTH, walk } from './walk.js';

/** Matching lines one call reports at most. */
const SEARCH_MAX_MATCHES = 200;
/** Characters of a matching line shown. */
const SEARCH_MAX_LINE_CHARS = 300;
/** Files larger than this are not searched. */
const SEARCH_MAX_FILE_BYTES = 5 * 1024 * 1024;
/** Characters of a pattern: far above any real one, and it keeps compiling cheap. */
const SEARCH_MAX_PATTERN_CHARS = 2_000;
/** Longest the search runs without giving the event loop a turn (timeouts, Ctrl-C, other agents). */
const SLICE_MS = 10;

const input = z.object({
  pattern: z
    .string()
    .min(1)
    .describe("A regular expression in RE2 syntax (like JavaScript's, without lookarounds or backreferences), matched against each line."),
  path: z.string().optional().describe("File or directory to search, relative to the working directory. Default '.'."),
  glob: z
    .string()
    .min(1)
    .optional()
    .describe("Only files whose name matches, e.g. '*.ts' or '*.{ts,tsx}'; with a '/', matched against the path, e.g. 'src/**/*.ts'."),
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
      searchFiles(
        root,
        { pattern, shown: shown ?? '.', glob: glob === undefined ? undefined : compileGlob(glob), globText: glob, ignoreCase: ignoreCase === true },
        signal,
      ),
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
  let tooDeep = 0;
  let cut = false;
  let sliceStart = performance.now();
  /** Between lines and files: when this slice has run long enough, lets everything else run, then goes on unless aborted. */
  const breathe = async (): Promise<void> => {
    signal.throwIfAborted();
    if (performance.now() - sliceStart < SLICE_MS) return;
    await nextTurn();
    signal.throwIfAborted();
    sliceStart = performance.now();
  };

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
    // A final newline ends the last line; it does not start an empty one (grep agrees).
    if (lines.at(-1) === '') lines.pop();
    for (let i = 0; i < lines.length; i++) {
      if ((i & 1023) === 1023) await breathe();
      const line = lines[i] ?? '';
      // test() is the cheaper scan; a matcher only for the rare line that matches, to know where.
      if (!regex.test(line)) continue;
      if (results.length === SEARCH_MAX_MATCHES) {
        cut = true;
        return;
      }
      const match = regex.matcher(line);
      const at = match.find() ? match.start() : 0;
      results.push(`${file.display}:${i + 1}: ${excerpt(line.replace(/\r$/, ''), at)}`);
    }
  };

  if (stats.isFile()) {
    await searchOne({ abs: target.real, display: target.display, rel: path.basename(target.real) });
  } else if (stats.isDirectory()) {
    try {
      for await (const entry of walk(target.real, { maxDepth: Number.POSITIVE_INFINITY, signal })) {
        if (entry.notDescended === 'skipped') skippedDirs.add(entry.rel.slice(entry.rel.lastIndexOf('/') + 1));
        if (entry.notDescended === 'too deep') tooDeep += 1;
        if (entry.kind !== 'file') continue;
        await searchOne({ abs: entry.abs, display: joinDisplay(target.display, entry.rel), rel: entry.rel });
        if (cut) break;
        await breathe();
      }
    } catch (error) {
      throw fsError(error, search.shown);
    }
  } else {
    throw new WorkspaceError('wrong-type', `${quote(search.shown)} is not a regular file or directory`);
  }

  const notes: string[] = [];
  if (cut) notes.push(`[stopped at ${SEARCH_MAX_MATCHES} matches: narrow the pattern, path or glob to see the rest]`);
  const passedOver = [
    binary > 0 ? `${binary} binary file${binary === 1 ? '' : 's'}` : '',
    tooLarge > 0 ? `${tooLarge} file${tooLarge === 1 ? '' : 's'} over ${SEARCH_MAX_FILE_BYTES / 1024 / 1024} MB` : '',
    skippedDirs.size > 0
      ? `${[...skippedDirs]
          .sort()
          .map((d) => `${d}/`)
          .join(', ')} directories`
      : '',
    tooDeep > 0 ? `${tooDeep} director${tooDeep === 1 ? 'y' : 'ies'} deeper than ${WALK_MAX_DEPTH} levels (search inside one by its path)` : '',
  ].filter((part) => part !== '');
  if (passedOver.length > 0) notes.push(`[not searched: ${passedOver.join('; ')}]`);
  if (results.length === 0) {
    const where = `${quote(target.display)}${search.globText === undefined ? '' : ` (files matching ${quote(search.globText)})`}`;
    return [`no matches for /${search.pattern}/ in ${where}`, ...notes].join('\n');
  }
  return [...results, ...notes].join('\n');
}

/**
 * The pattern comes from the model: RE2JS matches in time linear in the line's length whatever the
 * pattern, where a backtracking engine (V8's RegExp) can run for ages on `^(\w+\s?)*$` and block
 * the event loop so that neither the tool timeout nor Ctrl-C could act.
 */
function compileRegex(pattern: string, ignoreCase: boolean): RE2JS {
  if (pattern.length > SEARCH_MAX_PATTERN_CHARS) {
    throw new WorkspaceError('invalid-input', `invalid regular expression: longer than ${SEARCH_MAX_PATTERN_CHARS} characters`);
  }
  try {
    return RE2JS.compile(pattern, ignoreCase ? RE2JS.CASE_INSENSITIVE : 0);
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    // RE2JS says "error parsing regexp: missing closing ): `foo(`"; keep the reason.
    const reason = message.replace(/^error parsing regexp: /, '').replace(/: `[\s\S]*`$/, '');
    const hint = /Perl syntax|invalid escape|invalid named capture/.test(reason) ? ' (RE2 syntax: no lookarounds or backreferences)' : '';
    throw new WorkspaceError('invalid-input', `invalid regular expression ${quote(pattern)}: ${reason}${hint}`);
  }
}

/** The line, or a window of it around the match when it is long. */
function excerpt(line: string, at: number): string {
  if (line.length <= SEARCH_MAX_LINE_CHARS) return line;
  const start = Math.max(0, Math.min(at - 100, line.length - SEARCH_MAX_LINE_CHARS));
  const end = start + SEARCH_MAX_LINE_CHARS;
  return `${start > 0 ? '…' : ''}${line.slice(start, end)}${end < line.length ? '…' : ''}`;
}
