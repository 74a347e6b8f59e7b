import { describe, expect, it } from 'vitest';
import type { JournalRecord } from '../../../src/engine/log/journalRecord.js';
import { liveChildrenOf, restoreAlone } from '../../../src/store/restoreRun.js';
import type { JournalRow } from '../../../src/store/runStore.js';

/**
 * One session of a spread run rebuilt from its own records and its children's outcomes (issue 18):
 * what a worker that takes the session up starts from. Records are written out by hand.
 */

const usage = { inputTokens: 1, outputTokens: 1, cacheCreationInputTokens: 0, cacheReadInputTokens: 0 };
const root = { name: 'root', path: ['root'], depth: 0, id: 'root' };
const result = (name: string, text: string) => ({ name, outcome: 'replied' as const, text, usage });
const outcome = (text: string): JournalRecord => ({ type: 'outcome', outcome: 'replied', text, usage, totalUsage: usage });

/** The root's records: it started a, b, c and d and waits for them all; a's result was taken. */
const rootRecords: JournalRecord[] = [
  { type: 'session', agent: root, task: 'Ask four.' },
  { type: 'message', role: 'user', content: [{ type: 'text', text: 'Ask four.' }] },
  {
    type: 'message',
    role: 'assistant',
    content: [
      ...['a', 'b', 'c', 'd'].map((name, i) => ({ type: 'tool_use' as const, id: `t${i}`, name: 'agent', input: { name, task: `Do ${name}.` } })),
      { type: 'tool_use', id: 'tw', name: 'wait_for_agents', input: {} },
    ],
  },
  { type: 'usage', request: usage, session: usage, stopReason: 'tool_use' },
  ...['a', 'b', 'c', 'd'].map((name, i): JournalRecord => ({ type: 'spawn', name, id: `root/${name}`, actorId: String(i + 1), task: `Do ${name}.` })),
  ...['a', 'b', 'c', 'd'].map((_, i): JournalRecord => ({ type: 'tool', result: { type: 'tool_result', tool_use_id: `t${i}`, content: 'started' } })),
  { type: 'waiting' },
  { type: 'inbox', actorId: '1', result: result('a', 'a done') },
];

function rows(records: readonly (readonly [string, JournalRecord])[]): JournalRow[] {
  return records.map(([session, record], i) => ({ runId: 'r', seq: i + 1, session, ts: i, record }));
}

describe('restoreAlone', () => {
  it('names the children whose results its journal has not taken', () => {
    expect(liveChildrenOf(rootRecords)).toEqual(['root/b', 'root/c', 'root/d']);
  });

  it('delivers the results of children that ended, in the order they ended, and leaves the others to run elsewhere', () => {
    const restored = restoreAlone(
      rows([...rootRecords.map((record) => ['root', record] as const), ['root/c', outcome('c done')], ['root/b', outcome('b done')]]),
      'root',
    );
    if (restored.kind !== 'resumable') throw new Error(`expected a resumable session, got ${restored.kind}`);
    const { session } = restored;
    expect(session.state).toBe('waitingForAgents');
    expect(session.undelivered).toEqual([
      { actorId: '3', result: result('c', 'c done') },
      { actorId: '2', result: result('b', 'b done') },
    ]);
    expect(session.children.map((child) => [child.actorId, child.agent.id, child.task, child.restore])).toEqual([['4', 'root/d', 'Do d.', undefined]]);
    expect(session.inbox).toEqual([result('a', 'a done')]);
  });

  it('reports a session that ended with its result, and one never recorded as empty', () => {
    const ended = restoreAlone(
      rows([
        ['root/b', { type: 'session', agent: { name: 'b', path: ['root', 'b'], depth: 1, id: 'root/b' }, task: 'Do b.' }],
        ['root/b', outcome('b done')],
      ]),
      'root/b',
    );
    expect(ended).toMatchObject({ kind: 'ended', result: result('b', 'b done') });
    expect(restoreAlone(rows([['root', rootRecords[0] as JournalRecord]]), 'root/x')).toEqual({ kind: 'empty' });
  });
});
