import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { createSessionActor, defineTool, runAgent, type LogRecord, type SessionInput } from '../../../src/index.js';
import { scriptedProvider, type Script } from '../../../src/testing/index.js';
import { until } from '../../support/helpers.js';

/** CONTRACT §6: every session writes its own append-only JSONL log; usage rolls up. */

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function readLog(dir: string, file: string): (LogRecord & { ts: number })[] {
  return readFileSync(join(dir, file), 'utf8')
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as LogRecord & { ts: number });
}

describe('session logs', () => {
  it('each session writes its messages, tool results, outcome and usage to its own JSONL file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-logs-'));
    dirs.push(dir);
    const usage = { inputTokens: 10, outputTokens: 5 };
    const provider = scriptedProvider({
      agents: {
        root: [
          { calls: [{ name: 'agent', input: { name: 'c', task: 'do it' } }], usage },
          { text: 'wait', usage },
          { text: 'final', usage },
        ],
        c: [{ calls: [{ name: 'reply', input: { result: 'the report' } }], usage }],
      },
    });
    const result = await runAgent('go', { provider, logs: dir });
    expect(result.text).toBe('final');
    expect(readdirSync(dir).sort()).toEqual(['root.c.jsonl', 'root.jsonl']);

    const child = readLog(dir, 'root.c.jsonl');
    expect(child.map((r) => r.type)).toEqual(['session', 'message', 'message', 'usage', 'message', 'outcome']);
    expect(child[0]).toMatchObject({ type: 'session', agent: { id: 'root/c', depth: 1 }, task: 'do it' });
    expect(child.at(-1)).toMatchObject({ type: 'outcome', outcome: 'replied', text: 'the report', usage: { inputTokens: 10, outputTokens: 5 } });
    expect(child[4]).toMatchObject({ type: 'message', role: 'user', content: [{ type: 'tool_result' }] });

    const root = readLog(dir, 'root.jsonl');
    expect(root.filter((r) => r.type === 'spawn')).toEqual([expect.objectContaining({ name: 'c', id: 'root/c' })]);
    expect(root.filter((r) => r.type === 'inbox')).toEqual([
      expect.objectContaining({ result: expect.objectContaining({ outcome: 'replied', text: 'the report' }) }),
    ]);
    expect(root.every((r) => typeof r.ts === 'number')).toBe(true);
    // runAgent stops the root once it settles; its log ends there, with the tree's usage.
    expect(root.at(-1)).toMatchObject({
      type: 'stopped',
      state: 'readyForUser',
      usage: { inputTokens: 30, outputTokens: 15 },
      totalUsage: { inputTokens: 40, outputTokens: 20 },
    });
    expect(result.usage).toMatchObject({ inputTokens: 40, outputTokens: 20 });
  });

  it('a reused name gets its own log file', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-logs-'));
    dirs.push(dir);
    const provider = scriptedProvider({
      agents: {
        root: [
          { calls: [{ name: 'agent', input: { name: 'c', task: 'one' } }] },
          { text: 'wait' },
          { calls: [{ name: 'agent', input: { name: 'c', task: 'two' } }] },
          { text: 'wait' },
          { text: 'done' },
        ],
        c: [{ calls: [{ name: 'reply', input: { result: 'r' } }] }],
        'root/c#2': [{ calls: [{ name: 'reply', input: { result: 'r2' } }] }],
      },
    });
    await runAgent('go', { provider, logs: dir });
    expect(readdirSync(dir).sort()).toEqual(['root.c.jsonl', 'root.c~2.jsonl', 'root.jsonl']);
    expect(readLog(dir, 'root.c~2.jsonl')[0]).toMatchObject({ task: 'two' });
  });
});

describe('a JSONL log whenever its session rests', () => {
  const spawn = (name: string) => ({ name: 'agent', input: { name, task: `task for ${name}` } });
  /** What root.jsonl holds on disk now, as `type` or `type role`. */
  const onDisk = (dir: string): string[] => readLog(dir, 'root.jsonl').map((r) => (r.type === 'message' ? `message ${r.role}` : r.type));

  async function restingIn(state: string, input: Omit<SessionInput, 'provider' | 'logs'>, agents: Record<string, Script>) {
    const dir = mkdtempSync(join(tmpdir(), 'exarch-logs-'));
    dirs.push(dir);
    const actor = createSessionActor({ ...input, provider: scriptedProvider({ agents }), logs: dir });
    actor.start();
    await until(actor, (s) => s.value === state);
    return { dir, actor };
  }

  it('holds the turn that just ended (readyForUser)', async () => {
    const { dir, actor } = await restingIn('readyForUser', { task: 'go' }, { root: [{ text: 'hello' }] });
    await until(actor, (s) => s.context.messages.length === 2);
    expect(onDisk(dir)).toEqual(['session', 'message user', 'message assistant', 'usage']);
    actor.stop();
  });

  it('holds the batch it waits in (waitingForAgents)', async () => {
    const agents = { root: [{ calls: [spawn('slow'), { name: 'wait_for_agents', input: {} }] }], slow: [{ delayMs: 10_000, text: 'late' }] };
    const { dir, actor } = await restingIn('waitingForAgents', { task: 'go' }, agents);
    expect(onDisk(dir)).toEqual(['session', 'message user', 'message assistant', 'usage', 'spawn']);
    actor.stop();
  });

  it('holds the calls a person is asked about (awaitingApproval)', async () => {
    const note = defineTool({ name: 'note', description: 'Takes a note.', input: z.object({}), run: () => 'noted' });
    const agents = { root: [{ calls: [{ name: 'note', input: {} }] }] };
    const { dir, actor } = await restingIn('awaitingApproval', { task: 'go', tools: [note], approve: ['note'], onApprovalRequest: () => undefined }, agents);
    expect(onDisk(dir)).toEqual(['session', 'message user', 'message assistant', 'usage']);
    actor.stop();
  });
});
