#!/usr/bin/env node
// `npm run release:check`: what `npm publish` would ship, checked before anyone publishes it. It
// builds dist/, packs the tarball as npm would, prints its files and size, refuses files that must
// not ship (sources, tests, build caches) and entry points that would be missing, then lints that very
// tarball with publint and Are the Types Wrong. Exit 0 only when all of it holds.
//
//   node scripts/releaseCheck.mjs [--no-build] [--files]
//     --no-build  pack dist/ as it is (the package test has just built it)
//     --files     list every file of the tarball, not only a count per folder
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { publint } from 'publint';
import { formatMessage } from 'publint/utils';

const root = fileURLToPath(new URL('..', import.meta.url));
const args = new Set(process.argv.slice(2));
for (const arg of args) {
  if (arg !== '--no-build' && arg !== '--files') {
    console.error(`release:check: unknown option ${arg} (--no-build, --files)`);
    process.exit(2);
  }
}

/** The packed tarball must stay below this; a jump past it is a file that should not ship. */
const MAX_PACKED_BYTES = 3 * 1024 * 1024;
/** What must never ship: sources, tests, benchmarks (but their results), caches, local state. */
const FORBIDDEN = [
  /^(src|machines|test|examples|scripts|\.ci|\.github|node_modules)\//,
  /^bench\/(?!RESULTS\.md$)/,
  /^dist\/(test|bench|examples)\//,
  /\.tsbuildinfo$/,
  // Source maps name sources that do not ship: a map without its source only misleads a debugger.
  /\.map$/,
  /(^|\/)\.exarch\//,
  /(^|\/)\.env/,
];

function run(command, commandArgs, what) {
  const result = spawnSync(command, commandArgs, { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  return { ...result, ok: result.status === 0, what };
}

const problems = [];
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'));

if (!args.has('--no-build')) {
  const build = run('npm', ['run', 'build', '--silent'], 'build');
  if (!build.ok) {
    console.error(`release:check: the build failed\n${build.stdout}${build.stderr}`);
    process.exit(1);
  }
}

const destination = mkdtempSync(join(tmpdir(), 'exarch-release-'));
try {
  // --ignore-scripts: prepack would build again; the build above (or the caller's) is current.
  const pack = run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', destination], 'npm pack');
  if (!pack.ok) {
    console.error(`release:check: npm pack failed\n${pack.stderr}`);
    process.exit(1);
  }
  const [packed] = JSON.parse(pack.stdout);
  const files = packed.files.map((file) => file.path);
  const tarball = join(destination, packed.filename);

  console.log(`${packed.filename}: ${packed.entryCount} files, ${kilobytes(packed.size)} packed, ${kilobytes(packed.unpackedSize)} unpacked`);
  if (args.has('--files')) for (const file of packed.files) console.log(`  ${file.path} ${kilobytes(file.size)}`);
  else
    for (const [folder, { count, bytes }] of byFolder(packed.files))
      console.log(`  ${folder.padEnd(20)} ${String(count).padStart(4)} files ${kilobytes(bytes).padStart(10)}`);

  if (packed.size > MAX_PACKED_BYTES) problems.push(`the tarball is ${kilobytes(packed.size)}, over the ${kilobytes(MAX_PACKED_BYTES)} this check allows`);
  for (const file of files) if (FORBIDDEN.some((pattern) => pattern.test(file))) problems.push(`${file} must not ship`);
  for (const needed of entryFiles(manifest)) if (!files.includes(needed)) problems.push(`${needed} (named in package.json) is not in the tarball`);
  for (const needed of ['package.json', 'README.md', 'LICENSE']) if (!files.includes(needed)) problems.push(`${needed} is not in the tarball`);

  // publint: package.json against the files that ship (exports, types, bin, engines, licence),
  // read from the tarball itself; strict: a warning fails the check as an error does.
  const bytes = readFileSync(tarball);
  const linted = await publint({
    pack: { tarball: bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) },
    strict: true,
    level: 'suggestion',
  });
  const lines = linted.messages.map((message) => `${message.type}: ${formatMessage(message, linted.pkg) ?? message.code}`);
  report({
    what: 'publint',
    ok: !linted.messages.some((message) => message.type !== 'suggestion'),
    stdout: lines.join('\n') || 'no problem found',
    stderr: '',
  });
  // Are the Types Wrong: every entry point's types resolve as TypeScript resolves them in an app.
  // esm-only: exarch is an ES module package (no `require` condition); no @types lookup, which
  // would need the registry, for a package that ships its own declarations.
  const attwPackage = createRequire(import.meta.url).resolve('@arethetypeswrong/cli/package.json');
  const attwBin = join(dirname(attwPackage), JSON.parse(readFileSync(attwPackage, 'utf8')).bin.attw);
  const attw = run(
    process.execPath,
    [attwBin, tarball, '--profile', 'esm-only', '--no-definitely-typed', '--format', 'table-flipped', '--no-emoji', '--no-color'],
    'attw',
  );
  report(attw);
} finally {
  rmSync(destination, { recursive: true, force: true });
}

if (problems.length > 0) {
  for (const problem of problems) console.error(`release:check: ${problem}`);
  process.exit(1);
}
console.log('release:check: the package is ready to publish');

function report(step) {
  const out = `${step.stdout}${step.stderr}`.trim();
  console.log(`\n${step.what}: ${step.ok ? 'passed' : 'FAILED'}`);
  if (out) console.log(out.replace(/^/gm, '  '));
  if (!step.ok) problems.push(`${step.what} found problems (above)`);
}

/** Every file package.json points a user at: main, types, bin, and each export's conditions. */
function entryFiles(pkg) {
  const targets = [pkg.main, pkg.types, ...Object.values(pkg.bin ?? {})];
  const walk = (value) => {
    if (typeof value === 'string') targets.push(value);
    else if (value && typeof value === 'object') for (const inner of Object.values(value)) walk(inner);
  };
  walk(pkg.exports);
  return [...new Set(targets.filter(Boolean).map((target) => target.replace(/^\.\//, '')))];
}

function byFolder(files) {
  const folders = new Map();
  for (const file of files) {
    const parts = file.path.split('/');
    const folder = parts.length === 1 ? '(top)' : parts[0] === 'dist' && parts.length > 2 ? `dist/${parts[1]}` : parts[0];
    const entry = folders.get(folder) ?? { count: 0, bytes: 0 };
    entry.count += 1;
    entry.bytes += file.size;
    folders.set(folder, entry);
  }
  return [...folders].sort(([a], [b]) => a.localeCompare(b));
}

function kilobytes(bytes) {
  return `${(bytes / 1024).toFixed(1)} kB`;
}
