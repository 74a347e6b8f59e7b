import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { importsOf, sourcesUnder } from '../../support/importGraph.js';

/**
 * The layers of the house, lowest first: a file may import from its own folder and from the folders
 * of layers below it, never above. docs/architecture.md says what each holds; a new folder must be
 * placed here before it can hold code (an unplaced folder fails like an upward import).
 */
const LAYERS: readonly string[] = [
  'src/engine', // ground: types, errors, render, history, inbox, budgets, journal record types, redaction
  'src/tools', // tool definitions and the tool batch; workspace and MCP tools
  'src/store', // the journal and the run stores (memory, SQLite, Postgres); restoring a run's context
  'src/replay', // recorded model exchanges: their format and the recorder
  'src/providers', // the model providers: Claude, and the replay of a recording
  'src/testing', // the scripted provider (exarch/testing)
  'src/session', // what the machine drives: options, agent profiles, effects, the recorder, delta taps
  'machines', // the session machine and its crew: orchestration only, no I/O
  'src/run', // the hosts of a run: the runtime, the durable run
  'src/watch', // what watches a run: observe, trace, viewer, OTel, inspector, statecharts
  'src/workers', // runs spread over Postgres workers
  'src/cli', // the exarch command
  'src', // the package's entry points (index.ts, postgres.ts, workspace.ts)
];

const root = fileURLToPath(new URL('../../..', import.meta.url));

/** The layer a file belongs to: the longest listed folder that holds it. */
function layerOf(file: string, base: string, layers: readonly string[]): string | undefined {
  const path = relative(base, file).split(sep).join('/');
  return layers
    .filter((layer) => path.startsWith(`${layer}/`))
    .sort((a, b) => b.length - a.length)
    .at(0);
}

/** Every import (static, type-only or dynamic) that runs up a layer, or from or into an unplaced file, as one line each. */
function upwardImports(base: string, tops: readonly string[], layers: readonly string[]): string[] {
  const files = tops.flatMap((top) => sourcesUnder(join(base, top)));
  const rank = (file: string): number => {
    const layer = layerOf(file, base, layers);
    return layer === undefined ? -1 : layers.indexOf(layer);
  };
  const found: string[] = [];
  for (const [file, imports] of importsOf(files, { dynamic: true })) {
    const from = relative(base, file).split(sep).join('/');
    if (rank(file) < 0) {
      found.push(`${from}: in no layer`);
      continue;
    }
    for (const { target, line } of imports) {
      const to = relative(base, target).split(sep).join('/');
      if (rank(target) < 0) found.push(`${from}:${line} imports ${to}, which is in no layer`);
      else if (rank(target) > rank(file))
        found.push(`${from}:${line} imports ${to}: ${layerOf(file, base, layers)} may not import from ${layerOf(target, base, layers)}, a layer above it`);
    }
  }
  return found.sort();
}

describe('layers', () => {
  const scratch = mkdtempSync(join(tmpdir(), 'exarch-layers-'));
  afterAll(() => rmSync(scratch, { recursive: true, force: true }));

  it('are checked: an upward import, a dynamic one, a type-only one and a file in no layer are each named', () => {
    const write = (name: string, text: string): void => {
      mkdirSync(dirname(join(scratch, name)), { recursive: true });
      writeFileSync(join(scratch, name), text);
    };
    write('low/a.ts', "import { b } from '../high/b.js';\nexport const a = b;\n");
    write('low/deep/c.ts', "export const c = 1;\nexport async function load() {\n  return import('../../high/b.js');\n}\n");
    write('low/d.ts', "import type { B } from '../high/b.js';\nexport type D = B;\n");
    write('high/b.ts', "import { c } from '../low/deep/c.js';\nimport { z } from 'zod';\nexport const b = [c, z];\nexport type B = number;\n");
    write('high/sub/e.ts', "import { b } from '../b.js';\nexport const e = b;\n");
    write('stray/f.ts', 'export const f = 1;\n');
    write('low/g.ts', "import { f } from '../stray/f.js';\nexport const g = f;\n");
    expect(upwardImports(scratch, ['low', 'high', 'stray'], ['low', 'high'])).toEqual([
      'low/a.ts:1 imports high/b.ts: low may not import from high, a layer above it',
      'low/d.ts:1 imports high/b.ts: low may not import from high, a layer above it',
      'low/deep/c.ts:3 imports high/b.ts: low may not import from high, a layer above it',
      'low/g.ts:1 imports stray/f.ts, which is in no layer',
      'stray/f.ts: in no layer',
    ]);
  });

  it('hold in machines/ and src/: no import runs up a layer', () => {
    // The walk saw the imports that matter (else nothing would be found for want of edges).
    const graph = importsOf([join(root, 'src', 'run', 'runtime.ts')]);
    expect(graph.get(join(root, 'src', 'run', 'runtime.ts'))?.map((found) => found.target)).toContain(join(root, 'machines', 'session.ts'));
    expect(upwardImports(root, ['machines', 'src'], LAYERS)).toEqual([]);
  });

  it('place every folder of src/ (a new one must be given a layer)', () => {
    const folders = readdirSync(join(root, 'src'), { withFileTypes: true })
      .filter((entry) => entry.isDirectory())
      .map((entry) => `src/${entry.name}`);
    expect(folders.filter((folder) => !LAYERS.includes(folder))).toEqual([]);
  });
});
