import { constants } from 'node:fs';
import { mkdir, open } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { defineTool, type Tool } from '../defineTool.js';
import { errorCode, fsError, quote, resolveInside, WorkspaceError } from './paths.js';

const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

const input = z.object({
  path: z.string().min(1).describe('File path relative to the working directory.'),
  content: z.string().describe('The complete new content of the file.'),
});

export function writeFileTool(root: string): Tool {
  return defineTool({
    name: 'write_file',
    // Writes the whole file from its input (O_TRUNC, no append mode): a second run leaves the same bytes as
    // the first, so a call in flight at a crash is run again rather than answered as unknown.
    idempotent: true,
    description:
      'Create or overwrite a file in the working directory with `content` (the whole file). Missing parent directories are ' +
      'created. Paths outside the working directory are refused.',
    input,
    run: ({ path: shown, content }, { signal }) => writeText(root, shown, content, signal),
  });
}

async function writeText(root: string, shown: string, content: string, signal: AbortSignal): Promise<string> {
  signal.throwIfAborted();
  const target = await resolveInside(root, shown);
  if (target.real === target.rootReal) throw new WorkspaceError(`${quote(shown)} is the working directory itself, not a file`);
  try {
    // Only the missing tail of the parent is created, below a real (symlink-free) ancestor inside the root.
    await mkdir(path.dirname(target.real), { recursive: true });
  } catch (error) {
    const code = errorCode(error);
    if (code === 'EEXIST' || code === 'ENOTDIR') {
      throw new WorkspaceError(`cannot write ${quote(shown)}: a part of its directory path is a file`);
    }
    throw fsError(error, shown);
  }
  signal.throwIfAborted();
  // O_NOFOLLOW: the resolved location is not a symlink; refuse one that appeared since.
  const handle = await open(target.real, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | NOFOLLOW, 0o666).catch((error: unknown) => {
    throw fsError(error, shown);
  });
  const bytes = Buffer.from(content, 'utf8');
  try {
    await handle.writeFile(bytes);
  } finally {
    await handle.close();
  }
  return `wrote ${bytes.length} bytes to ${target.display}`;
}
