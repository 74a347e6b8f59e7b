import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';

/**
 * The README's embedding examples are these files, verbatim; running them here keeps both honest.
 * test/package.test.ts runs the same files again from the packed package, as an app would.
 */

const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');

function codeOf(file: string): string {
  return readFileSync(new URL(`../examples/${file}`, import.meta.url), 'utf8').trim();
}

describe('README examples', () => {
  it('a host machine invokes a session as its own sub-agent and gets its reply as the done output', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { report } = await import('../examples/host-machine.js');
    log.mockRestore();
    expect(report).toMatchObject({ name: 'researcher', outcome: 'replied', text: '{\n  "ticket": 42,\n  "cause": "session cookie not renewed"\n}' });
    expect(readme).toContain(codeOf('host-machine.ts'));
  });

  it('a root session is a plain actor: it waits for a user message, fans out and settles', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { settled, states } = await import('../examples/root-session.js');
    log.mockRestore();
    expect(settled.value).toBe('readyForUser');
    expect(states.join(' → ')).toBe('readyForUser → streaming → dispatchingBatch → streaming → readyForUser → streaming → readyForUser');
    expect(readme).toContain(codeOf('root-session.ts'));
  });

  it('a host tool defined with zod: a valid call gets its result, an invalid one an error naming the field', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { answers, result } = await import('../examples/custom-tool.js');
    const printed = log.mock.calls.map((args) => args.map(String).join(' '));
    log.mockRestore();
    expect(JSON.parse(printed[0] ?? '')).toEqual({ type: 'object', properties: { path: { type: 'string', minLength: 1 } }, required: ['path'] });
    expect(answers).toEqual([
      { error: false, content: '{\n  "path": "a.md",\n  "words": 3\n}' },
      { error: true, content: expect.stringMatching(/^invalid input for tool 'word_count': path: /) },
    ]);
    expect(result).toMatchObject({ state: 'readyForUser', text: 'a.md has 3 words.' });
  });

  it('a durable run is interrupted, listed, and resumed from its SQLite store to the same answer', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { stopped, status, text } = await import('../examples/durable-run.js');
    const printed = log.mock.calls.map((args) => args.map(String).join(' '));
    log.mockRestore();
    expect(stopped.status).toBe('interrupted');
    expect(printed[0]).toMatch(/^[0-9A-Z]{26} interrupted 2 agents$/);
    expect(status).toBe('done');
    expect(text).toBe('a.md says hello.');
    expect(readme).toContain(codeOf('durable-run.ts'));
  });

  it('approvals: each request arrives at the root with the path, tool and input, and respond resumes exactly that call', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { asked, settled, written } = await import('../examples/approvals.js');
    log.mockRestore();
    expect(asked.map((r) => [r.agent.id, r.tool, r.input['path'], r.task])).toEqual([
      ['root/scribe', 'write_note', 'notes.md', 'Write the notes.'],
      ['root/scribe', 'write_note', '/etc/motd', 'Write the notes.'],
    ]);
    expect(written).toEqual(['notes.md']);
    expect(settled.value).toBe('readyForUser');
    expect(readme).toContain(codeOf('approvals.ts'));
  });
});
