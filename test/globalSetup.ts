import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Builds dist/ once before any test file runs: the CLI and package tests run the compiled
 * command, and test files building it concurrently would race on the same files.
 */
export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  // The package's own build script, as npm install runs it (it also makes the bin executable).
  const build = spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}${build.stderr}`);
}
