import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The fenced code blocks of the Markdown a user reads, and what each says about itself. The
 * conventions (docs/testing.md, "Code blocks in the README and docs"):
 *
 * - a `ts`/`typescript`/`js` block is complete: a user's own module, type-checked and run;
 * - its first line `// fragment: <why>` says it is part of a larger program: neither checked nor run;
 * - its first line `// does not run here: <why>` says it is type-checked but not run (it needs a key,
 *   a server, a download).
 */

/** One fenced block: where it starts in its Markdown file, its language and its text. */
export interface CodeBlock {
  /** The Markdown file, relative to the repository: `docs/tools.md`. */
  readonly file: string;
  /** The line of the opening fence (1-based); the code's first line is the next one. */
  readonly line: number;
  /** Its number among the file's checked (TypeScript and JavaScript) blocks, from 1; 0 for others. */
  readonly index: number;
  /** The info string's first word, lower case (`ts`, `sh`, `json`), or '' for a bare fence. */
  readonly lang: string;
  readonly code: string;
  /** What its first line says it is; undefined for a complete, runnable block. */
  readonly marker: { readonly kind: 'fragment' | 'no-run'; readonly why: string } | undefined;
}

/** The languages whose blocks are checked, and the file extension each compiles as. */
export const CHECKED_LANGUAGES: Readonly<Record<string, 'ts' | 'mjs'>> = { ts: 'ts', typescript: 'ts', js: 'mjs', javascript: 'mjs', mjs: 'mjs' };

const FRAGMENT = /^\s*\/\/\s*fragment:\s*(.*)$/;
const NO_RUN = /^\s*\/\/\s*does not run here:\s*(.*)$/;
/** A first-line comment that looks like a marker but is not one, so a typo fails rather than silently checks or runs. */
const NEAR_MARKER = /^\s*\/\/\s*(fragment|does\s*n[o']t\s+run)/i;

/** The Markdown a user reads: the README, every page under docs/, and the visualizations' README. */
export function documentsOf(root: string): string[] {
  const under = (dir: string): string[] =>
    readdirSync(join(root, dir), { withFileTypes: true }).flatMap((entry) =>
      entry.isDirectory() ? under(`${dir}/${entry.name}`) : entry.name.endsWith('.md') ? [`${dir}/${entry.name}`] : [],
    );
  return ['README.md', ...under('docs').sort(), 'visualizations/README.md'].filter((file) => existsSync(join(root, file)));
}

/**
 * Every fenced block of `markdown` (``` or ~~~, indented up to three spaces, as CommonMark reads
 * them). Throws on a marker without its reason, or a first line that nearly is a marker.
 */
function codeBlocksOf(markdown: string, file: string): CodeBlock[] {
  const lines = markdown.split('\n');
  const blocks: CodeBlock[] = [];
  let checked = 0;
  for (let at = 0; at < lines.length; at++) {
    const open = /^( {0,3})(`{3,}|~{3,})\s*([^\s`]*)/.exec(lines[at] ?? '');
    if (!open) continue;
    const [, indent = '', fence = '', info = ''] = open;
    const body: string[] = [];
    let end = at + 1;
    for (; end < lines.length; end++) {
      const text = lines[end] ?? '';
      if (new RegExp(`^ {0,3}${fence[0] === '`' ? '`' : '~'}{${fence.length},}\\s*$`).test(text)) break;
      body.push(text.startsWith(indent) ? text.slice(indent.length) : text.trimStart());
    }
    const lang = info.toLowerCase();
    const isChecked = lang in CHECKED_LANGUAGES;
    if (isChecked) checked++;
    blocks.push({
      file,
      line: at + 1,
      index: isChecked ? checked : 0,
      lang,
      code: body.join('\n'),
      marker: isChecked ? markerOf(body[0] ?? '', file, at + 2) : undefined,
    });
    at = end;
  }
  return blocks;
}

function markerOf(first: string, file: string, line: number): CodeBlock['marker'] {
  const fragment = FRAGMENT.exec(first);
  const noRun = NO_RUN.exec(first);
  const why = (fragment ?? noRun)?.[1]?.trim();
  if (why === '') throw new Error(`${file}:${line}: a block's marker says why: \`// fragment: <why>\` or \`// does not run here: <why>\``);
  if (fragment) return { kind: 'fragment', why: why ?? '' };
  if (noRun) return { kind: 'no-run', why: why ?? '' };
  if (NEAR_MARKER.test(first))
    throw new Error(`${file}:${line}: \`${first.trim()}\` is not a marker: write \`// fragment: <why>\` or \`// does not run here: <why>\``);
  return undefined;
}

/** The blocks of every document a user reads. */
export function codeBlocksUnder(root: string): CodeBlock[] {
  return documentsOf(root).flatMap((file) => codeBlocksOf(readFileSync(join(root, file), 'utf8'), file));
}
