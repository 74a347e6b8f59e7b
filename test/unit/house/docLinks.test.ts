import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { documentsOf } from '../../support/markdownBlocks.js';
import { anchorsOf, localLinks } from '../../support/markdownLinks.js';

/**
 * The README, docs/ and the visualizations' README link only to files of this repository (a clone
 * has nothing beside it), each `#anchor` names a heading of its target, as GitHub renders it, and
 * every page of docs/ can be reached from the README by following links.
 */

const root = fileURLToPath(new URL('../../..', import.meta.url));
const documents = documentsOf(root);

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

  it('every page of docs/ is reached from the README by following links', () => {
    const reached = new Set(['README.md']);
    const queue = ['README.md'];
    for (let page = queue.shift(); page !== undefined; page = queue.shift()) {
      for (const link of localLinks(readFileSync(join(root, page), 'utf8'))) {
        const path = link.split('#')[0] ?? '';
        if (!path.endsWith('.md')) continue;
        const target = relative(root, resolve(dirname(join(root, page)), decodeURIComponent(path)));
        if (reached.has(target) || !existsSync(join(root, target))) continue;
        reached.add(target);
        queue.push(target);
      }
    }
    expect(documents.filter((page) => page.startsWith('docs/') && !reached.has(page))).toEqual([]);
  });
});
