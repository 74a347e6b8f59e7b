import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // Tests and examples import the package by name, as users do, but run against the source.
    alias: [
      { find: /^exarch\/testing$/, replacement: fileURLToPath(new URL('./src/testing/index.ts', import.meta.url)) },
      { find: /^exarch\/otel$/, replacement: fileURLToPath(new URL('./src/watch/otel/otelExporter.ts', import.meta.url)) },
      { find: /^exarch\/postgres$/, replacement: fileURLToPath(new URL('./src/postgres.ts', import.meta.url)) },
      { find: /^exarch\/sqlite$/, replacement: fileURLToPath(new URL('./src/store/sqliteStore.ts', import.meta.url)) },
      { find: /^exarch$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/globalSetup.ts'],
    // A hang guard, not a speed check (speed goals live in bench/): CLI tests start many
    // processes, and under load (two suites at once on a busy machine) 30 s ran out.
    testTimeout: 120_000,
    // The same for hooks: removing an installed app's node_modules took over 10 s under load.
    hookTimeout: 120_000,
  },
});
