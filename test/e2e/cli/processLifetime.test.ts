import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/**
 * What the library does to the process it runs in: whether it keeps it alive, and how a crash
 * nobody observes ends it. Each case runs the compiled package (test/globalSetup.ts builds it) in a
 * process of its own, so these live apart from the in-process tests of the same code, which the
 * mutation run (`npm run mutate`, no build) can then include.
 */
describe('the process the library runs in', () => {
  it('a pending deadline keeps the process alive; none pending, the queue does not', () => {
    const script = (cancel: boolean) => `
      import { deadlines } from ${JSON.stringify(new URL('../../../dist/src/engine/deadlines.js', import.meta.url).pathname)};
      const d = deadlines.add(300, () => console.log('fired'));
      ${cancel ? 'd.cancel();' : ''}
    `;
    const run = (cancel: boolean) => spawnSync(process.execPath, ['--input-type=module', '-e', script(cancel)], { encoding: 'utf8', timeout: 10_000 });
    const pending = run(false);
    const cancelled = run(true);
    expect(pending.stdout.trim()).toBe('fired');
    expect(cancelled.stdout.trim()).toBe('');
    expect(cancelled.status).toBe(0);
  });

  it('a root that crashes with no one observing it is still reported as an uncaught error, as XState reports it', () => {
    // The session's effects observe it to end with it; that must not make its crashes silent.
    const dist = (path: string) => JSON.stringify(new URL(`../../../dist/src/${path}`, import.meta.url).pathname);
    const script = `
      import { createSessionActor } from ${dist('index.js')};
      import { scriptedProvider } from ${dist('testing/index.js')};
      const provider = scriptedProvider({ agents: { root: [{ text: 'hello' }] } });
      const logs = { open: () => ({ append: (r) => { if (r.type === 'usage') throw new Error('ENOSPC: no space left on device'); }, flush() {}, close() {} }) };
      createSessionActor({ provider, logs, task: 'go' }).start();
    `;
    const result = spawnSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 10_000 });
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('ENOSPC: no space left on device');
  });
});
