import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';

/**
 * The embedding examples of the README and docs/ are these files, verbatim; running them here keeps both honest.
 * test/e2e/package/package.test.ts runs the same files again from the packed package, as an app would.
 */

const docsDir = new URL('../../../docs/', import.meta.url);
/** The README and every page of docs/, as one text: an example is shown on the page of its topic. */
const readme = [
  new URL('../../../README.md', import.meta.url),
  ...readdirSync(docsDir)
    .filter((f) => f.endsWith('.md'))
    .map((f) => new URL(f, docsDir)),
]
  .map((file) => readFileSync(file, 'utf8'))
  .join('\n');

function codeOf(file: string): string {
  return readFileSync(new URL(`../../../examples/${file}`, import.meta.url), 'utf8').trim();
}

describe('the examples in the README and docs/', () => {
  it('a host machine invokes a session as its own sub-agent and gets its reply as the done output', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { report } = await import('../../../examples/host-machine.js');
    log.mockRestore();
    expect(report).toMatchObject({ name: 'researcher', outcome: 'replied', text: '{\n  "ticket": 42,\n  "cause": "session cookie not renewed"\n}' });
    expect(readme).toContain(codeOf('host-machine.ts'));
  });

  it('a root session is a plain actor: it waits for a user message, fans out and settles', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { settled, states } = await import('../../../examples/root-session.js');
    log.mockRestore();
    expect(settled.value).toBe('readyForUser');
    expect(states.join(' → ')).toBe('readyForUser → streaming → dispatchingBatch → streaming → readyForUser → streaming → readyForUser');
    expect(readme).toContain(codeOf('root-session.ts'));
  });

  it('a host tool defined with zod: a valid call gets its result, an invalid one an error naming the field', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { answers, result } = await import('../../../examples/custom-tool.js');
    const printed = log.mock.calls.map((args) => args.map(String).join(' '));
    log.mockRestore();
    expect(JSON.parse(printed[0] ?? '')).toEqual({ type: 'object', properties: { path: { type: 'string', minLength: 1 } }, required: ['path'] });
    expect(answers).toEqual([
      { error: false, content: '{\n  "path": "a.md",\n  "words": 3\n}' },
      { error: true, content: expect.stringMatching(/^invalid input for tool 'word_count': path: /) },
    ]);
    expect(result).toMatchObject({ state: 'readyForUser', text: 'a.md has 3 words.' });
  });

  it('declared agents: a researcher corrects an invalid typed reply, a writer has its own prompt, the host reads the typed brief', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { brief, provider, result } = await import('../../../examples/declared-agents.js');
    const printed = log.mock.calls.map((args) => args.map(String).join(' '));
    log.mockRestore();
    expect(result.state).toBe('replied');
    expect(brief).toEqual({
      headline: 'Every agent is a state machine',
      findings: { topic: 'exarch', sources: ['notes/arch.md', 'notes/adr-7.md'], confidence: 0.9 },
    });
    expect(printed.slice(0, 2)).toEqual(['replied Every agent is a state machine', 'notes/arch.md, notes/adr-7.md']);
    expect(printed[2]).toMatch(/^invalid input for tool 'reply': sources: .+; confidence: .+$/);
    const scout = provider.requestsOf('root/scout');
    expect(scout.map((r) => r.model)).toEqual(['claude-haiku-4-5', 'claude-haiku-4-5', 'claude-haiku-4-5']);
    expect(scout[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply', 'read_notes']);
    const pen = provider.requestsOf('root/pen');
    expect(pen[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply']);
    expect(pen[0]?.system).toBe('You write one short headline. Reply with it as `result`.');
    expect(pen[0]).not.toHaveProperty('model');
    // The root model read the researcher's typed reply rendered as text; the root itself was offered `reply` for its output.
    const heard = provider.requestsOf('root')[1]?.lastMessage?.content.find((b) => b.type === 'text');
    expect(heard?.type === 'text' ? heard.text : '').toBe(
      `[agent 'scout' replied]\n{\n  "topic": "exarch",\n  "sources": [\n    "notes/arch.md",\n    "notes/adr-7.md"\n  ],\n  "confidence": 0.9\n}`,
    );
    expect(provider.requestsOf('root')[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply', 'read_notes']);
  });

  it('a durable run is interrupted, listed, and resumed from its SQLite store to the same answer', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { stopped, status, text } = await import('../../../examples/durable-run.js');
    const printed = log.mock.calls.map((args) => args.map(String).join(' '));
    log.mockRestore();
    expect(stopped.status).toBe('interrupted');
    expect(printed[0]).toMatch(/^[0-9A-Z]{26} interrupted 2 agents$/);
    expect(status).toBe('done');
    expect(text).toBe('a.md says hello.');
    expect(readme).toContain(codeOf('durable-run.ts'));
  });

  it('a host follows the whole tree as typed events: the async iterable and the listener form', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { lines, requests } = await import('../../../examples/host-events.js');
    log.mockRestore();
    // Written from the protocol: each session starts, streams, runs its batch, waits or replies.
    expect(lines.filter((line) => line.startsWith('root › researcher › reader'))).toEqual([
      'root › researcher › reader: started (Read auth.log)',
      'root › researcher › reader: starting',
      'root › researcher › reader: streaming',
      'root › researcher › reader: calls reply',
      'root › researcher › reader: dispatchingBatch',
      'root › researcher › reader: replied',
      'root › researcher › reader: ended done',
    ]);
    expect(lines).toContain('root › researcher: ← reader replied: auth.log: 401 after 30 min');
    expect(lines).toContain('root: ← researcher replied: cookie not renewed');
    expect(lines.at(-1)).toBe('root: ended stopped');
    // root 2, researcher 2, reader 1.
    expect(requests).toBe(5);
    expect(readme).toContain(codeOf('host-events.ts'));
  });

  it('approvals: each request arrives at the root with the path, tool and input, and respond resumes exactly that call', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { asked, settled, written } = await import('../../../examples/approvals.js');
    log.mockRestore();
    expect(asked.map((r) => [r.agent.id, r.tool, r.input['path'], r.task])).toEqual([
      ['root/scribe', 'write_note', 'notes.md', 'Write the notes.'],
      ['root/scribe', 'write_note', '/etc/motd', 'Write the notes.'],
    ]);
    expect(written).toEqual(['notes.md']);
    expect(settled.value).toBe('readyForUser');
    expect(readme).toContain(codeOf('approvals.ts'));
  });

  it('OpenTelemetry: the run becomes invoke_agent, chat and execute_tool spans in the host’s tracer provider', async () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => undefined);
    const { spans } = await import('../../../examples/otel-export.js');
    log.mockRestore();
    expect(spans.map((span) => span.name).sort()).toEqual([
      'chat claude-sonnet-5-5',
      'chat claude-sonnet-5-5',
      'chat claude-sonnet-5-5',
      'execute_tool agent',
      'execute_tool reply',
      'execute_tool wait_for_agents',
      'invoke_agent researcher',
      'invoke_agent root',
    ]);
    const researcher = spans.find((span) => span.name === 'invoke_agent researcher');
    expect(spans.find((span) => span.name === 'invoke_agent root')?.spanContext().spanId).toBe(researcher?.parentSpanContext?.spanId);
    expect(readme).toContain(codeOf('otel-export.ts'));
  });
});
