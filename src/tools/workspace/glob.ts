import { RE2JS } from 're2js';
import { WorkspaceError } from './paths.js';

/**
 * A filename filter: `*` (any characters but a slash), `**` (any characters; followed by a slash
 * it also matches no directory at all), `?` (one character but a slash), `[abc]`, `[a-z]`,
 * `[!abc]` (one character of a set; a negated set never matches a slash), `{a,b}` (alternatives, nested) and `\x` (a
 * literal x). A glob without a slash matches the file's name; one with a slash matches its path
 * relative to the directory searched. Dotfiles match like any other file.
 *
 * The glob comes from the model, so it is hostile input. It is translated into RE2 syntax and run
 * by RE2JS, whose matching time is linear in the path's length whatever the glob. picomatch was
 * measured and not used: it compiles to backtracking JavaScript regexes (with lookarounds RE2
 * cannot take), and `a*a*…a*b` (30 stars) against 60 `a`s ran for minutes.
 */
export interface Glob {
  readonly matches: (relPath: string) => boolean;
}

/** Characters a glob may have: far above any real one, and it keeps the compiled program small. */
const GLOB_MAX_CHARS = 1_000;

/**
 * @throws WorkspaceError naming the glob when it is too long or RE2 refuses what it became.
 * @example
 * compileGlob('src/**\/*.ts').matches('src/a/b.ts'); // true
 * compileGlob('*.{ts,tsx}').matches('src/view.tsx'); // true: no slash, so the name is matched
 */
export function compileGlob(glob: string): Glob {
  if (glob.length > GLOB_MAX_CHARS) throw new WorkspaceError('invalid-input', `invalid glob: longer than ${GLOB_MAX_CHARS} characters`);
  let pattern: RE2JS;
  try {
    // DOTALL: a file name may hold a newline, and `*` must match it like any other character.
    pattern = RE2JS.compile(`^(?:${translate(glob)})$`, RE2JS.DOTALL);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new WorkspaceError('invalid-input', `invalid glob '${glob}': ${reason}`);
  }
  const byName = !glob.includes('/');
  return {
    matches: (relPath) => pattern.matches(byName ? relPath.slice(relPath.lastIndexOf('/') + 1) : relPath),
  };
}

/** The glob as an RE2 regular expression (no lookarounds, no backreferences). */
function translate(glob: string): string {
  let out = '';
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const char = glob.charAt(i);
    if (char === '\\' && i + 1 < glob.length) {
      i += 1;
      out += literal(glob.charAt(i));
    } else if (char === '*') {
      if (glob.charAt(i + 1) === '*') {
        const slash = glob.charAt(i + 2) === '/';
        out += slash ? '(?:.*/)?' : '.*';
        i += slash ? 2 : 1;
      } else {
        out += '[^/]*';
      }
    } else if (char === '?') {
      out += '[^/]';
    } else if (char === '[') {
      const set = bracket(glob, i);
      if (set === undefined) {
        out += literal(char);
      } else {
        out += set.regex;
        i = set.end;
      }
    } else if (char === '{') {
      braces += 1;
      out += '(?:';
    } else if (char === '}' && braces > 0) {
      braces -= 1;
      out += ')';
    } else if (char === ',' && braces > 0) {
      out += '|';
    } else {
      out += literal(char);
    }
  }
  return out + ')'.repeat(braces);
}

/** `[…]` starting at `start`, as an RE2 class (a negated one never matches a slash); undefined when it is not closed. */
function bracket(glob: string, start: number): { regex: string; end: number } | undefined {
  let i = start + 1;
  const negated = glob.charAt(i) === '!' || glob.charAt(i) === '^';
  if (negated) i += 1;
  let body = '';
  // A `]` right after the opening (or after `!`) is a member, as in POSIX.
  let first = true;
  for (; i < glob.length; i++) {
    const char = glob.charAt(i);
    if (char === ']' && !first) return { regex: negated ? `[^/${body}]` : `[${body}]`, end: i };
    first = false;
    if (char === '\\' && i + 1 < glob.length) {
      i += 1;
      body += classMember(glob.charAt(i));
    } else if (char === '-' && body !== '' && glob.charAt(i + 1) !== ']') {
      body += '-';
    } else {
      body += classMember(char);
    }
  }
  return undefined;
}

function literal(char: string): string {
  return /[\\^$.|?*+()[\]{}/]/.test(char) ? `\\${char}` : char;
}

function classMember(char: string): string {
  return /[\\\][^-]/.test(char) ? `\\${char}` : char;
}
