import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The README and docs/ link only to files of this repository (a clone has nothing beside it), and
 * each `#anchor` names a heading of its target, as GitHub renders it.
 */

const root = fileURLToPath(new URL('../../..', import.meta.url));
const documents = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** GitHub's heading anchor: lower case, punctuation dropped, each space a hyphen. */
function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

function anchorsOf(markdown: string): Set<string> {
  const withoutCode = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return new Set([...withoutCode.matchAll(/^#{1,6}\s+(.+)$/gm)].map((m) => slug((m[1] ?? '').replace(/`/g, ''))));
}

/** Markdown links outside code: `[text](target)`, without those to other sites. */
function localLinks(markdown: string): string[] {
  const prose = markdown.replace(/^```[\s\S]*?^```/gm, '').replace(/`[^`\n]*`/g, '');
  return [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1] ?? '').filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe('links in the README and docs/', () => {
  it.each(documents)('%s links only to files of the repository, and to headings they have', (document) => {
    const text = readFileSync(join(root, document), 'utf8');
    const links = localLinks(text);
    const broken: string[] = [];
    for (const link of links) {
      const [path = '', anchor] = link.split('#');
      const target = path === '' ? join(root, document) : resolve(dirname(join(root, document)), decodeURIComponent(path));
      if (relative(root, target).startsWith('..')) broken.push(`${link}: outside the repository`);
      else if (!existsSync(target)) broken.push(`${link}: no such file`);
      else if (anchor !== undefined && target.endsWith('.md') && !anchorsOf(readFileSync(target, 'utf8')).has(anchor))
        broken.push(`${link}: no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });

  it('the README links to the protocol the package follows', () => {
    expect(localLinks(readFileSync(join(root, 'README.md'), 'utf8'))).toContain('docs/protocol.md');
  });
});
