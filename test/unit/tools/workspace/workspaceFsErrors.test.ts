import { describe, expect, it } from 'vitest';
import { fsError, WorkspaceError } from '../../../../src/tools/workspace/paths.js';

/**
 * The one line a workspace tool answers with when a file-system call fails on the path the model
 * named. Most of these codes reach a tool only when the path changes between two of its calls (a
 * race the tools' own tests stage for some of them), so each mapping is checked here on the error
 * Node raises, built as Node builds it.
 */

/** An error as Node's fs raises it: a message naming the call and path, and its `code`. */
function nodeError(code: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`${code}: failed, open '/w/x'`), { code, syscall: 'open', path: '/w/x' });
}

describe('a failed file-system call on a named path', () => {
  it.each([
    ['ENOENT', 'not-found', 'no such file: a/b.txt'],
    ['ENOTDIR', 'not-found', 'no such file: a/b.txt (a part of the path is a file, not a directory)'],
    ['EISDIR', 'wrong-type', "'a/b.txt' is a directory"],
    ['EACCES', 'io', 'permission denied: a/b.txt'],
    ['EPERM', 'io', 'permission denied: a/b.txt'],
    ['ELOOP', 'refused', "refused: 'a/b.txt' is a symlink that changed while it was being used"],
    ['EEXIST', 'wrong-type', "cannot create 'a/b.txt': a part of the path exists and is not a directory"],
    ['EIO', 'io', "a/b.txt: EIO: failed, open '/w/x'"],
  ])('%s is one line of kind %s', (code, kind, message) => {
    const error = fsError(nodeError(code), 'a/b.txt');
    expect(error).toBeInstanceOf(WorkspaceError);
    expect(error).toMatchObject({ kind, message });
  });

  it('a workspace refusal, an abort or a bug passes through unchanged; a thrown non-error becomes a line', () => {
    const refusal = new WorkspaceError('refused', 'refused: no');
    expect(fsError(refusal, 'x')).toBe(refusal);
    const abort = new DOMException('This operation was aborted', 'AbortError');
    expect(fsError(abort, 'x')).toBe(abort);
    const bug = new TypeError('undefined is not a function');
    expect(fsError(bug, 'x')).toBe(bug);
    expect(fsError('weird', 'x')).toMatchObject({ kind: 'io', message: 'x: weird' });
  });
});
