import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { runAgent, type McpServerSpec } from '../../../../src/index.js';
import { ScriptedProvider } from '../../../../src/testing/index.js';
import { toolResults } from '../../../support/helpers.js';

/**
 * What a model is shown for a call of an MCP server's tool: each kind of content block as the
 * server sent it, and the server's own errors, against a hand-written stdio MCP server
 * (test/fixtures/mcp/scripted.mjs) that answers whatever a scenario says.
 */

const SCRIPTED = fileURLToPath(new URL('../../../fixtures/mcp/scripted.mjs', import.meta.url));
const scripted = (scenario: object): McpServerSpec => ({ command: process.execPath, args: [SCRIPTED, JSON.stringify(scenario)], name: 's' });

/** Runs one agent that calls each of `results`' tools once, in order; returns what it was shown for each. */
async function shown(results: Record<string, object>): Promise<{ content: string; is_error: boolean }[]> {
  const names = Object.keys(results);
  const provider = new ScriptedProvider({
    agents: { root: [{ calls: names.map((name) => ({ name: `mcp__s__${name}`, input: {} })) }, { text: 'done' }] },
  });
  const tools = names.map((name) => ({ name, inputSchema: { type: 'object' } }));
  const run = await runAgent('call them', { provider, mcp: [scripted({ tools, results })] });
  expect(run.text).toBe('done');
  return toolResults(run.snapshot.context.messages).map((r) => ({ content: r.content, is_error: r.is_error === true }));
}

describe('binary content is described, never inlined', () => {
  it('counts the bytes base64 data decodes to, with or without padding', async () => {
    const [three, two, one, none] = await shown({
      three: { content: [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }] },
      two: { content: [{ type: 'image', data: 'AAA=', mimeType: 'image/png' }] },
      one: { content: [{ type: 'audio', data: 'AA==', mimeType: 'audio/wav' }] },
      none: { content: [{ type: 'audio', data: '', mimeType: 'audio/wav' }] },
    });
    expect(three).toEqual({ content: '[image: image/png, 3 bytes, not shown]', is_error: false });
    expect(two).toEqual({ content: '[image: image/png, 2 bytes, not shown]', is_error: false });
    expect(one).toEqual({ content: '[audio: audio/wav, 1 bytes, not shown]', is_error: false });
    expect(none).toEqual({ content: '[audio: audio/wav, 0 bytes, not shown]', is_error: false });
  });

  it('keeps a server’s labels to one line of at most 200 characters', async () => {
    const [spread, long, longest, link] = await shown({
      spread: { content: [{ type: 'image', data: 'AAAA', mimeType: 'image/\n\t  png' }] },
      long: { content: [{ type: 'image', data: 'AAAA', mimeType: 'm'.repeat(201) }] },
      longest: { content: [{ type: 'image', data: 'AAAA', mimeType: 'n'.repeat(200) }] },
      link: { content: [{ type: 'resource_link', uri: 'file:///a.md', name: 'two\nlines', mimeType: 'text/markdown' }] },
    });
    expect(spread?.content).toBe('[image: image/ png, 3 bytes, not shown]');
    expect(long?.content).toBe(`[image: ${'m'.repeat(200)}…, 3 bytes, not shown]`);
    expect(longest?.content).toBe(`[image: ${'n'.repeat(200)}, 3 bytes, not shown]`);
    expect(link?.content).toBe('[resource link: two lines file:///a.md (text/markdown)]');
  });

  it('describes a blob resource by its type, as binary without one, shows a text resource’s text, and a link without a type', async () => {
    const [blob, typed, link, text] = await shown({
      blob: { content: [{ type: 'resource', resource: { uri: 'file:///x.bin', blob: 'AAAAAAAA' } }] },
      typed: { content: [{ type: 'resource', resource: { uri: 'file:///x.gz', mimeType: 'application/gzip', blob: 'AAAA' } }] },
      link: { content: [{ type: 'resource_link', uri: 'file:///b.md', name: 'b' }] },
      text: { content: [{ type: 'resource', resource: { uri: 'file:///x.txt', text: 'inside' } }] },
    });
    expect(typed?.content).toBe('[resource file:///x.gz: application/gzip, 3 bytes, not shown]');
    expect(link?.content).toBe('[resource link: b file:///b.md]');
    expect(blob?.content).toBe('[resource file:///x.bin: binary, 6 bytes, not shown]');
    expect(text?.content).toBe('[resource file:///x.txt]\ninside');
  });
});

describe('text and structured content', () => {
  it('shows text blocks, skips empty ones, and leaves out structured content a text block already carries', async () => {
    const [both, empty, structured] = await shown({
      both: {
        content: [
          { type: 'image', data: 'AAAA', mimeType: 'image/png' },
          { type: 'text', text: '{"n":1}' },
        ],
        structuredContent: { n: 1 },
      },
      empty: {
        content: [
          { type: 'text', text: '' },
          { type: 'text', text: 'after' },
        ],
      },
      structured: { content: [{ type: 'image', data: 'AAAA', mimeType: 'image/png' }], structuredContent: { n: 2 } },
    });
    expect(both).toEqual({ content: '[image: image/png, 3 bytes, not shown]\n\n{"n":1}', is_error: false });
    expect(empty).toEqual({ content: 'after', is_error: false });
    expect(structured).toEqual({ content: '[image: image/png, 3 bytes, not shown]\n\n{\n  "n": 2\n}', is_error: false });
  });
});

describe('the server’s own errors', () => {
  it('an error result without text says which tool of which server failed; isError false is a result', async () => {
    const [quiet, fine] = await shown({
      quiet: { isError: true, content: [] },
      fine: { isError: false, content: [{ type: 'text', text: 'fine' }] },
    });
    expect(quiet).toEqual({ content: "tool 'quiet' of MCP server 's' reported an error without a message", is_error: true });
    expect(fine).toEqual({ content: 'fine', is_error: false });
  });

  it('a result the protocol does not allow is an error naming the server, and the server stays usable', async () => {
    const [odd, after] = await shown({
      odd: { content: [{ type: 'video', data: 'AAAA' }] },
      after: { content: [{ type: 'text', text: 'still here' }] },
    });
    expect(odd?.is_error).toBe(true);
    expect(odd?.content).toMatch(/^tool 'mcp__s__odd' failed: MCP server 's': /);
    expect(after).toEqual({ content: 'still here', is_error: false });
  });
});
