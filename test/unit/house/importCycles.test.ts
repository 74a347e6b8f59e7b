import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { importsOf, sourcesUnder } from '../../support/importGraph.js';

/**
 * No module of machines/ or src/ reaches itself through its relative imports. Type-only imports
 * count: machines/session.ts ↔ crew.ts was such a cycle, closed at run time by a mutation when
 * session.ts loaded. TypeScript's own parser reads the imports; the cycles are the strongly
 * connected components of that graph (Tarjan).
 */

const root = fileURLToPath(new URL('../../..', import.meta.url));

/** Each file's static relative imports and re-exports (`import type` too), as absolute .ts paths. */
function importGraph(files: readonly string[]): Map<string, string[]> {
  return new Map([...importsOf(files)].map(([file, imports]) => [file, imports.map((found) => found.target)]));
}

/** The graph's cycles: its strongly connected components of more than one file, or a file importing itself. */
function cycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const found: string[][] = [];
  const visit = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file) as number);
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (!index.has(next)) visit(next);
      if (stack.includes(next)) low.set(file, Math.min(low.get(file) as number, low.get(next) as number));
    }
    if (low.get(file) !== index.get(file)) return;
    const component = stack.splice(stack.indexOf(file));
    if (component.length > 1 || graph.get(file)?.includes(file)) found.push(component.sort());
  };
  for (const file of graph.keys()) if (!index.has(file)) visit(file);
  return found;
}

describe('import cycles', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'exarch-cycles-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('are found: a type-only import that closes a loop through a folder, a file importing itself', () => {
    const write = (name: string, text: string): void => {
      mkdirSync(dirname(join(scratch, name)), { recursive: true });
      writeFileSync(join(scratch, name), text);
    };
    write('a.ts', "import { b } from './sub/b.js';\nexport const a = b;\n");
    write('sub/b.ts', "import type { C } from '../c.js';\nexport const b = 1 as unknown as C;\n");
    write('c.ts', "export { a as C } from './a.js';\n");
    write('d.ts', "import { a } from './a.js';\nexport * from './d.js';\nexport const d = a;\n");
    write('e.ts', "import { d } from './d.js';\nimport { z } from 'zod';\nexport const e = [d, z];\n");
    const found = cycles(importGraph(sourcesUnder(scratch))).map((cycle) => cycle.map((file) => relative(scratch, file)));
    expect(found.sort()).toEqual([['a.ts', 'c.ts', join('sub', 'b.ts')], ['d.ts']]);
  });

  it('there are none in machines/ and src/', () => {
    const files = [...sourcesUnder(join(root, 'machines')), ...sourcesUnder(join(root, 'src'))];
    const graph = importGraph(files);
    // The walk saw the imports that matter (else no cycle would be found for want of edges).
    expect(graph.get(join(root, 'machines', 'session.ts'))).toContain(join(root, 'machines', 'crew.ts'));
    expect(cycles(graph).map((cycle) => cycle.map((file) => relative(root, file)).join(' → '))).toEqual([]);
  });
});
