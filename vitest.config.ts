import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // Tests and examples import the package by name, as users do, but run against the source.
    alias: [
      { find: /^exarch\/testing$/, replacement: fileURLToPath(new URL('./src/testing/index.ts', import.meta.url)) },
      { find: /^exarch\/otel$/, replacement: fileURLToPath(new URL('./src/watch/otel/otelExporter.ts', import.meta.url)) },
      { find: /^exarch\/postgres$/, replacement: fileURLToPath(new URL('./src/postgres.ts', import.meta.url)) },
      { find: /^exarch\/workspace$/, replacement: fileURLToPath(new URL('./src/workspace.ts', import.meta.url)) },
      { find: /^exarch\/sqlite$/, replacement: fileURLToPath(new URL('./src/store/sqliteStore.ts', import.meta.url)) },
      { find: /^exarch$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
    ],
  },
  test: {
    // A hang guard, not a speed check (speed goals live in bench/): CLI tests start many
    // processes, and under load (two suites at once on a busy machine) 30 s ran out.
    testTimeout: 120_000,
    // The same for hooks: removing an installed app's node_modules took over 10 s under load.
    hookTimeout: 120_000,
    // By speed (docs/testing.md says which to run when). `npm test` runs all three;
    // `npm run test:fast` only `unit`, which needs no build.
    projects: [
      // In-process: the library driven from its source, no dist/, no server, no browser.
      { extends: true, test: { name: 'unit', include: ['test/unit/**/*.test.ts'] } },
      // Paths generated from the machine and random inputs: thorough, slower.
      { extends: true, test: { name: 'property', include: ['test/property/**/*.test.ts'] } },
      // The compiled CLI and package, real Postgres, chromium, bubblewrap and child processes:
      // dist/ is built once before the first of them runs.
      { extends: true, test: { name: 'e2e', include: ['test/e2e/**/*.test.ts'], globalSetup: ['test/globalSetup.ts'] } },
    ],
  },
});
