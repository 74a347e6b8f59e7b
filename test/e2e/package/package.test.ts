import { execFileSync, spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The package from its own checkout: once dist/ is built (`npm start`, `npm pack`, the e2e tests'
 * global setup), plain Node imports `exarch` and `exarch/testing` by name, with type declarations,
 * and `npx exarch` runs.
 */

const root = fileURLToPath(new URL('../../..', import.meta.url));

// dist/ is built once for all tests by test/globalSetup.ts, as `npm install` builds it for users.

describe('the published package', () => {
  it('plain Node imports exarch and exarch/testing by name from the project root', () => {
    const script = `
      const exarch = await import('exarch');
      const testing = await import('exarch/testing');
      const provider = testing.scriptedProvider({ agents: { root: [{ text: 'hi from dist' }] } });
      const result = await exarch.runAgent('go', { provider });
      console.log(typeof exarch.sessionMachine, typeof exarch.defineTool, result.text);`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(out.trim()).toBe('object function hi from dist');
  });

  it('plain Node imports the workspace tools as exarch/workspace (their own entry: issue 40.1)', () => {
    const script = `
      const { workspaceTools, WorkspaceError } = await import('exarch/workspace');
      const exarch = await import('exarch');
      const names = workspaceTools({ root: '.' }).map((tool) => tool.name);
      console.log(names.join(','), WorkspaceError === exarch.WorkspaceError, 'workspaceTools' in exarch);`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(out.trim()).toBe('read_file,list_dir,search_files true false');
  });

  it('plain Node imports the live inspector and the trace recorder as exarch/inspect and exarch/trace', () => {
    const script = `
      const { startLiveInspector } = await import('exarch/inspect');
      const { TraceRecorder } = await import('exarch/trace');
      const live = await startLiveInspector({ port: 0 });
      console.log(typeof live.attach, typeof live.inspect, typeof TraceRecorder);
      await live.stop();`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(out.trim()).toBe('function function function');
  });

  it('plain Node serves the live viewer as exarch/viewer, with the page script built into dist', () => {
    const script = `
      const { startLiveViewer } = await import('exarch/viewer');
      const viewer = await startLiveViewer({ title: 'from dist' });
      const page = await (await fetch(viewer.url)).text();
      console.log(page.includes('class ViewerModelBuilder'), page.includes('function startViewer'), page.includes('markdownit'), page.includes('"title":"from dist"'));
      await viewer.close();`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: root, encoding: 'utf8' });
    expect(out.trim()).toBe('true true true true');
  });

  it('ships type declarations for every entry point', () => {
    expect(existsSync(`${root}/dist/src/watch/viewer/index.d.ts`)).toBe(true);
    expect(existsSync(`${root}/dist/src/watch/inspect/liveInspector.d.ts`)).toBe(true);
    expect(existsSync(`${root}/dist/src/watch/trace/recorder.d.ts`)).toBe(true);
    expect(existsSync(`${root}/dist/src/index.d.ts`)).toBe(true);
    expect(existsSync(`${root}/dist/src/testing/index.d.ts`)).toBe(true);
  });

  it('npx exarch runs the command from the project root', () => {
    const run = spawnSync('npx', ['--no-install', 'exarch', '--version'], { cwd: root, encoding: 'utf8' });
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});

/** The README's first TypeScript block: its library example, which a newcomer copies into an app. */
function readmeExample(): { code: string; prints: string } {
  const readme = readFileSync(join(root, 'README.md'), 'utf8');
  const code = /^```ts\n([\s\S]*?)^```$/m.exec(readme)?.[1];
  if (code === undefined) throw new Error('README.md has no ```ts block');
  // Its last line says what it prints, as a comment: `console.log(…); // <what it prints>`.
  const prints = /\/\/ (.+)\n$/.exec(code)?.[1];
  if (prints === undefined) throw new Error(`README.md's example does not end with a comment saying what it prints:\n${code}`);
  return { code, prints };
}

/**
 * The package as an app gets it: `npm pack`, then `npm install` of the tarball in a new app that
 * brings its own xstate and zod — the lowest versions our peer ranges allow, not the ones we build
 * with — and compiles and runs every file of examples/ against it. A second copy of xstate under
 * exarch (xstate as a dependency rather than a peer) fails the compile with TS2322, as it did for
 * embedders. The install reads the npm cache first and the npm registry for what is not there.
 */
const manifest = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  devDependencies: Record<string, string>;
};

/** `^5.33.0` → `5.33.0`: the oldest release a caret range accepts. */
function lowestOf(range: string | undefined): string {
  const match = /^\^(\d+\.\d+\.\d+)$/.exec(range ?? '');
  if (!match?.[1]) throw new Error(`peer range ${JSON.stringify(range)} is not a caret range this test can take the lowest version of`);
  return match[1];
}

function run(command: string, args: string[], cwd: string, what: string): SpawnSyncReturns<string> {
  const result = spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 120_000 });
  if (result.status !== 0) {
    throw new Error(
      `${what} failed (${result.error?.message ?? (result.signal ? `killed by ${result.signal}` : `exit ${result.status}`)}):\n${result.stdout}${result.stderr}`,
    );
  }
  return result;
}

/** What each example prints, as a user running it sees it. A new example needs its line here. */
const printed: Record<string, RegExp[]> = {
  approvals: [/'root\/scribe write_note notes\.md',\s+'root\/scribe write_note \/etc\/motd'/, /^\[ 'notes\.md' \]$/m],
  'custom-tool': [/^error: invalid input for tool 'word_count': path: /m, /^readyForUser a\.md has 3 words\.$/m],
  'durable-run': [/^\[ '[0-9A-Z]{26} interrupted 2 agents' \]$/m, /^done a\.md says hello\.$/m],
  'declared-agents': [
    /^replied Every agent is a state machine$/m,
    /^notes\/arch\.md, notes\/adr-7\.md$/m,
    /^invalid input for tool 'reply': sources: .+; confidence: .+$/m,
  ],
  'host-events': [/^root › researcher › reader: ended done$/m, /^5 model requests$/m],
  'otel-export': [
    /^chat claude-sonnet-5-5, chat claude-sonnet-5-5, chat claude-sonnet-5-5, execute_tool agent, execute_tool reply, execute_tool wait_for_agents, invoke_agent researcher, invoke_agent root$/m,
    /^120$/m,
  ],
  'host-machine': [/^ {2}"cause": "session cookie not renewed"$/m],
  'root-session': [/^a says hello, b says world\.$/m, /^readyForUser → streaming → dispatchingBatch → streaming → readyForUser → streaming → readyForUser$/m],
};
const examples = readdirSync(join(root, 'examples'))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.slice(0, -3))
  .sort();

describe('the packed package installed in an app with its own xstate and zod', () => {
  const peers = { xstate: lowestOf(manifest.peerDependencies['xstate']), zod: lowestOf(manifest.peerDependencies['zod']) };
  let app: string;

  beforeAll(() => {
    app = mkdtempSync(join(tmpdir(), 'exarch-app-'));
    // dist/ is current (test/globalSetup.ts built it): pack it as it is, without building again.
    const packed = run('npm', ['pack', '--ignore-scripts', '--silent', '--pack-destination', app], root, 'npm pack');
    const tarball = join(app, packed.stdout.trim().split('\n').at(-1) ?? '');
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'an-app', private: true, type: 'module' }));
    run(
      'npm',
      [
        'install',
        '--prefer-offline',
        '--no-audit',
        '--no-fund',
        '--ignore-scripts',
        tarball,
        `xstate@${peers.xstate}`,
        `zod@${peers.zod}`,
        `@types/node@${manifest.devDependencies['@types/node']}`,
        // examples/otel-export.ts gives exarch the app's own tracer provider, as docs/observability.md
        // tells an app to install it; without it here, the import would pass only through npm's hoisting.
        `@opentelemetry/sdk-trace-base@${manifest.dependencies['@opentelemetry/sdk-trace-base']}`,
      ],
      app,
      'npm install in the temporary app (it needs the npm cache or the npm registry)',
    );
    // --ignore-scripts skipped compiling SQLite for better-sqlite3 (minutes on this machine): give it
    // the addon our own install compiled, for the same version and the same Node.
    const addon = 'node_modules/better-sqlite3/build/Release/better_sqlite3.node';
    mkdirSync(join(app, addon, '..'), { recursive: true });
    copyFileSync(join(root, addon), join(app, addon));

    // The examples as a user's own code, type-checked (library declarations included) against the package.
    cpSync(join(root, 'examples'), join(app, 'src'), { recursive: true });
    writeFileSync(join(app, 'src', 'readme-example.ts'), readmeExample().code);
    const tsconfig = {
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        lib: ['ES2023'],
        types: ['node'],
        strict: true,
        skipLibCheck: false,
        rootDir: 'src',
        outDir: 'out',
      },
      include: ['src'],
    };
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify(tsconfig));
  }, 300_000);

  afterAll(() => {
    if (app) rmSync(app, { recursive: true, force: true });
  });

  it('uses the app’s xstate and zod, which are not the versions exarch is built with', () => {
    const versionOf = (name: string): string =>
      (JSON.parse(readFileSync(join(app, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
    expect(versionOf('xstate')).toBe(peers.xstate);
    expect(versionOf('zod')).toBe(peers.zod);
    expect(peers.xstate).not.toBe(manifest.devDependencies['xstate']);
    expect(peers.zod).not.toBe(manifest.devDependencies['zod']);
    // One copy of each in the app: exarch's types and machines are the app's.
    expect(existsSync(join(app, 'node_modules/exarch/node_modules/xstate'))).toBe(false);
    expect(existsSync(join(app, 'node_modules/exarch/node_modules/zod'))).toBe(false);
    expect(existsSync(join(app, 'node_modules/exarch/dist/.tsbuildinfo'))).toBe(false);
    // The protocol the README links to travels with the package.
    expect(existsSync(join(app, 'node_modules/exarch/docs/protocol.md'))).toBe(true);
  });

  it('builds nothing in the app: dist/ ships compiled, and no script of exarch runs at install', () => {
    const installed = JSON.parse(readFileSync(join(app, 'node_modules/exarch/package.json'), 'utf8')) as { scripts?: Record<string, string> };
    // npm runs these of a dependency in the app (prepare too, for a tarball or a git dependency).
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) expect(installed.scripts?.[hook], hook).toBeUndefined();
    expect(existsSync(join(app, 'node_modules/exarch/dist/src/index.js'))).toBe(true);
    expect(existsSync(join(app, 'node_modules/exarch/dist/src/cli/main.js'))).toBe(true);
    expect(existsSync(join(app, 'node_modules/exarch/src'))).toBe(false);
  });

  it('npx exarch --help and npx exarch demo run from the app', () => {
    const help = run('npx', ['--no-install', 'exarch', '--help'], app, 'npx exarch --help in the app');
    expect(help.stdout).toMatch(/^exarch /);
    expect(help.stdout).toMatch(/exarch run /);
    const demo = run('npx', ['--no-install', 'exarch', 'demo', '--speed', '50'], app, 'npx exarch demo in the app');
    // The root's answer on stdout; on stderr, the demo's point: the brief came through reply.
    expect(demo.stdout).toMatch(/^Here is this project's testing setup/);
    expect(demo.stderr).toMatch(/With reply the \d+-char brief is the value the child\s+chose to send/);
    expect(demo.stderr).toMatch(/^Turn flow recorded: \.exarch\/demo\/trace\.jsonl$/m);
    expect(existsSync(join(app, '.exarch/demo/trace.jsonl'))).toBe(true);
  }, 60_000);

  it('type-checks the examples as app code against the installed package', () => {
    const tsc = spawnSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', '.'], { cwd: app, encoding: 'utf8', timeout: 120_000 });
    expect(`${tsc.stdout}${tsc.stderr}`).toBe('');
    expect(tsc.status).toBe(0);
  }, 150_000);

  it.each(examples)('runs examples/%s.ts from the installed package', (name) => {
    expect(printed[name], `test/e2e/package/package.test.ts has no expected output for examples/${name}.ts`).toBeDefined();
    const out = run(process.execPath, [`out/${name}.js`], app, `examples/${name}.ts in the app`);
    for (const line of printed[name] ?? []) expect(out.stdout).toMatch(line);
  });

  // After the type-check, which compiled it with the examples into out/.
  it('runs the README’s library example from the app and prints what the README says', () => {
    const out = run(process.execPath, ['out/readme-example.js'], app, "README.md's example in the app");
    expect(out.stdout.trim()).toBe(readmeExample().prints);
  });
});

describe('npm run example', () => {
  it('runs the named example; an unknown name is one line listing the examples', () => {
    const one = spawnSync('npm', ['run', 'example', '--silent', '--', 'examples/root-session.ts'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
    expect(one.stderr).toBe('\n▶ examples/root-session.ts\n');
    expect(one.stdout).toMatch(/^a says hello, b says world\.$/m);
    expect(one.status).toBe(0);

    const wrong = spawnSync('npm', ['run', 'example', '--silent', '--', 'nope'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
    expect(wrong.stderr).toBe(`npm run example: no example named "nope"; there are: ${examples.join(', ')}\n`);
    expect(wrong.status).toBe(2);
  }, 150_000);
});

describe('npm run release:check', () => {
  it('packs dist/ as a publish would, lists the tarball, and passes publint and Are the Types Wrong on it', () => {
    // --no-build: dist/ is current (test/globalSetup.ts built it).
    const check = spawnSync(process.execPath, ['scripts/releaseCheck.mjs', '--no-build'], { cwd: root, encoding: 'utf8', timeout: 120_000 });
    expect(check.stderr).toBe('');
    expect(check.stdout).toMatch(/^exarch-\d+\.\d+\.\d+\.tgz: \d+ files, [\d.]+ kB packed, [\d.]+ kB unpacked$/m);
    expect(check.stdout).toMatch(/^ {2}docs +\d+ files/m);
    expect(check.stdout).toMatch(/^publint: passed$/m);
    expect(check.stdout).toMatch(/^attw: passed$/m);
    expect(check.stdout).toMatch(/release:check: the package is ready to publish\n$/);
    expect(check.status).toBe(0);
  }, 150_000);
});
