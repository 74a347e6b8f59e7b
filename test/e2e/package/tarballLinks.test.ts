import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, posix } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { anchorsOf, localLinks } from '../../support/markdownLinks.js';

/**
 * The Markdown the package ships links only inside the package: an installed README or docs page
 * (node_modules/exarch/…, or the npm page) has no repository beside it. The file list is npm's own
 * (`npm pack --dry-run --json`), as the tarball would hold it.
 */

const root = fileURLToPath(new URL('../../..', import.meta.url));

function packedFiles(): string[] {
  // dist/ is current (test/globalSetup.ts built it): list it as it is, without building again.
  const pack = spawnSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
  if (pack.status !== 0) throw new Error(`npm pack --dry-run failed:\n${pack.stdout}${pack.stderr}`);
  const [listing] = JSON.parse(pack.stdout) as { files: { path: string }[] }[];
  return (listing?.files ?? []).map((file) => file.path);
}

describe('the Markdown in the packed package', () => {
  const files = packedFiles();
  const shipped = new Set(files);
  const pages = files.filter((file) => file.endsWith('.md'));

  it('ships the README and the docs it links', () => {
    expect(pages).toContain('README.md');
    expect(pages).toContain('docs/protocol.md');
  });

  it.each(pages)('%s links only to files in the package, and to headings they have', (page) => {
    const broken: string[] = [];
    for (const link of localLinks(readFileSync(join(root, page), 'utf8'))) {
      const [path = '', anchor] = link.split('#');
      const target = path === '' ? page : posix.normalize(posix.join(posix.dirname(page), decodeURIComponent(path))).replace(/\/$/, '');
      const isFile = shipped.has(target);
      const isFolder = files.some((file) => file.startsWith(`${target}/`));
      if (!isFile && !isFolder) broken.push(`${link}: not in the package`);
      else if (anchor !== undefined && isFile && target.endsWith('.md') && !anchorsOf(readFileSync(join(root, target), 'utf8')).has(anchor))
        broken.push(`${link}: no heading #${anchor}`);
    }
    expect(broken).toEqual([]);
  });
});
