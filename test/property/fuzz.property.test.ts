import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { runScenario, scenarioArb, type Scenario } from '../support/fuzzScenario.js';

/**
 * Property-based fuzzing of the session protocol (issue 5): random agent trees, random model
 * behaviour, random instants of cancellation; every invariant checked on every run
 * (test/support/fuzzScenario.ts). `npm test` runs 1,000 seeded runs; `npm run fuzz` runs
 * FUZZ_RUNS (default 100,000). A failure prints its seed, its path and the shrunk scenario;
 * replay it with FUZZ_SEED=<seed> FUZZ_PATH=<path>, then keep it in test/unit/session/regressions.test.ts.
 */

const runs = Number(process.env['FUZZ_RUNS'] ?? 1_000);
const seed = process.env['FUZZ_SEED'] === undefined ? undefined : Number(process.env['FUZZ_SEED']);
const path = process.env['FUZZ_PATH'];

describe('fuzz: random agent trees and model behaviour keep the protocol invariants', () => {
  it(
    `${runs.toLocaleString('en')} seeded runs`,
    async () => {
      const started = Date.now();
      let done = 0;
      await fc.assert(
        fc.asyncProperty(scenarioArb, async (scenario: Scenario) => {
          const report = await runScenario(scenario);
          done += 1;
          if (runs >= 10_000 && done % 1_000 === 0) console.log(`fuzz: ${done} runs in ${Math.round((Date.now() - started) / 1000)} s`);
          if (report.violations.length > 0)
            throw new Error(
              `${report.violations.length} violations:\n- ${report.violations.slice(0, 12).join('\n- ')}\nfinal states: ${JSON.stringify(report.finals)}`,
            );
        }),
        { numRuns: runs, ...(seed === undefined ? {} : { seed }), ...(path === undefined ? {} : { path }) },
      );
      console.log(`fuzz: ${runs} runs passed in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      expect(done).toBeGreaterThanOrEqual(runs);
    },
    Math.max(120_000, runs * 200),
  );
});
