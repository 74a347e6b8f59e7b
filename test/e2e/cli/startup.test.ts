import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { DEFAULT_STORE_PATH, openSqliteStore } from '../../../src/store/sqliteStore.js';
import { exarch, MAIN, serve, stream, workdir } from '../../support/cliHarness.js';

/*
 * What `exarch --help`, `--version` and a usage error load: none of the libraries the commands
 * run on. Observed from outside, not timed (speed is measured by `npm run bench`): the command
 * runs under a module hook that writes down every module Node loads, ESM (a loader hook) and
 * CommonJS (the require cache at exit).
 */

/** The packages a command's work needs and a look at the help does not. */
const HEAVY = ['@anthropic-ai/sdk', 'better-sqlite3', 'xstate', '@opentelemetry/', 'zod', 'pg', 'log-update', '@modelcontextprotocol/sdk'];

/**
 * Preloaded with `node --import`: registers a loader hook that appends each loaded URL to the file
 * named by `data` (the hook runs on a thread of its own), and at exit adds the CommonJS modules.
 */
const RECORDER = `
import { register, createRequire } from 'node:module';
import { appendFileSync } from 'node:fs';
const file = process.env.EXARCH_TEST_LOADED;
const hook = 'data:text/javascript,' + encodeURIComponent(\`
  import { appendFileSync } from 'node:fs';
  let file;
  export function initialize(data) { file = data; }
  export async function load(url, context, next) { appendFileSync(file, url + '\\\\n'); return next(url, context); }
\`);
register(hook, { data: file });
process.on('exit', () => appendFileSync(file, Object.keys(createRequire(file).cache).join('\\n') + '\\n'));
`;

interface Loaded {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
  /** Each module loaded, as a URL or a path. */
  readonly modules: readonly string[];
}

/** `exarch ARGS` in `cwd` (by default a new directory that holds an empty run store), with what it loaded. */
function loadedBy(args: readonly string[], cwd = workdir()): Loaded {
  openSqliteStore(join(cwd, DEFAULT_STORE_PATH)).close();
  const file = join(cwd, 'loaded.txt');
  const run = spawnSync(process.execPath, ['--import', `data:text/javascript,${encodeURIComponent(RECORDER)}`, MAIN, ...args], {
    cwd,
    env: { PATH: process.env['PATH'], CI: 'true', EXARCH_TEST_LOADED: file },
    encoding: 'utf8',
  });
  const modules = readFileSync(file, 'utf8').split('\n').filter(Boolean);
  return { status: run.status, stdout: run.stdout, stderr: run.stderr, modules };
}

/** The heavy packages among `modules`, by the folder under node_modules each came from. */
function heavyIn(modules: readonly string[]): string[] {
  const found = new Set<string>();
  for (const module of modules) for (const name of HEAVY) if (module.includes(`/node_modules/${name}${name.endsWith('/') ? '' : '/'}`)) found.add(name);
  return [...found].sort();
}

describe('what the command line loads to start', () => {
  it('the recorder sees the modules a command loads (exarch runs opens SQLite, and so loads better-sqlite3)', () => {
    const runs = loadedBy(['runs']);
    expect(runs.status).toBe(0);
    expect(runs.stderr).toMatch(/^exarch: no runs recorded in /);
    expect(runs.modules.some((m) => m.endsWith('/dist/src/cli/main.js'))).toBe(true);
    expect(heavyIn(runs.modules)).toContain('better-sqlite3');
  });

  it.each(['--help', '--version', 'help run', 'run --help'])("'exarch %s' loads none of the libraries the commands run on", (line) => {
    const run = loadedBy(line.split(' '));
    expect(run.status).toBe(0);
    expect(run.stdout).not.toBe('');
    expect(heavyIn(run.modules)).toEqual([]);
    // Nor any command's own code: commands.ts, viewCommand.ts and demoCommand.ts are loaded when their command runs.
    expect(run.modules.filter((m) => /\/dist\/src\/cli\/(commands|viewCommand|demoCommand)\.js$/.test(m))).toEqual([]);
  });

  it.each(['run --modle x', 'frob', ''])("a usage error ('exarch %s') loads none of them either", (line) => {
    const run = loadedBy(line.split(' ').filter(Boolean));
    expect(run.status).toBe(2);
    expect(heavyIn(run.modules)).toEqual([]);
  });

  it('exarch run --replay loads neither the SDK, nor OpenTelemetry without --otel, nor the viewer without --ui (issue 40.1)', async () => {
    const cwd = workdir();
    const server = await serve({ root: [stream({ text: 'The cookie is not renewed.' })] });
    const recorded = await exarch(['run', '--record', 'run.recording.jsonl', 'Why do logins fail?'], {
      server,
      cwd,
      env: { ANTHROPIC_API_KEY: 'sk-ant-test-key-0123456789' },
    });
    await server.close();
    expect(recorded.code).toBe(0);
    const replayed = loadedBy(['run', '--replay', 'run.recording.jsonl', 'Why do logins fail?'], cwd);
    expect(replayed.status, replayed.stderr).toBe(0);
    expect(replayed.stdout).toContain('The cookie is not renewed.');
    // The run's own libraries load (the machines, the store); the model's SDK, OTel and the viewer's server do not.
    expect(heavyIn(replayed.modules)).toEqual(expect.arrayContaining(['better-sqlite3', 'xstate']));
    expect(heavyIn(replayed.modules).filter((name) => ['@anthropic-ai/sdk', '@opentelemetry/'].includes(name))).toEqual([]);
    expect(replayed.modules.filter((m) => /\/node_modules\/ws\/|\/dist\/src\/watch\/viewer\/liveServer\.js$/.test(m))).toEqual([]);
  });

  it('exarch runs loads the store, not the SDK, the session machines or OpenTelemetry', () => {
    expect(heavyIn(loadedBy(['runs']).modules).filter((name) => name !== 'better-sqlite3' && name !== 'zod')).toEqual([]);
  });
});
