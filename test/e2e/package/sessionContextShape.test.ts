import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * Every `assign` copies a session's context with `Object.assign({}, context, update)`. V8 makes
 * such a copy a dictionary-mode object once it has twenty or more properties, and then every read
 * and every later copy is a hash lookup: that cost a plain step about a fifth of its time
 * (machines/sessionTypes.ts, `SessionFixed`). The oracle is V8 itself: a node process with
 * `--allow-natives-syntax` asks `%HasFastProperties` of the contexts a real run ends with, for a
 * root and for a sub-agent, after many assigns (the compiled package, which test/globalSetup.ts
 * builds).
 */
const root = fileURLToPath(new URL('../../..', import.meta.url));

const SCRIPT = `
import { createSessionActor, defineTool, waitForSettled } from './dist/src/index.js';
import { scriptedProvider } from './dist/src/testing/index.js';
import { z } from 'zod';

const echo = defineTool({ name: 'echo', description: 'Echo', input: z.object({ text: z.string() }), readOnly: true, run: ({ text }) => text });
const loop = (n, last) => [...Array.from({ length: n }, (_, i) => ({ calls: [{ name: 'echo', input: { text: 'step ' + i } }] })), last];
const provider = scriptedProvider({
  agents: {
    root: [{ calls: [{ name: 'agent', input: { name: 'kid', task: 'work' } }] }, { text: 'waiting' }, ...loop(5, { text: 'done' })],
    kid: loop(5, { calls: [{ name: 'reply', input: { result: 'ok' } }] }),
  },
});
const contexts = new Map();
const actor = createSessionActor(
  { provider, tools: [echo], task: 'go' },
  { inspect: (e) => { if (e.type === '@xstate.snapshot' && e.snapshot.context?.agent) contexts.set(e.snapshot.context.agent.id, e.snapshot.context); } },
);
actor.start();
await waitForSettled(actor);
const report = {};
for (const [id, context] of contexts) report[id] = { fast: %HasFastProperties(context), members: Object.keys(context).length };
console.log(JSON.stringify(report));
`;

describe('session context shape', () => {
  it('stays a fast-properties object in V8 for a root and a sub-agent after many assigns', () => {
    const run = spawnSync(process.execPath, ['--allow-natives-syntax', '--input-type=module', '-e', SCRIPT], { cwd: root, encoding: 'utf8' });
    expect(run.stderr).toBe('');
    const report = JSON.parse(run.stdout) as Record<string, { fast: boolean; members: number }>;
    expect(Object.keys(report).sort()).toEqual(['root', 'root/kid']);
    for (const [id, shape] of Object.entries(report)) expect({ id, ...shape }).toEqual({ id, fast: true, members: shape.members });
  });
});
