import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool, elisionMarker } from '../../../src/index.js';
import { runTraced, toolResults, userTexts } from '../../support/helpers.js';
import type { ScriptedStep } from '../../../src/testing/index.js';

/** CONTRACT §3: the reply contract. */

const readFile = defineTool({
  name: 'read_file',
  description: 'Read a file',
  input: z.object({ path: z.string() }),
  run: ({ path }) => `contents of ${path}`,
});

/** A parent that spawns one child `c` and waits for it, then answers. */
function parentOf(task = 'do the task'): ScriptedStep[] {
  return [{ calls: [{ name: 'agent', input: { name: 'c', task } }] }, { text: 'Waiting for c.' }, { text: 'Final answer.' }];
}

/** The text of the synthetic inbox turn the root received. */
function inboxTurn(messages: readonly import('../../../src/engine/types.js').Message[]): string {
  const turn = userTexts(messages).find((t) => t.startsWith('[agent '));
  if (turn === undefined) throw new Error('the root received no inbox turn');
  return turn;
}

function makeBrief(length: number): string {
  const lines: string[] = ['# Testing setup', ''];
  let n = 0;
  while (lines.join('\n').length < length) lines.push(`- finding ${++n}: vitest runs test/unit/${n}.test.ts with fixtures in test/fixtures/${n}/`);
  return lines.join('\n').slice(0, length);
}

describe('the reply contract', () => {
  it('the incident: the parent receives the 3,354-character brief verbatim, never the 396-character sign-off', async () => {
    const brief = makeBrief(3354);
    const signOff = 'That wraps it up. '.repeat(30).slice(0, 396);
    expect(brief).toHaveLength(3354);
    expect(signOff).toHaveLength(396);
    const { snapshot, provider, trail } = await runTraced(
      {
        root: parentOf('map the testing setup'),
        c: [
          { text: 'Let me look at the test setup.', calls: [{ name: 'read_file', input: { path: 'package.json' } }] },
          // The report goes through reply; a trailing tool call and a sign-off follow it.
          { content: [{ name: 'reply', input: { result: brief } }, { name: 'read_file', input: { path: 'vitest.config.ts' } }, signOff] },
        ],
      },
      { task: 'go', tools: [readFile] },
    );
    const turn = inboxTurn(snapshot.context.messages);
    expect(turn).toBe(`[agent 'c' replied]\n${brief}`);
    expect(turn).toContain('\n- finding 1:');
    expect(turn).not.toContain('\\n');
    expect(JSON.stringify(snapshot.context.messages)).not.toContain(signOff);
    expect(trail.get('root/c')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'dispatchingBatch', 'replied']);
    expect(provider.requestsOf('root/c')).toHaveLength(2);
    expect(provider.pairingViolations).toEqual([]);
  });

  it('every call of the replying batch is still dispatched and answered, in model order', async () => {
    const ran: string[] = [];
    const slow = defineTool({
      name: 'slow',
      description: 'slow',
      input: z.object({ tag: z.string() }),
      run: async ({ tag }) => {
        await new Promise((r) => setTimeout(r, tag === 'a' ? 20 : 1));
        ran.push(tag);
        return `done ${tag}`;
      },
    });
    const { logs } = await runTraced(
      {
        root: parentOf(),
        c: [
          {
            calls: [
              { name: 'slow', input: { tag: 'a' } },
              { name: 'reply', input: { result: 'r' } },
              { name: 'slow', input: { tag: 'b' } },
            ],
          },
        ],
      },
      { task: 'go', tools: [slow] },
    );
    expect(ran.sort()).toEqual(['a', 'b']);
    const childMessages = logs.records('root/c').filter((r) => r.type === 'message' && r.role === 'user');
    const results = childMessages.at(-1);
    expect(results?.type === 'message' && results.content.map((b) => (b.type === 'tool_result' ? b.content : ''))).toEqual([
      'done a',
      'Reply recorded. Your session ends once the other calls of this response have run.',
      'done b',
    ]);
  });

  it('makes no model request after replied', async () => {
    const { provider } = await runTraced(
      { root: parentOf(), c: [{ calls: [{ name: 'reply', input: { result: 'r' } }] }, { text: 'never requested' }] },
      { task: 'go' },
    );
    expect(provider.requestsOf('root/c')).toHaveLength(1);
  });

  it('the first reply of a batch stands and later ones get an error', async () => {
    const { snapshot, logs } = await runTraced(
      {
        root: parentOf(),
        c: [
          {
            calls: [
              { name: 'reply', input: { result: 'first' } },
              { name: 'reply', input: { result: 'second' } },
            ],
          },
        ],
      },
      { task: 'go' },
    );
    expect(inboxTurn(snapshot.context.messages)).toBe("[agent 'c' replied]\nfirst");
    const last = logs
      .records('root/c')
      .filter((r) => r.type === 'message')
      .at(-1);
    expect(last?.type === 'message' && last.content[1]).toMatchObject({ is_error: true, content: expect.stringMatching(/first reply stands/) });
  });

  it('an object payload is pretty-printed with 2-space indentation', async () => {
    const payload = { files: ['a.ts', 'b.ts'], ok: true };
    const { snapshot } = await runTraced({ root: parentOf(), c: [{ calls: [{ name: 'reply', input: { result: payload } }] }] }, { task: 'go' });
    expect(inboxTurn(snapshot.context.messages)).toBe(`[agent 'c' replied]\n{\n  "files": [\n    "a.ts",\n    "b.ts"\n  ],\n  "ok": true\n}`);
  });

  it('numbers and booleans render as their JSON text', async () => {
    const { snapshot } = await runTraced({ root: parentOf(), c: [{ calls: [{ name: 'reply', input: { result: 42 } }] }] }, { task: 'go' });
    expect(inboxTurn(snapshot.context.messages)).toBe("[agent 'c' replied]\n42");
  });

  it.each([
    ['missing', {}],
    ['null', { result: null }],
    ['an empty string', { result: '' }],
  ])('a %s result ends the child with outcome empty', async (_label, input) => {
    const { snapshot, last } = await runTraced({ root: parentOf(), c: [{ calls: [{ name: 'reply', input }] }] }, { task: 'go' });
    expect(inboxTurn(snapshot.context.messages)).toBe("[agent 'c' finished with no output]");
    expect(last.get('root/c')?.value).toBe('replied');
    expect(last.get('root/c')?.output?.outcome).toBe('empty');
  });

  it('an oversize payload is middle-elided to the reply cap, marker included', async () => {
    const payload = `HEAD-${'x'.repeat(50_000)}-TAIL`;
    const { snapshot } = await runTraced({ root: parentOf(), c: [{ calls: [{ name: 'reply', input: { result: payload } }] }] }, { task: 'go', replyCap: 1000 });
    const text = inboxTurn(snapshot.context.messages).slice("[agent 'c' replied]\n".length);
    expect(text.length).toBeLessThanOrEqual(1000);
    expect(text.length).toBeGreaterThan(900);
    expect(text.startsWith('HEAD-')).toBe(true);
    expect(text.endsWith('-TAIL')).toBe(true);
    expect(text).toMatch(/\[… \d+ characters elided by exarch …\]/);
    const elided = Number(/\[… (\d+) characters/.exec(text)?.[1]);
    expect(text.length - elisionMarker(elided).length + elided).toBe(payload.length);
  });

  it('the default reply cap is 16,000 characters', async () => {
    const payload = 'y'.repeat(20_000);
    const { snapshot } = await runTraced({ root: parentOf(), c: [{ calls: [{ name: 'reply', input: { result: payload } }] }] }, { task: 'go' });
    const text = inboxTurn(snapshot.context.messages).slice("[agent 'c' replied]\n".length);
    expect(text.length).toBe(16_000);
  });

  it('reply is not offered to the root, and a call to it is refused while the root carries on', async () => {
    const { snapshot, provider, trail } = await runTraced(
      { root: [{ calls: [{ name: 'reply', input: { result: 'x' } }] }, { text: 'ok, continuing' }] },
      { task: 'go' },
    );
    expect(provider.requests[0]?.tools).not.toContain('reply');
    expect(toolResults(snapshot.context.messages)).toEqual([
      { type: 'tool_result', tool_use_id: expect.any(String), content: "tool 'reply' is not available to this agent", is_error: true },
    ]);
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'readyForUser']);
  });

  it('a sub-agent that never replies is reminded exactly once, then finishes with no output and its prose is not scraped', async () => {
    const prose = 'Here is my full report, written as prose instead of a reply.';
    const { snapshot, logs, provider } = await runTraced({ root: parentOf(), c: [{ text: prose }, { text: `${prose} (again)` }] }, { task: 'go' });
    const nudges = logs.records('root/c').filter((r) => r.type === 'nudge');
    expect(nudges).toHaveLength(1);
    expect(nudges[0]).toMatchObject({ latch: 'reply-reminder', text: expect.stringContaining('`reply`') });
    expect(provider.requestsOf('root/c')).toHaveLength(2);
    expect(inboxTurn(snapshot.context.messages)).toBe("[agent 'c' finished with no output]");
    expect(JSON.stringify(snapshot.context.messages)).not.toContain(prose);
  });

  it('the reminder is only sent when the sub-agent is quiet: with children running it waits instead', async () => {
    const { logs, trail } = await runTraced(
      {
        root: parentOf(),
        c: [
          { calls: [{ name: 'agent', input: { name: 'g', task: 'x' } }] },
          { text: 'waiting for g' },
          { calls: [{ name: 'reply', input: { result: 'from c' } }] },
        ],
        g: [{ calls: [{ name: 'reply', input: { result: 'from g' } }], delayMs: 5 }],
      },
      { task: 'go' },
    );
    expect(logs.records('root/c').filter((r) => r.type === 'nudge')).toHaveLength(0);
    expect(trail.get('root/c')).toContain('readyForUser');
  });

  it('a complete reply in a truncated batch still ends the child in replied', async () => {
    const { snapshot, last } = await runTraced(
      {
        root: parentOf(),
        c: [
          {
            calls: [
              { name: 'reply', input: { result: 'kept' } },
              { name: 'read_file', input: { path: 'x' }, cutOff: true },
            ],
          },
        ],
      },
      { task: 'go', tools: [readFile] },
    );
    expect(last.get('root/c')?.value).toBe('replied');
    expect(inboxTurn(snapshot.context.messages)).toBe("[agent 'c' replied]\nkept");
  });

  it('children still running when a sub-agent replies are cancelled', async () => {
    const { logs, last } = await runTraced(
      {
        root: parentOf(),
        c: [{ calls: [{ name: 'agent', input: { name: 'g', task: 'slow work' } }] }, { calls: [{ name: 'reply', input: { result: 'done without g' } }] }],
        g: [{ text: 'never finishes', delayMs: 60_000 }],
      },
      { task: 'go' },
    );
    expect(last.get('root/c')?.value).toBe('replied');
    expect(last.get('root/c/g')?.value).toBe('cancelled');
    expect(logs.records('root/c/g').at(-1)).toMatchObject({ type: 'outcome', outcome: 'cancelled', reason: 'parent replied' });
  });
});
