import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import ts from 'typescript';

/** The TypeScript files under a folder (declaration files left out), as absolute paths. */
export function sourcesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts'))
    .map((entry) => join(entry.parentPath, entry.name));
}

/** One relative import of a file: where it points (an absolute .ts path) and the line it is on. */
export interface Import {
  readonly target: string;
  readonly line: number;
}

/**
 * Each file's relative imports and re-exports (`import type` too), read by TypeScript's own parser.
 * With `dynamic`, `import('…')` calls and `import('…')` types anywhere in the file count as well:
 * they load (or name) the module all the same, only later.
 */
export function importsOf(files: readonly string[], options: { dynamic?: boolean } = {}): Map<string, Import[]> {
  const graph = new Map<string, Import[]>();
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const found: Import[] = [];
    const add = (specifier: ts.Node | undefined): void => {
      if (!specifier || !ts.isStringLiteral(specifier) || !specifier.text.startsWith('.')) return;
      const line = source.getLineAndCharacterOfPosition(specifier.getStart(source)).line + 1;
      found.push({ target: resolve(dirname(file), specifier.text.replace(/\.js$/, '.ts')), line });
    };
    for (const statement of source.statements) {
      if (ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement)) add(statement.moduleSpecifier);
    }
    if (options.dynamic) {
      const visit = (node: ts.Node): void => {
        if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) add(node.arguments[0]);
        if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) add(node.argument.literal);
        ts.forEachChild(node, visit);
      };
      visit(source);
    }
    graph.set(file, found);
  }
  return graph;
}
