import { describe, expect, it } from 'vitest';
import type { Tool } from '../../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../../src/tools/workspace/index.js';

/**
 * What the model is told about each workspace tool (its description and input schema, word for
 * word: they are the tool's contract with the model), which inputs validation turns away, and
 * which tools a durable run may replay or start early.
 */

const tools = workspaceTools({ root: '.', allowWrite: true });
const tool = (name: string): Tool => {
  const found = tools.find((t) => t.name === name);
  if (found === undefined) throw new Error(`no tool named ${name}`);
  return found;
};
const MAX_SAFE = 9_007_199_254_740_991;

describe('what the model is told', () => {
  it('read_file', () => {
    expect(tool('read_file').spec).toEqual({
      name: 'read_file',
      description:
        'Read a text file in the working directory. Returns its text; when only part of the file is returned, a first line "PATH (lines A–B of N)" says which part. ' +
        'At most 2000 lines (and about 40k characters) per call: use offset/limit to read further. Lines longer than 2,000 characters are cut. Binary files are refused.',
      input_schema: {
        type: 'object',
        properties: {
          path: { type: 'string', minLength: 1, description: 'File path relative to the working directory.' },
          offset: { description: 'First line to return (1-based). Default 1.', type: 'integer', minimum: 1, maximum: MAX_SAFE },
          limit: { description: 'Number of lines to return (at most 2000).', type: 'integer', minimum: 1, maximum: MAX_SAFE },
        },
        required: ['path'],
      },
    });
  });

  it('list_dir', () => {
    expect(tool('list_dir').spec).toEqual({
      name: 'list_dir',
      description:
        "List a directory in the working directory: one path per line (relative to the working directory), sorted, directories end with '/', symlinks show 'name -> target' and are not followed. " +
        'recursive/depth list the tree below; .git and node_modules are then listed but not expanded. At most 1000 entries per call.',
      input_schema: {
        type: 'object',
        properties: {
          path: { description: "Directory relative to the working directory. Default '.'.", type: 'string' },
          recursive: { description: 'List the whole tree below the directory. Default false.', type: 'boolean' },
          depth: {
            description: 'Levels to list when recursive (1 = only the directory itself). Default: no limit.',
            type: 'integer',
            minimum: 1,
            maximum: MAX_SAFE,
          },
        },
      },
    });
  });

  it('search_files', () => {
    expect(tool('search_files').spec).toEqual({
      name: 'search_files',
      description:
        'Search file contents in the working directory with a regular expression (like grep -rn). Returns matching lines as "path:line: text", at most 200 matches per call, long lines shortened. ' +
        'Skips binary files, files over 5 MB, .git and node_modules; symlinks are not followed.',
      input_schema: {
        type: 'object',
        properties: {
          pattern: {
            type: 'string',
            minLength: 1,
            description: "A regular expression in RE2 syntax (like JavaScript's, without lookarounds or backreferences), matched against each line.",
          },
          path: { description: "File or directory to search, relative to the working directory. Default '.'.", type: 'string' },
          glob: {
            description: "Only files whose name matches, e.g. '*.ts' or '*.{ts,tsx}'; with a '/', matched against the path, e.g. 'src/**/*.ts'.",
            type: 'string',
            minLength: 1,
          },
          ignoreCase: { description: 'Match case-insensitively. Default false.', type: 'boolean' },
        },
        required: ['pattern'],
      },
    });
  });

  it('write_file', () => {
    expect(tool('write_file').spec).toEqual({
      name: 'write_file',
      description:
        'Create or overwrite a file in the working directory with `content` (the whole file). Missing parent directories are created. Paths outside the working directory are refused.',
      input_schema: {
        type: 'object',
        properties: {
          path: { type: 'string', minLength: 1, description: 'File path relative to the working directory.' },
          content: { type: 'string', description: 'The complete new content of the file.' },
        },
        required: ['path', 'content'],
      },
    });
  });
});

describe('inputs validation turns away', () => {
  const refused = (name: string, input: unknown): boolean => !tool(name).prepare(input).ok;

  it('an empty path or pattern, a line number below 1 or not whole, a depth below 1', () => {
    expect(refused('read_file', { path: '' })).toBe(true);
    expect(refused('read_file', { path: 'a', offset: 0 })).toBe(true);
    expect(refused('read_file', { path: 'a', offset: 1.5 })).toBe(true);
    expect(refused('read_file', { path: 'a', limit: 0 })).toBe(true);
    expect(refused('read_file', { path: 'a', limit: 2.5 })).toBe(true);
    expect(refused('search_files', { pattern: '' })).toBe(true);
    expect(refused('search_files', { pattern: 'x', glob: '' })).toBe(true);
    expect(refused('list_dir', { depth: 0 })).toBe(true);
    expect(refused('list_dir', { depth: 1.5 })).toBe(true);
    expect(refused('write_file', { path: '', content: 'x' })).toBe(true);
  });

  it('the smallest valid values pass', () => {
    expect(refused('read_file', { path: 'a', offset: 1, limit: 1 })).toBe(false);
    expect(refused('search_files', { pattern: 'x', glob: '*' })).toBe(false);
    expect(refused('list_dir', { depth: 1 })).toBe(false);
    expect(refused('list_dir', { path: '' })).toBe(false);
    expect(refused('write_file', { path: 'a', content: '' })).toBe(false);
  });
});

describe('replay and early start in a durable run', () => {
  it('every workspace tool may be run again after a crash; only the readers may start before their call is journaled', () => {
    expect(tools.map((t) => [t.name, t.idempotent, t.readOnly])).toEqual([
      ['read_file', true, true],
      ['list_dir', true, true],
      ['search_files', true, true],
      ['write_file', true, false],
    ]);
  });
});
