import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * Builds dist/ once before any test file runs: the CLI and package tests run the compiled
 * command, and test files building it concurrently would race on the same files.
 */
export default function setup(): void {
  const root = fileURLToPath(new URL('..', import.meta.url));
  const build = spawnSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: root, encoding: 'utf8' });
  if (build.status !== 0) throw new Error(`build failed:\n${build.stdout}${build.stderr}`);
}
