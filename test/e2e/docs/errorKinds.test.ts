import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { USER_OPTIONS, userApp } from '../../support/blockProject.js';

/**
 * docs/library.md's table of errors is the package's: every class an entry point exports that
 * derives from `ExarchError`, where it is imported from, and exactly the kinds its `kind` type
 * allows — read from the built declarations (dist/, as a user compiles against them) with the
 * compiler, never from the table.
 */

const root = fileURLToPath(new URL('../../..', import.meta.url));
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name: string; exports: Record<string, unknown> };
const entries = Object.keys(manifest.exports)
  .filter((key) => key !== './package.json')
  .map((key) => (key === '.' ? manifest.name : `${manifest.name}/${key.slice(2)}`));

interface Documented {
  readonly from: string[];
  readonly kinds: string[];
}

/** Each exported error class, by name: the entry points exporting it and its kinds, sorted. */
function errorClassesOfPackage(app: string): Record<string, Documented> {
  const probe = join(app, 'probe.ts');
  writeFileSync(probe, entries.map((entry, k) => `export * as e${k} from '${entry}';`).join('\n'));
  const program = ts.createProgram([probe], { ...USER_OPTIONS, noEmit: true, typeRoots: [join(app, 'node_modules/@types')] });
  const checker = program.getTypeChecker();
  const source = program.getSourceFile(probe);
  const found: Record<string, { from: Set<string>; kinds: Set<string> }> = {};
  for (const statement of source?.statements ?? []) {
    if (!ts.isExportDeclaration(statement) || !statement.moduleSpecifier || !ts.isStringLiteral(statement.moduleSpecifier)) continue;
    const module = checker.getSymbolAtLocation(statement.moduleSpecifier);
    expect(module, `${statement.moduleSpecifier.text} does not resolve`).toBeDefined();
    for (const exported of module ? checker.getExportsOfModule(module) : []) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      if (!(symbol.flags & ts.SymbolFlags.Class)) continue;
      const instance = checker.getDeclaredTypeOfSymbol(symbol);
      if (!derivesFromExarchError(checker, instance)) continue;
      const kind = checker.getPropertyOfType(instance, 'kind');
      const kindType = kind ? checker.getTypeOfSymbol(kind) : undefined;
      const literals = (kindType?.isUnion() ? kindType.types : kindType ? [kindType] : []).map((t) =>
        t.isStringLiteral() ? t.value : checker.typeToString(t),
      );
      const entry = (found[exported.name] ??= { from: new Set(), kinds: new Set() });
      entry.from.add(statement.moduleSpecifier.text);
      for (const literal of literals) entry.kinds.add(literal);
    }
  }
  return Object.fromEntries(Object.entries(found).map(([name, { from, kinds }]) => [name, { from: [...from].sort(), kinds: [...kinds].sort() }]));
}

function derivesFromExarchError(checker: ts.TypeChecker, type: ts.Type): boolean {
  if (!type.isClassOrInterface()) return false;
  return checker.getBaseTypes(type).some((base) => base.symbol?.name === 'ExarchError' || derivesFromExarchError(checker, base));
}

/**
 * The table under `## Errors` in docs/library.md: a row per class, its entry points and its kinds
 * as code spans (what a cell adds in parentheses is commentary, not a kind).
 */
function errorTableOfDocs(): Record<string, Documented> {
  const page = readFileSync(join(root, 'docs/library.md'), 'utf8');
  const section = page.slice(page.indexOf('\n## Errors\n')).split(/\n## /)[1] ?? '';
  const spans = (cell: string): string[] => [...cell.replace(/\([^)]*\)/g, '').matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
  const rows = section
    .split('\n')
    .filter((line) => /^\|\s*`/.test(line))
    .map((line) => line.split('|').map((cell) => cell.trim()));
  return Object.fromEntries(
    rows.map(([, name = '', from = '', kinds = '']) => [spans(name)[0] ?? '', { from: spans(from).sort(), kinds: spans(kinds).sort() }]),
  );
}

describe('the errors docs/library.md lists', () => {
  const app = userApp(root, []);
  afterAll(() => rmSync(app, { recursive: true, force: true }));

  it('are the package’s exported error classes, each with exactly the kinds its type allows', () => {
    const documented = errorTableOfDocs();
    expect(Object.keys(documented).length, 'docs/library.md has no table under "## Errors"').toBeGreaterThan(0);
    expect(documented).toEqual(errorClassesOfPackage(app));
  }, 60_000);
});
