import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { ExarchError } from '../../engine/exarchError.js';

/**
 * The viewer page's scripts, as the page inlines them (so a page works from a file, with no
 * asset beside it):
 *
 * - markdown-it's own browser build (`markdown-it.min.js`, which sets `markdownit`), for replies;
 * - the page's script: the exarch modules it shares with Node (`inbox`, `pricing`,
 *   `viewer/model`: modules that import nothing but types) followed by the page's own files
 *   (src/watch/viewer/page/, plain scripts), joined in this order into one module script, so each file
 *   sees the names the earlier ones declare. `tsc -p tsconfig.viewer.json` (part of `npm run
 *   build`) type-checks them against the DOM and emits them to dist/viewer-page/.
 *
 * Joining files is all the bundling there is, so a file here must not import at run time: that is
 * checked as they are read, and a file that does is an error naming it.
 */
export interface PageScripts {
  /** A classic script that sets `markdownit`. */
  readonly markdown: string;
  /** The page's module script. */
  readonly app: string;
}

/** The files of the page's script, in order, relative to dist/viewer-page/. */
const PAGE_FILES = [
  'engine/inbox.js',
  'engine/pricing.js',
  'watch/viewer/model.js',
  'watch/viewer/page/format.js',
  'watch/viewer/page/markdown.js',
  'watch/viewer/page/runData.js',
  'watch/viewer/page/palette.js',
  'watch/viewer/page/timelineWindow.js',
  'watch/viewer/page/timeline.js',
  'watch/viewer/page/details.js',
  'watch/viewer/page/tree.js',
  'watch/viewer/page/search.js',
  'watch/viewer/page/live.js',
  'watch/viewer/page/main.js',
] as const;

/** The page script was not built, or a file of it cannot be inlined. */
export class PageScriptError extends ExarchError<'page-script'> {
  constructor(message: string) {
    super('page-script', message);
  }
}

let cached: PageScripts | undefined;

export function pageScripts(): PageScripts {
  cached ??= { markdown: inlineSafe('markdown-it.min.js', readMarkdownIt()), app: PAGE_FILES.map((file) => readPageFile(file)).join('\n') };
  return cached;
}

/**
 * dist/viewer-page/ beside the compiled dist/src/watch/viewer/, or, when this file runs from the
 * sources (the tests), under dist/ at the package root: `npm run build` makes it either way.
 */
function pageDir(): string {
  const candidates = ['../../../viewer-page/', '../../../dist/viewer-page/'].map((relative) => fileURLToPath(new URL(relative, import.meta.url)));
  const found = candidates.find((dir) => existsSync(`${dir}watch/viewer/page/main.js`));
  if (found === undefined) throw new PageScriptError(`the viewer's page script is not built (looked in ${candidates.join(' and ')}): run npm run build`);
  return found;
}

function readPageFile(file: string): string {
  const text = readFileSync(`${pageDir()}${file}`, 'utf8');
  // A file that imports at run time would make the page fetch, which it never does.
  if (/^\s*import[\s{*'"]|\bimport\s*\(|\brequire\s*\(/m.test(text))
    throw new PageScriptError(`${file}: the viewer's page script cannot import at run time (it is inlined as one script)`);
  return inlineSafe(file, text.replace(/^\/\/# sourceMappingURL=.*$/gm, ''));
}

function readMarkdownIt(): string {
  const require = createRequire(import.meta.url);
  return readFileSync(require.resolve('markdown-it/dist/markdown-it.min.js'), 'utf8').replace(/^\/\/# sourceMappingURL=.*$/gm, '');
}

/**
 * Script text that cannot end or confuse its `<script>` element: `</script` and `<!--` occur in
 * code only inside strings and regular expressions (markdown-it's HTML rules), where `<\/` and
 * `<\!` mean the same.
 */
export function inlineSafe(file: string, text: string): string {
  const safe = text.replace(/<\/(script)/gi, '<\\/$1').replace(/<!--/g, '<\\!--');
  if (/<\/script|<!--/i.test(safe)) throw new PageScriptError(`${file}: cannot be inlined in a <script> element`);
  return safe;
}
