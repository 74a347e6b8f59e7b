import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // Tests and examples import the package by name, as users do, but run against the source.
    alias: [
      { find: /^exarch\/testing$/, replacement: fileURLToPath(new URL('./src/testing/index.ts', import.meta.url)) },
      { find: /^exarch\/sqlite$/, replacement: fileURLToPath(new URL('./src/store/sqliteStore.ts', import.meta.url)) },
      { find: /^exarch$/, replacement: fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
    ],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/globalSetup.ts'],
    testTimeout: 30_000,
  },
});
