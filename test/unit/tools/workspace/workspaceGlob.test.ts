import { describe, expect, it } from 'vitest';
import { compileGlob } from '../../../../src/tools/workspace/glob.js';

/** The glob language of search_files: what each construct matches and what it does not, and the globs it refuses. */

const matches = (glob: string, relPath: string): boolean => compileGlob(glob).matches(relPath);

describe('a glob without a slash matches the file name, one with a slash the whole relative path', () => {
  it('a plain name matches that name in any directory, and only that whole name', () => {
    expect(matches('a.ts', 'a.ts')).toBe(true);
    expect(matches('a.ts', 'src/deep/a.ts')).toBe(true);
    expect(matches('a.ts', 'ba.ts')).toBe(false);
    expect(matches('a.ts', 'a.tsx')).toBe(false);
    expect(matches('a.ts', 'a.ts/b')).toBe(false);
  });

  it('a glob with a slash is matched from the searched directory down, not as a suffix', () => {
    expect(matches('src/a.ts', 'src/a.ts')).toBe(true);
    expect(matches('src/a.ts', 'lib/src/a.ts')).toBe(false);
    expect(matches('src/a.ts', 'a.ts')).toBe(false);
  });

  it('dotfiles match like any other file', () => {
    expect(matches('*', '.env')).toBe(true);
    expect(matches('*.json', 'dir/.eslintrc.json')).toBe(true);
  });
});

describe('wildcards', () => {
  it('* matches any characters in one path segment, none included', () => {
    expect(matches('*.ts', 'view.ts')).toBe(true);
    expect(matches('*.ts', '.ts')).toBe(true);
    expect(matches('src/*.ts', 'src/a.ts')).toBe(true);
    expect(matches('src/*.ts', 'src/a/b.ts')).toBe(false);
    expect(matches('*.ts', 'view.tsx')).toBe(false);
  });

  it('* matches a newline inside a file name', () => {
    expect(matches('a*b', 'a\nb')).toBe(true);
    expect(matches('a?b', 'a\nb')).toBe(true);
  });

  it('** matches across slashes, and **/ also matches no directory at all', () => {
    expect(matches('src/**', 'src/a/b/c.ts')).toBe(true);
    expect(matches('src/**.ts', 'src/a/b.ts')).toBe(true);
    expect(matches('src/**/*.ts', 'src/b.ts')).toBe(true);
    expect(matches('src/**/*.ts', 'src/a/b/c.ts')).toBe(true);
    expect(matches('src/**/*.ts', 'srcb.ts')).toBe(false);
    expect(matches('src/**/*.ts', 'lib/b.ts')).toBe(false);
    expect(matches('**/b.ts', 'b.ts')).toBe(true);
    expect(matches('**/b.ts', 'x/y/b.ts')).toBe(true);
  });

  it('**/ needs the slash to be optional only as a whole directory: **x does not eat a slash it was not given', () => {
    expect(matches('a/**x', 'a/y/zx')).toBe(true);
    expect(matches('a/**/x', 'a/yx')).toBe(false);
  });

  it('? matches exactly one character, never a slash', () => {
    expect(matches('a?c', 'abc')).toBe(true);
    expect(matches('a?c', 'ac')).toBe(false);
    expect(matches('a?c', 'abbc')).toBe(false);
    expect(matches('x/a?c', 'x/a/c')).toBe(false);
  });
});

describe('bracket sets', () => {
  it('[abc] matches one of the characters, [a-c] one of the range', () => {
    expect(matches('[ab].ts', 'a.ts')).toBe(true);
    expect(matches('[ab].ts', 'b.ts')).toBe(true);
    expect(matches('[ab].ts', 'c.ts')).toBe(false);
    expect(matches('[ab].ts', 'ab.ts')).toBe(false);
    expect(matches('f[0-9]', 'f7')).toBe(true);
    expect(matches('f[0-9]', 'fx')).toBe(false);
    expect(matches('f[0-9]', 'f-')).toBe(false);
  });

  it('a character between two members is a member, not a range, unless it is a -', () => {
    expect(matches('[axz]', 'x')).toBe(true);
    expect(matches('[axz]', 'b')).toBe(false);
    expect(matches('[a-z]', 'b')).toBe(true);
  });

  it('[!abc] and [^abc] match one character not in the set, and never a slash', () => {
    expect(matches('[!ab].ts', 'c.ts')).toBe(true);
    expect(matches('[!ab].ts', 'a.ts')).toBe(false);
    expect(matches('[^ab].ts', 'c.ts')).toBe(true);
    expect(matches('[^ab].ts', 'b.ts')).toBe(false);
    expect(matches('x[!a]y/z', 'x/y/z')).toBe(false);
    expect(matches('x[!a]y/z', 'x-y/z')).toBe(true);
  });

  it('a ] right after the opening (or after !) is a member, as in POSIX', () => {
    expect(matches('[]]', ']')).toBe(true);
    expect(matches('[]a]', 'a')).toBe(true);
    expect(matches('[]a]', 'b')).toBe(false);
    expect(matches('[!]]', 'a')).toBe(true);
    expect(matches('[!]]', ']')).toBe(false);
  });

  it('a - at either end of a set is a member, not a range', () => {
    expect(matches('[-a]', '-')).toBe(true);
    expect(matches('[-a]', 'a')).toBe(true);
    expect(matches('[-a]', 'b')).toBe(false);
    expect(matches('[a-]', '-')).toBe(true);
    expect(matches('[a-]', 'b')).toBe(false);
    expect(matches('[!-]', '-')).toBe(false);
    expect(matches('[!-]', 'x')).toBe(true);
  });

  it('a leading - after ! is a member, not the end of a range from the slash the negation adds', () => {
    expect(matches('[!-a]', '0')).toBe(true);
    expect(matches('[!-a]', '-')).toBe(false);
  });

  it('a ] taken as the first member can start a range', () => {
    expect(matches('[]-a]', '_')).toBe(true);
    expect(matches('[]-a]', 'b')).toBe(false);
  });

  it('characters special to regular expressions are plain members of a set', () => {
    expect(matches('[\\]]', ']')).toBe(true);
    expect(matches('[\\]]', '\\')).toBe(false);
    expect(matches('[\\-]', '-')).toBe(true);
    expect(matches('[\\-]', 'x')).toBe(false);
    expect(matches('[a^]', '^')).toBe(true);
    expect(matches('[a^]', 'b')).toBe(false);
    expect(matches('[[]', '[')).toBe(true);
    expect(matches('[x\\\\]', '\\')).toBe(true);
    expect(matches('[.]', '.')).toBe(true);
    expect(matches('[.]', 'x')).toBe(false);
  });

  it('an unclosed [ is a literal character', () => {
    expect(matches('[abc', '[abc')).toBe(true);
    expect(matches('[abc', 'a')).toBe(false);
    expect(matches('x[', 'x[')).toBe(true);
    expect(matches('[!', '[!')).toBe(true);
    expect(matches('[]', '[]')).toBe(true);
  });

  it('a backslash escaping the last character of an unclosed set leaves it literal', () => {
    expect(matches('[a\\', '[a\\')).toBe(true);
  });
});

describe('braces', () => {
  it('{a,b} matches either alternative, and the alternatives can nest', () => {
    expect(matches('*.{ts,tsx}', 'view.tsx')).toBe(true);
    expect(matches('*.{ts,tsx}', 'view.ts')).toBe(true);
    expect(matches('*.{ts,tsx}', 'view.js')).toBe(false);
    expect(matches('{a,{b,c}d}', 'cd')).toBe(true);
    expect(matches('{a,{b,c}d}', 'a')).toBe(true);
    expect(matches('{a,{b,c}d}', 'b')).toBe(false);
    expect(matches('{a,{b,c}d}', 'bd')).toBe(true);
  });

  it('an unclosed { is closed at the end of the glob', () => {
    expect(matches('x{a,b', 'xa')).toBe(true);
    expect(matches('x{a,b', 'xb')).toBe(true);
    expect(matches('x{a,b', 'x{a,b')).toBe(false);
    expect(matches('{{a,b', 'b')).toBe(true);
  });

  it('a } with no { open and a , outside braces are literal characters', () => {
    expect(matches('a}', 'a}')).toBe(true);
    expect(matches('a,b', 'a,b')).toBe(true);
    expect(matches('a,b', 'a')).toBe(false);
    expect(matches('{a}}', 'a}')).toBe(true);
    expect(matches('{a},b', 'a,b')).toBe(true);
    expect(matches('{a},b', 'b')).toBe(false);
  });
});

describe('escapes and literal characters', () => {
  it('\\x matches the character x itself, wildcards included', () => {
    expect(matches('\\*', '*')).toBe(true);
    expect(matches('\\*', 'a')).toBe(false);
    expect(matches('\\?', '?')).toBe(true);
    expect(matches('\\?', 'a')).toBe(false);
    expect(matches('\\[a]', '[a]')).toBe(true);
    expect(matches('\\[a]', 'a')).toBe(false);
    expect(matches('\\{a,b}', '{a,b}')).toBe(true);
    expect(matches('\\a', 'a')).toBe(true);
  });

  it('a backslash at the very end is a literal backslash', () => {
    expect(matches('a\\', 'a\\')).toBe(true);
    expect(matches('a\\', 'a')).toBe(false);
  });

  it('characters special to regular expressions match only themselves', () => {
    expect(matches('a.b', 'a.b')).toBe(true);
    expect(matches('a.b', 'axb')).toBe(false);
    expect(matches('a+', 'a+')).toBe(true);
    expect(matches('a+', 'aa')).toBe(false);
    expect(matches('(x)', '(x)')).toBe(true);
    expect(matches('(x)', 'x')).toBe(false);
    expect(matches('a|b', 'a|b')).toBe(true);
    expect(matches('a|b', 'a')).toBe(false);
    expect(matches('^a$', '^a$')).toBe(true);
    expect(matches('^a$', 'a')).toBe(false);
  });
});

describe('globs it refuses', () => {
  it('a glob of 1,000 characters is taken, one of 1,001 refused with one line', () => {
    expect(matches('a'.repeat(1_000), 'a'.repeat(1_000))).toBe(true);
    expect(() => compileGlob('a'.repeat(1_001))).toThrow(/^invalid glob: longer than 1000 characters$/);
    expect(() => compileGlob('a'.repeat(1_001))).toThrow(expect.objectContaining({ kind: 'invalid-input' }));
  });

  it('a set whose range runs backwards is refused, naming the glob', () => {
    expect(() => compileGlob('[z-a].ts')).toThrow("invalid glob '[z-a].ts': error parsing regexp: invalid character class range: `z-a`");
    expect(() => compileGlob('[z-a].ts')).toThrow(expect.objectContaining({ kind: 'invalid-input' }));
  });
});
