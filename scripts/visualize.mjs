// `npm run visualize`: writes the session machine's statechart into visualizations/ as Mermaid,
// SVG and JSON. Runs against dist/ (the npm script builds first). test/unit/watch/visualizations.test.ts
// fails when the committed files no longer match the machine.
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { visualizationFiles } from '../dist/src/watch/statechart/visualize.js';

const dir = fileURLToPath(new URL('../visualizations/', import.meta.url));
mkdirSync(dir, { recursive: true });
for (const [name, text] of Object.entries(visualizationFiles())) {
  const path = `${dir}${name}`;
  let old = null;
  try {
    old = readFileSync(path, 'utf8');
  } catch {}
  writeFileSync(path, text);
  console.log(`${old === text ? 'unchanged' : 'wrote    '} visualizations/${name}`);
}
