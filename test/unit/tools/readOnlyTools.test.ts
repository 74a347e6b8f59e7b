import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { resumeRun, startRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import type { JournalRow } from '../../../src/store/runStore.js';
import { ScriptedProvider, type Script } from '../../../src/testing/scriptedProvider.js';
import { defineTool, type Tool } from '../../../src/tools/defineTool.js';
import { workspaceTools } from '../../../src/tools/workspace/index.js';
import { RecordingStore } from '../../support/durableStore.js';

/**
 * A read-only tool (`defineTool({ readOnly: true })`) may run before the response that asked for
 * it is in the journal; a tool with effects never does. Observed from the store: what the journal
 * held at the instant each tool ran.
 */

/** Whether `rows` hold the assistant message that made call `id`. */
const holdsCall = (rows: readonly JournalRow[], id: string): boolean =>
  rows.some(
    ({ record }) => record.type === 'message' && record.role === 'assistant' && record.content.some((block) => block.type === 'tool_use' && block.id === id),
  );

function probe(name: string, readOnly: boolean, store: MemoryRunStore, seen: Map<string, boolean>): Tool {
  return defineTool({
    name,
    description: `Looks at ${name}.`,
    input: z.object({}),
    readOnly,
    run: (_input, { toolUseId }) => {
      seen.set(
        toolUseId,
        holdsCall(
          store.listRuns().flatMap((run) => store.journal(run.id)),
          toolUseId,
        ),
      );
      return 'seen';
    },
  });
}

const script: Script = [
  { calls: [{ name: 'look', id: 'call_look' }] },
  { calls: [{ name: 'poke', id: 'call_poke' }] },
  {
    calls: [
      { name: 'look', id: 'call_both_look' },
      { name: 'poke', id: 'call_both_poke' },
    ],
  },
  { text: 'done' },
];

describe('read-only tools in a durable run', () => {
  it('a batch of read-only calls starts before its response is stored; a batch with an effect waits for it', async () => {
    const inner = new MemoryRunStore();
    const seen = new Map<string, boolean>();
    const tools = [probe('look', true, inner, seen), probe('poke', false, inner, seen)];
    const run = await startRun('task', { provider: new ScriptedProvider({ agents: { root: script } }), tools }, { store: new RecordingStore(inner) });
    expect((await run.result).status).toBe('done');
    expect(Object.fromEntries(seen)).toEqual({
      call_look: false,
      call_poke: true,
      // One call with effects holds the whole batch back, reads included.
      call_both_look: true,
      call_both_poke: true,
    });
  });

  it('a crash before the response of a read-only batch is stored asks the model again, and the answer it gets is the one the journal keeps', async () => {
    // The dead process's lease runs out when the clock is moved on.
    let clock = Date.now();
    const store = new RecordingStore(new MemoryRunStore({ now: () => clock }));
    let runs = 0;
    const look = defineTool({ name: 'look', description: 'Reads.', input: z.object({}), readOnly: true, run: () => `read ${++runs}` });
    const first = await startRun(
      'task',
      { provider: new ScriptedProvider({ agents: { root: [{ calls: [{ name: 'look', id: 'call_a' }] }, { text: 'done' }] } }), tools: [look] },
      { store },
    );
    expect((await first.result).status).toBe('done');
    // The store as a crash after the first burst left it: the run row and the session, no response.
    const crashedAt = store.frozen.find((frozen) => holdsCall(frozen.rows, 'call_a'));
    expect(crashedAt, 'the response and the read it started were written in one burst').toBeDefined();
    const before = store.frozen[(crashedAt?.append ?? 1) - 2];
    expect(before && holdsCall(before.store.journal(first.id), 'call_a')).toBe(false);
    const again = new ScriptedProvider({ agents: { root: [{ calls: [{ name: 'look', id: 'call_b' }] }, { text: 'done again' }] } });
    const resumedStore = before?.store.clone() ?? new MemoryRunStore();
    clock += 3_600_000;
    const resumed = await resumeRun(first.id, { provider: again, tools: [look] }, { store: resumedStore });
    if ('finished' in resumed) throw new Error('the crashed run was found finished');
    const result = await resumed.result;
    expect(result.status).toBe('done');
    const results = resumedStore
      .journal(first.id)
      .flatMap(({ record }) => (record.type === 'message' && record.role === 'user' ? [...record.content] : []))
      .flatMap((block) => (typeof block === 'object' && block.type === 'tool_result' ? [block.tool_use_id] : []));
    // The read the crash lost is not in the history; the read the model asked for again is, once.
    expect(results).toEqual(['call_b']);
    expect(runs).toBe(2);
  });

  it('is idempotent unless it says otherwise', () => {
    const read = defineTool({ name: 'r', description: 'r', input: z.object({}), readOnly: true, run: () => 'x' });
    const readOnce = defineTool({ name: 'o', description: 'o', input: z.object({}), readOnly: true, idempotent: false, run: () => 'x' });
    const plain = defineTool({ name: 'p', description: 'p', input: z.object({}), run: () => 'x' });
    expect([read.readOnly, read.idempotent]).toEqual([true, true]);
    expect([readOnce.readOnly, readOnce.idempotent]).toEqual([true, false]);
    expect([plain.readOnly, plain.idempotent]).toEqual([false, false]);
  });

  it('the workspace tools that only read say so; writing and the shell do not', () => {
    // As the user running the test, who can enter its working directory wherever that is (as root, the
    // default would be nobody, who cannot enter a 0700 directory such as Stryker's sandbox).
    const tools = workspaceTools({ root: process.cwd(), allowWrite: true, allowShell: true, shellUser: process.getuid?.() ?? 0 });
    expect(Object.fromEntries(tools.map((tool) => [tool.name, [tool.readOnly, tool.idempotent]]))).toEqual({
      read_file: [true, true],
      list_dir: [true, true],
      search_files: [true, true],
      write_file: [false, true],
      run_shell: [false, false],
    });
  });
});
