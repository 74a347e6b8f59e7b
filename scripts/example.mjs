#!/usr/bin/env node
// `npm run example [-- NAME...]`: runs the compiled examples (dist/examples, built by the npm
// script just before) with plain Node, each importing the package by name as an app would.
// Without a name every example runs, in name order; the first that fails stops the rest.
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const available = readdirSync(new URL('../examples/', import.meta.url))
  .filter((file) => file.endsWith('.ts'))
  .map((file) => file.slice(0, -'.ts'.length))
  .sort();

// `durable-run`, `durable-run.ts` and `examples/durable-run.ts` all name the same example.
const wanted = process.argv.slice(2).map((arg) => arg.replace(/^(\.\/)?examples\//, '').replace(/\.[jt]s$/, ''));
const unknown = wanted.filter((name) => !available.includes(name));
if (unknown.length > 0) {
  process.stderr.write(`npm run example: no example named ${unknown.map((n) => JSON.stringify(n)).join(', ')}; there are: ${available.join(', ')}\n`);
  process.exit(2);
}

for (const name of wanted.length > 0 ? wanted : available) {
  process.stderr.write(`\n▶ examples/${name}.ts\n`);
  const run = spawnSync(process.execPath, [`dist/examples/${name}.js`], { cwd: root, stdio: 'inherit' });
  if (run.status !== 0) {
    process.stderr.write(`npm run example: examples/${name}.ts ${run.signal ? `was killed by ${run.signal}` : `exited with ${run.status}`}\n`);
    process.exit(run.status ?? 1);
  }
}
