import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * A long docs page opens with its contents: a `Contents:` list that links every `##` heading of the
 * page, in order, so a reader finds the section they need without scrolling the whole page.
 */

const docs = fileURLToPath(new URL('../../../docs/', import.meta.url));
/** Past this many lines a page is long enough to need its contents. */
const LONG = 120;

function headingsOf(markdown: string): string[] {
  const outsideCode = markdown.replace(/^```[\s\S]*?^```/gm, '');
  return [...outsideCode.matchAll(/^## (.+)$/gm)].map((m) => m[1] ?? '');
}

function contentsOf(markdown: string): string[] | undefined {
  const list = /^Contents:\n\n((?:- \[.+\]\(#.+\)\n)+)/m.exec(markdown)?.[1];
  return list
    ?.trimEnd()
    .split('\n')
    .map((line) => /^- \[(.+)\]\(#.+\)$/.exec(line)?.[1] ?? line);
}

const pages = readdirSync(docs).filter((f) => f.endsWith('.md'));

describe('the contents of long docs pages', () => {
  it.each(pages)('docs/%s, if long, lists every section at its top', (page) => {
    const text = readFileSync(join(docs, page), 'utf8');
    const headings = headingsOf(text);
    if (text.split('\n').length <= LONG || headings.length < 2) return;
    // The list's texts are the headings themselves; docLinks.test.ts checks that each #anchor exists.
    expect(contentsOf(text), `docs/${page} has ${text.split('\n').length} lines and no Contents: list of its ## headings`).toEqual(headings);
  });
});
