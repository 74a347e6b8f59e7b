import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The benchmark's cells for exarch and the hand-written floor (the peers live in bench/'s own
// dependencies, which `npm test` does not install): each runs, and reaches every count it claims.
const cell = fileURLToPath(new URL('../bench/cell.mjs', import.meta.url));

function runCell(...args: string[]) {
  const result = spawnSync(process.execPath, ['--expose-gc', cell, ...args], { encoding: 'utf8', timeout: 60_000 });
  const lines = result.stdout.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line) as Record<string, unknown>);
  return { status: result.status, stderr: result.stderr, timed: lines.find((l) => l['phase'] === 'memory run'), done: lines.find((l) => l['phase'] === 'done') };
}

describe('npm run bench: the exarch and hand-written cells', () => {
  for (const system of ['exarch', 'handwritten']) {
    it(`${system}: loop, fan-out and stream cells finish with the counts the workloads require`, () => {
      for (const [workload, size, counts] of [
        ['loop', '50', { modelCalls: 51, toolExecutions: 50 }],
        ['fanout', '20', { childModelCalls: 60, toolExecutions: 40, reportsSeenByRoot: 20 }],
        ['stream', '2000', { deltasReceived: 2000, charsReceived: 2000 }],
      ] as const) {
        const { status, stderr, timed, done } = runCell(system, workload, size);
        expect(stderr).toBe('');
        expect(status).toBe(0);
        expect(timed?.['counts']).toMatchObject(counts);
        expect(timed?.['ms']).toBeGreaterThan(0);
        expect(typeof done?.['retainedBytes']).toBe('number');
      }
    }, 60_000);
  }

  it('refuses a workload it does not know, with a usage line', () => {
    const { status, stderr } = runCell('exarch', 'juggle', '5');
    expect(status).toBe(2);
    expect(stderr).toMatch(/^usage: /);
  });
});
