import { mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import ts from 'typescript';
import { CHECKED_LANGUAGES, type CodeBlock } from './markdownBlocks.js';

/**
 * The documented blocks as a user's own app: a temporary ES module project, one file per block,
 * where `exarch` is this package (a link to the repository, so its package.json `exports` lead to
 * the dist/ declarations a user compiles against) and the only other packages are those a user is
 * told to install: exarch's peers (xstate, zod), `@types/node`, and what an `npm install` in the
 * docs names. The blocks are compiled as one program, under the project's own strictness.
 */

/** The compiler options of a user's strict ES module app. */
export const USER_OPTIONS: ts.CompilerOptions = {
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  moduleDetection: ts.ModuleDetectionKind.Force,
  lib: ['lib.es2023.d.ts'],
  types: ['node'],
  strict: true,
  noUncheckedIndexedAccess: true,
  allowJs: true,
  checkJs: true,
  skipLibCheck: true,
};

/** One block placed in the project: its source file and the JavaScript it compiles to. */
interface PlacedBlock {
  readonly block: CodeBlock;
  readonly source: string;
  readonly output: string;
}

/** The compiled project: its directory, each block's place, and each problem as one line naming the Markdown line. */
export interface CompiledBlocks {
  readonly dir: string;
  readonly placed: PlacedBlock[];
  readonly errors: string[];
}

/** The packages an `npm install …` (or `npm i`, `npm add`) in `markdown` names, without versions or flags. */
function packagesInstalledBy(markdown: string): string[] {
  return [...markdown.matchAll(/\bnpm (?:install|i|add)\b([^`\n&|;#]*)/g)].flatMap((m) =>
    (m[1] ?? '')
      .trim()
      .split(/\s+/)
      .filter((word) => word !== '' && !word.startsWith('-') && /^(@[\w.-]+\/)?[\w.-]+(@.*)?$/.test(word))
      .map((word) => word.replace(/^(@?[^@]+)@.*$/, '$1')),
  );
}

/** Node's built-in modules, as a block names them: `node:fs`, `fs`, `fs/promises`. */
function isBuiltin(specifier: string): boolean {
  return specifier.startsWith('node:') || builtinModules.includes(specifier);
}

/** The package a bare import specifier names: `@scope/name/sub` → `@scope/name`. */
function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return (specifier.startsWith('@') ? parts.slice(0, 2) : parts.slice(0, 1)).join('/');
}

/**
 * A new ES module app under the system's temp directory whose node_modules holds this package (a
 * link to `root`), `@types/node` and `packages` (links to the repository's copies). Returns its directory.
 */
export function userApp(root: string, packages: readonly string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'exarch-docs-app-'));
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string };
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'docs-app', private: true, type: 'module' }));
  const link = (name: string, target: string): void => {
    mkdirSync(dirname(join(dir, 'node_modules', name)), { recursive: true });
    symlinkSync(target, join(dir, 'node_modules', name), 'dir');
  };
  link(manifest.name, root);
  for (const name of new Set([...packages, '@types/node'])) link(name, join(root, 'node_modules', name));
  return dir;
}

/**
 * Lays the complete blocks out as a project under the system's temp directory and compiles them.
 * `root` is the repository (it must hold dist/); `documents` maps each Markdown file to its text,
 * for the `npm install`s a block may rely on.
 */
export function compileBlocks(root: string, blocks: readonly CodeBlock[], documents: ReadonlyMap<string, string>): CompiledBlocks {
  const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; peerDependencies?: Record<string, string> };
  const peers = Object.keys(manifest.peerDependencies ?? {});
  const installedBy = new Map([...documents].map(([file, text]) => [file, new Set([...peers, ...packagesInstalledBy(text)])]));
  const everyInstalled = new Set([...installedBy.values()].flatMap((names) => [...names]).filter((name) => name !== manifest.name));

  const dir = userApp(root, [...everyInstalled]);

  const errors: string[] = [];
  const placed: PlacedBlock[] = [];
  for (const block of blocks) {
    const ext = CHECKED_LANGUAGES[block.lang];
    if (ext === undefined || block.marker?.kind === 'fragment') continue;
    const name = `${block.file.replace(/[^\w]+/g, '_')}_${block.index}`;
    const source = join(dir, 'src', `${name}.${ext}`);
    mkdirSync(dirname(source), { recursive: true });
    writeFileSync(source, block.code);
    placed.push({ block, source, output: join(dir, 'out', `${name}.${ext === 'ts' ? 'js' : 'mjs'}`) });
    // A block imports only what its page (or the README's install) tells a user to install.
    const allowed = new Set([manifest.name, ...(installedBy.get(block.file) ?? []), ...(installedBy.get('README.md') ?? [])]);
    for (const { fileName } of ts.preProcessFile(block.code, true, true).importedFiles) {
      if (fileName.startsWith('.') || isBuiltin(fileName) || allowed.has(packageOf(fileName))) continue;
      errors.push(`${where(block)}: imports '${fileName}', which no \`npm install\` on this page or in the README installs`);
    }
  }

  const program = ts.createProgram(
    placed.map((p) => p.source),
    { ...USER_OPTIONS, rootDir: join(dir, 'src'), outDir: join(dir, 'out'), typeRoots: [join(dir, 'node_modules/@types')] },
  );
  const emitted = program.emit();
  const bySource = new Map(placed.map((p) => [p.source, p.block]));
  for (const diagnostic of [...ts.getPreEmitDiagnostics(program), ...emitted.diagnostics]) {
    const block = diagnostic.file ? bySource.get(diagnostic.file.fileName) : undefined;
    const text = ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n  ');
    if (!block || !diagnostic.file || diagnostic.start === undefined) {
      errors.push(`${diagnostic.file?.fileName ?? '(no file)'}: TS${diagnostic.code}: ${text}`);
      continue;
    }
    const { line } = diagnostic.file.getLineAndCharacterOfPosition(diagnostic.start);
    errors.push(`${block.file}:${block.line + 1 + line} (block ${block.index}): TS${diagnostic.code}: ${text}`);
  }
  // By file and line, as a person reads them.
  errors.sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  return { dir, placed, errors };
}

/** A block as a person finds it: `docs/tools.md:13 (block 1)`. */
export function where(block: CodeBlock): string {
  return `${block.file}:${block.line} (block ${block.index})`;
}
