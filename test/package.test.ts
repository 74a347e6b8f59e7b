import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The package as users get it: `npm install` compiles dist/ (prepare), after which plain Node can
 * import `exarch` and `exarch/testing` by name, with type declarations, and `npx exarch` runs.
 */

const root = fileURLToPath(new URL('..', import.meta.url));

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

  it('ships type declarations for every entry point', () => {
    expect(existsSync(`${root}/dist/src/inspect/liveInspector.d.ts`)).toBe(true);
    expect(existsSync(`${root}/dist/src/trace/recorder.d.ts`)).toBe(true);
    expect(existsSync(`${root}/dist/src/index.d.ts`)).toBe(true);
    expect(existsSync(`${root}/dist/src/testing/index.d.ts`)).toBe(true);
  });

  it('npx exarch runs the command from the project root', () => {
    const run = spawnSync('npx', ['--no-install', 'exarch', '--version'], { cwd: root, encoding: 'utf8' });
    expect(run.status).toBe(0);
    expect(run.stdout.trim()).toMatch(/^\d+\.\d+\.\d+$/);
  });
});
