import { z } from 'zod';
import { sleep } from '../engine/model/streamModel.js';
import { defineTool, type Tool } from '../tools/defineTool.js';
import type { ScriptedProviderOptions, ScriptedStep } from '../testing/scriptedProvider.js';
import type { Message, ModelRequest } from '../engine/types.js';

/**
 * The scripted conversation `exarch demo` plays: the incident of the reply-tool design record.
 *
 * A root agent delegates "map this project's testing setup" to `explorer`. The explorer looks
 * around, then — in ONE response — calls `reply` with a 3354-character brief, makes one more
 * tool call, and signs off in 396 characters of prose. Under the old positional contract the
 * parent got the sign-off (the last prose after the last tool call); under exarch it gets the
 * `reply` argument. A second sub-agent, `reviewer`, stops without replying, is reminded once,
 * and then replies with a JSON object, which reaches its parent pretty-printed.
 *
 * Everything here is fixture: the project ("tidepool"), its files, and what each model says.
 */

/** What the user asks the root. */
export const USER_TASK = "Map this project's testing setup for me, and check whether CI really runs all of it.";

const EXPLORER_TASK =
  "Map this project's testing setup: the test layers and their runners, configuration, fixtures and helpers, " +
  'coverage, and what CI runs. Reply with a markdown brief a new contributor could work from.';

const REVIEWER_TASK =
  'Review .github/workflows/ci.yml against package.json: which test layers does CI run, and when is one skipped? ' +
  'Reply with your findings as a JSON object.';

/** The explorer's report: the value it hands its parent through `reply`. Real newlines, markdown. */
export const EXPLORER_BRIEF = [
  '# Testing setup: tidepool',
  '',
  '## Summary',
  'tidepool is a TypeScript HTTP service (Node 20, ESM) with three test layers: unit tests on Vitest, integration tests on Vitest against a real Postgres started by Testcontainers, and browser end-to-end tests on Playwright. `npm test` runs only the unit layer; CI runs all three.',
  '',
  '## Layers',
  '| layer | runner | where | command |',
  '|---|---|---|---|',
  '| unit | Vitest (`unit` project) | `src/**/*.test.ts`, colocated | `npm run test:unit` |',
  '| integration | Vitest (`integration` project) | `test/integration/**/*.int.test.ts` | `npm run test:int` |',
  '| e2e | Playwright | `e2e/**/*.spec.ts` | `npm run test:e2e` |',
  '',
  '## Configuration',
  "- `vitest.config.ts` defines two `projects`. `unit` runs in the `node` environment with `pool: 'threads'` and a 5 s timeout. `integration` uses `pool: 'forks'` with `singleFork: true`, so its files run one at a time against one database, with a 30 s timeout.",
  '- `test/setup/globalSetup.ts` starts `postgres:16-alpine` with Testcontainers, runs the migrations in `db/migrations/` and hands `DATABASE_URL` to the workers. Set `TIDEPOOL_TEST_DB` to reuse a running database instead; `docker-compose.test.yml` starts one on port 54329.',
  '- `test/setup/db.ts` wraps every integration test in a transaction that is rolled back in `afterEach`; tests that need real commits call `withCommittedTx()` and clean up by hand.',
  '- `playwright.config.ts` starts the app with `npm run start:test` on port 4173 and runs Chromium only in CI (all three browsers locally), with `retries: 2` in CI.',
  '',
  '## Fixtures and helpers',
  '- `test/fixtures/` holds JSON payloads (orders, customers, webhook bodies), loaded with `loadFixture(name)`.',
  "- `test/factories.ts` builds domain objects with overridable defaults, e.g. `makeOrder({ status: 'paid' })`.",
  "- Calls to the payment provider are stubbed with `msw` handlers in `test/mocks/handlers.ts`; an unhandled request fails the test (`onUnhandledRequest: 'error'`).",
  '- Unit tests freeze time with `vi.useFakeTimers()`; integration tests use real time.',
  '',
  '## Coverage',
  'V8 coverage through `@vitest/coverage-v8`, unit project only. Thresholds: 80% lines, 75% branches, 80% functions, enforced only when `CI=true`; locally `npm run coverage` reports without failing.',
  '',
  '## CI (`.github/workflows/ci.yml`)',
  'Three jobs on `ubuntu-latest` with Node 20: `unit` (uploads coverage), `integration` (the runner has Docker, so Testcontainers needs no service block) and `e2e`, which `needs: [unit]` and is skipped for pull requests from forks because it needs the `E2E_STRIPE_KEY` secret.',
  '',
  '## Gaps and risks',
  '1. The integration layer is not part of `npm test`, so contributors rarely run it before pushing.',
  '2. Coverage ignores the integration layer, so the repository code in `src/db/` shows only 41% although integration tests exercise it.',
  '3. The e2e job never runs for fork PRs: checkout regressions from outside contributors surface only after merge.',
  '4. `singleFork` makes the integration layer slow (about 3 minutes); with the rollback helper, parallel forks with one schema each would be safe.',
  '5. Two unit tests in `src/billing/retry.test.ts` use real timers and are flaky under load.',
  '',
  '## Run everything locally',
  '```sh',
  'docker compose -f docker-compose.test.yml up -d',
  'export TIDEPOOL_TEST_DB=postgres://test:test@localhost:54329/tidepool',
  'npm run test:unit && npm run test:int && npm run test:e2e',
  '```',
].join('\n');

/**
 * The explorer's wrap-up, streamed as prose after its last tool call. It reads like an answer
 * but holds none of the map — which is exactly what a positional contract would hand up.
 */
export const EXPLORER_SIGN_OFF =
  'That’s the whole map of the testing setup: three layers, how each is configured, what CI runs and ' +
  'the five gaps worth fixing first. I opened vitest.config.ts one last time to double-check the ' +
  'coverage thresholds, and they match what I wrote above. If it helps, I can look next at why the e2e ' +
  'job skips fork PRs, or at the two flaky retry tests. Just let me know which one you want me to dig ' +
  'into.';

// The demo's whole point is these two lengths (the incident's numbers); a wording edit must not
// silently change them.
assertLength('EXPLORER_BRIEF', EXPLORER_BRIEF, 3354);
assertLength('EXPLORER_SIGN_OFF', EXPLORER_SIGN_OFF, 396);

function assertLength(name: string, value: string, expected: number): void {
  if (value.length !== expected) throw new Error(`demo fixture: ${name} must be ${expected} characters, is ${value.length}`);
}

/** The reviewer's findings: an object, so the parent receives it pretty-printed. */
const REVIEW_FINDINGS = {
  verdict: 'CI runs every test layer, but not for every contributor',
  jobs: {
    unit: 'every push and pull request; uploads coverage',
    integration: 'every push and pull request; Postgres via Testcontainers',
    e2e: 'skipped for pull requests from forks (needs the E2E_STRIPE_KEY secret)',
  },
  findings: [
    {
      severity: 'high',
      file: '.github/workflows/ci.yml',
      line: 8,
      issue: 'e2e is skipped for fork PRs, so checkout changes from outside contributors merge untested',
    },
    {
      severity: 'medium',
      file: 'vitest.config.ts',
      line: 22,
      issue: 'coverage thresholds apply to the unit project only; the integration layer never counts',
    },
  ],
} as const;

/** The fixture project the demo tools read: path → content. */
const PROJECT_FILES: Readonly<Record<string, string>> = {
  'package.json': [
    '{',
    '  "name": "tidepool",',
    '  "type": "module",',
    '  "scripts": {',
    '    "start:test": "node dist/server.js --port 4173",',
    '    "test": "vitest run --project unit",',
    '    "test:unit": "vitest run --project unit",',
    '    "test:int": "vitest run --project integration",',
    '    "test:e2e": "playwright test",',
    '    "coverage": "vitest run --project unit --coverage"',
    '  }',
    '}',
  ].join('\n'),
  'vitest.config.ts': [
    "import { defineConfig } from 'vitest/config';",
    '',
    'export default defineConfig({',
    '  test: {',
    '    projects: [',
    "      { test: { name: 'unit', include: ['src/**/*.test.ts'], environment: 'node', pool: 'threads', testTimeout: 5_000 } },",
    '      {',
    '        test: {',
    "          name: 'integration',",
    "          include: ['test/integration/**/*.int.test.ts'],",
    "          globalSetup: ['test/setup/globalSetup.ts'],",
    "          setupFiles: ['test/setup/db.ts'],",
    "          pool: 'forks',",
    '          poolOptions: { forks: { singleFork: true } },',
    '          testTimeout: 30_000,',
    '        },',
    '      },',
    '    ],',
    '    coverage: {',
    "      provider: 'v8',",
    "      include: ['src/**'],",
    "      thresholds: process.env.CI === 'true' ? { lines: 80, branches: 75, functions: 80 } : undefined,",
    '    },',
    '  },',
    '});',
  ].join('\n'),
  'playwright.config.ts': "export default { testDir: 'e2e', retries: process.env.CI ? 2 : 0, webServer: { command: 'npm run start:test', port: 4173 } };",
  'docker-compose.test.yml': 'services:\n  db:\n    image: postgres:16-alpine\n    ports: ["54329:5432"]',
  '.github/workflows/ci.yml': [
    'name: ci',
    'on: [push, pull_request]',
    'jobs:',
    '  unit:       { runs-on: ubuntu-latest, steps: [npm ci, npm run coverage, upload coverage] }',
    '  integration: { runs-on: ubuntu-latest, steps: [npm ci, npm run test:int] }',
    '  e2e:',
    '    needs: [unit]',
    '    if: github.event.pull_request.head.repo.fork != true',
    // biome-ignore lint/suspicious/noTemplateCurlyInString: a GitHub Actions expression in a workflow file, not a template
    '    env: { E2E_STRIPE_KEY: "${{ secrets.E2E_STRIPE_KEY }}" }',
  ].join('\n'),
  'src/server.ts': '// the HTTP service',
  'src/billing/retry.ts': '// payment retries',
  'src/billing/retry.test.ts': '// unit tests; two of them use real timers',
  'src/orders/orders.ts': '// order handling',
  'src/orders/orders.test.ts': '// unit tests',
  'src/db/repository.ts': '// SQL repository',
  'test/setup/globalSetup.ts': '// starts postgres:16-alpine with Testcontainers unless TIDEPOOL_TEST_DB is set; runs db/migrations',
  'test/setup/db.ts': '// one transaction per test, rolled back in afterEach; withCommittedTx() for real commits',
  'test/factories.ts': '// makeOrder(), makeCustomer()',
  'test/mocks/handlers.ts': "// msw handlers for the payment provider; onUnhandledRequest: 'error'",
  'test/fixtures/orders.json': '[]',
  'test/fixtures/webhooks.json': '[]',
  'test/integration/orders.int.test.ts': '// repository and HTTP tests against Postgres',
  'e2e/checkout.spec.ts': '// checkout flow in the browser',
  'db/migrations/0001_init.sql': '-- schema',
};

/**
 * The demo's tools: small but real, validated by zod and run by the session like any host tool.
 * `latencyMs` keeps each batch on screen long enough to be seen.
 */
export function demoTools(latencyMs: number): Tool[] {
  const listFiles = defineTool({
    name: 'list_files',
    description: 'List the files under a directory of the project, recursively, one path per line.',
    input: z.object({ path: z.string().describe('A directory relative to the project root; "." for the root.') }),
    run: async ({ path }, { signal }) => {
      await sleep(latencyMs, signal);
      const prefix = path === '.' || path === '' ? '' : `${path.replace(/\/+$/, '')}/`;
      const files = Object.keys(PROJECT_FILES)
        .filter((file) => file.startsWith(prefix))
        .sort();
      if (files.length === 0) throw new Error(`no such directory: ${path}`);
      return files.join('\n');
    },
  });
  const readFile = defineTool({
    name: 'read_file',
    description: 'Read a file of the project.',
    input: z.object({ path: z.string().describe('A file path relative to the project root.') }),
    run: async ({ path }, { signal }) => {
      await sleep(latencyMs, signal);
      const content = PROJECT_FILES[path];
      if (content === undefined) throw new Error(`no such file: ${path}`);
      return content;
    },
  });
  return [listFiles, readFile];
}

/** Each agent's script. `speed` divides every delay: 1 is watchable, a large value is instant. */
export function demoScripts(speed: number): ScriptedProviderOptions['agents'] {
  // Delays make the turn flow watchable; they are the only thing `speed` changes.
  const pace = (ms: number): number => Math.round(ms / speed);
  const paced = (delayMs: number, chunkDelayMs: number, step: ScriptedStep): ScriptedStep => ({
    ...step,
    delayMs: pace(delayMs),
    chunkDelayMs: pace(chunkDelayMs),
  });

  return {
    root: (request) => rootStep(request, paced),
    explorer: [
      paced(220, 15, {
        text: 'Let me look at the layout first.',
        calls: [
          { name: 'list_files', input: { path: '.' } },
          { name: 'list_files', input: { path: 'test' } },
        ],
      }),
      // The incident's shape in one response: the report, a trailing tool call, then a sign-off.
      paced(220, 12, {
        chunkSize: 160,
        content: [{ name: 'reply', input: { result: EXPLORER_BRIEF } }, { name: 'read_file', input: { path: 'vitest.config.ts' } }, EXPLORER_SIGN_OFF],
      }),
    ],
    reviewer: [
      paced(260, 15, {
        text: 'Reading the workflow and the scripts it calls.',
        calls: [
          { name: 'read_file', input: { path: '.github/workflows/ci.yml' } },
          { name: 'read_file', input: { path: 'package.json' } },
        ],
      }),
      // Ends a step in prose without calling reply: the one-shot reminder follows.
      paced(200, 20, {
        chunkSize: 32,
        text:
          'CI runs unit and integration tests on every push and pull request. The e2e job is skipped for pull ' +
          'requests from forks, and coverage counts unit tests only. That is my review.',
      }),
      paced(200, 15, {
        text: 'Sending my findings through reply.',
        calls: [{ name: 'reply', input: { result: REVIEW_FINDINGS } }],
      }),
    ],
  };
}

/** What the root answers once both results are in. */
export const FINAL_ANSWER = [
  "Here is this project's testing setup, from the explorer's brief and the reviewer's check of CI:",
  '',
  '- Three layers: Vitest unit tests colocated in src/ (`npm run test:unit`), Vitest integration tests against a ' +
    'Testcontainers Postgres (`npm run test:int`), and Playwright e2e tests (`npm run test:e2e`). `npm test` runs only the unit layer.',
  '- CI runs all three, but skips e2e for pull requests from forks, and coverage (80% lines, 75% branches) counts unit tests only.',
  '- Worth fixing first: put the integration layer into `npm test`, run e2e for forks against a stubbed payment key, ' +
    'and merge coverage across the unit and integration projects.',
].join('\n');

type Pacer = (delayMs: number, chunkDelayMs: number, step: ScriptedStep) => ScriptedStep;

/**
 * The root decides from what it has been told so far, not from a fixed order: it delegates and
 * waits for both (`wait_for_agents`), so its second request hears both; the other branches keep
 * the script answering sensibly should a result come on its own.
 */
function rootStep(request: ModelRequest, paced: Pacer): ScriptedStep {
  const heard = agentsHeardFrom(request.messages);
  if (request.messages.length === 1) {
    return paced(200, 15, {
      text: 'I will split this: an explorer maps the test setup while a reviewer checks what CI runs.',
      calls: [
        { name: 'agent', input: { name: 'explorer', task: EXPLORER_TASK } },
        { name: 'agent', input: { name: 'reviewer', task: REVIEWER_TASK } },
        // Nothing to do until both report: wait without spending a request on it (issue 15).
        { name: 'wait_for_agents', input: {} },
      ],
    });
  }
  if (heard.has('explorer') && heard.has('reviewer')) return paced(150, 15, { chunkSize: 48, text: FINAL_ANSWER });
  const waitingFor = ['explorer', 'reviewer'].filter((name) => !heard.has(name));
  const done = ['explorer', 'reviewer'].filter((name) => heard.has(name));
  const text =
    done.length === 0
      ? 'Both sub-agents are running; I will wait for their results.'
      : `Noted the ${done.join(' and ')}'s result; waiting for the ${waitingFor.join(' and ')}.`;
  return paced(120, 15, { text });
}

/** Names of the children whose result tags (`[agent 'NAME' …]`) are in the history. */
function agentsHeardFrom(messages: readonly Message[]): Set<string> {
  const names = new Set<string>();
  for (const message of messages) {
    if (message.role !== 'user') continue;
    for (const block of message.content) {
      if (block.type !== 'text') continue;
      for (const match of block.text.matchAll(/^\[agent '([^']+)' /gm)) if (match[1] !== undefined) names.add(match[1]);
    }
  }
  return names;
}
