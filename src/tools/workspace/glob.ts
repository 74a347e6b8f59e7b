/**
 * A small filename filter: `*` (any characters but a slash), `**` (any characters; followed by a
 * slash it also matches no directory at all), `?` (one character but a slash) and `{a,b}`
 * (alternatives). A glob without a slash matches the file's name; one with a slash matches its
 * path relative to the directory searched.
 */
export interface Glob {
  readonly matches: (relPath: string) => boolean;
}

export function compileGlob(glob: string): Glob {
  const pattern = new RegExp(`^${translate(glob)}$`);
  const byName = !glob.includes('/');
  return {
    matches: (relPath) => pattern.test(byName ? relPath.slice(relPath.lastIndexOf('/') + 1) : relPath),
  };
}

function translate(glob: string): string {
  let out = '';
  let braces = 0;
  for (let i = 0; i < glob.length; i++) {
    const char = glob.charAt(i);
    if (char === '*') {
      if (glob.charAt(i + 1) === '*') {
        const slash = glob.charAt(i + 2) === '/';
        out += slash ? '(?:.*/)?' : '.*';
        i += slash ? 2 : 1;
      } else {
        out += '[^/]*';
      }
    } else if (char === '?') {
      out += '[^/]';
    } else if (char === '{') {
      braces += 1;
      out += '(?:';
    } else if (char === '}' && braces > 0) {
      braces -= 1;
      out += ')';
    } else if (char === ',' && braces > 0) {
      out += '|';
    } else {
      out += char.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
    }
  }
  return out + ')'.repeat(braces);
}
