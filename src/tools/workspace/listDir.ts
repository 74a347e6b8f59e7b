import { readlink } from 'node:fs/promises';
import { z } from 'zod';
import { defineTool, type Tool } from '../defineTool.js';
import { at, locate } from './openInside.js';
import { fsError, joinDisplay, quote, WorkspaceError } from './paths.js';
import { SKIPPED_DIRS, WALK_MAX_DEPTH, walk, type WalkEntry } from './walk.js';

/** Entries one call lists at most. */
const LIST_MAX_ENTRIES = 1_000;
/** Skipped or unreadable directories named in the closing note at most. */
const MAX_NAMED = 10;

const input = z.object({
  path: z.string().optional().describe("Directory relative to the working directory. Default '.'."),
  recursive: z.boolean().optional().describe('List the whole tree below the directory. Default false.'),
  depth: z.number().int().min(1).optional().describe('Levels to list when recursive (1 = only the directory itself). Default: no limit.'),
});

export function listDirTool(root: string): Tool {
  return defineTool({
    name: 'list_dir',
    // Reads only: running it again after a crash is safe.
    idempotent: true,
    // It only reads: in a durable run it may start before its response is journaled.
    readOnly: true,
    description:
      'List a directory in the working directory: one path per line (relative to the working directory), sorted, ' +
      "directories end with '/', symlinks show 'name -> target' and are not followed. recursive/depth list the tree below; " +
      `${[...SKIPPED_DIRS].join(' and ')} are then listed but not expanded. At most ${LIST_MAX_ENTRIES} entries per call.`,
    input,
    run: ({ path, recursive, depth }, { signal }) => {
      const maxDepth = recursive === false ? 1 : (depth ?? (recursive === true ? Number.POSITIVE_INFINITY : 1));
      return listDir(root, path ?? '.', maxDepth, signal);
    },
  });
}

async function listDir(root: string, shown: string, maxDepth: number, signal: AbortSignal): Promise<string> {
  signal.throwIfAborted();
  const location = await locate(root, shown);
  const lines: string[] = [];
  const skipped: string[] = [];
  const unreadable: string[] = [];
  const tooDeep: string[] = [];
  let cut = false;
  try {
    const found = location.found;
    switch (found.kind) {
      case 'missing':
        throw new WorkspaceError('not-found', `no such directory: ${shown}`);
      case 'blocked':
        throw new WorkspaceError('not-found', `no such directory: ${shown} (a part of the path is a file, not a directory)`);
      case 'entry':
        throw new WorkspaceError('wrong-type', `${quote(shown)} is a file, not a directory; use read_file to read it`);
      case 'dir':
        break;
    }
    // The walk starts from the directory's descriptor (/proc/self/fd/N), so the directory listed is the one checked.
    // Below it the walk goes by name and does not follow symlinks; a directory swapped for one mid-walk is listed by name only.
    for await (const entry of walk(at(found.dir), { maxDepth, signal })) {
      if (lines.length === LIST_MAX_ENTRIES) {
        cut = true;
        break;
      }
      const name = joinDisplay(location.display, entry.rel);
      lines.push(await describeEntry(entry, name));
      if (entry.notDescended === 'skipped') skipped.push(`${name}/`);
      if (entry.notDescended === 'unreadable') unreadable.push(`${name}/`);
      if (entry.notDescended === 'too deep') tooDeep.push(`${name}/`);
    }
  } catch (error) {
    throw errorForDir(error, shown);
  } finally {
    await location.release();
  }

  const display = location.display === '.' ? '.' : `${location.display}/`;
  if (lines.length === 0) return `(${display} is empty)`;
  if (skipped.length > 0) lines.push(`[not expanded: ${named(skipped)} — list one explicitly to see inside]`);
  if (unreadable.length > 0) lines.push(`[could not read: ${named(unreadable)}]`);
  if (tooDeep.length > 0) lines.push(`[not expanded, deeper than ${WALK_MAX_DEPTH} levels: ${named(tooDeep)} — list one explicitly to see inside]`);
  if (cut) lines.push(`[listing cut at ${LIST_MAX_ENTRIES} entries: list a subdirectory, or use a smaller depth]`);
  return lines.join('\n');
}

async function describeEntry(entry: WalkEntry, name: string): Promise<string> {
  switch (entry.kind) {
    case 'dir':
      return `${name}/`;
    case 'symlink': {
      const target = await readlink(entry.abs).catch(() => '?');
      return `${name} -> ${target}`;
    }
    default:
      return name;
  }
}

function named(paths: readonly string[]): string {
  const shown = paths.slice(0, MAX_NAMED).join(', ');
  return paths.length > MAX_NAMED ? `${shown} and ${paths.length - MAX_NAMED} more` : shown;
}

function errorForDir(error: unknown, shown: string): Error {
  const wrapped = fsError(error, shown);
  return wrapped.message.startsWith('no such file: ')
    ? new WorkspaceError('not-found', wrapped.message.replace('no such file: ', 'no such directory: '))
    : wrapped;
}
