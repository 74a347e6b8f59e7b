import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, echoInbox, exarch, serve, stream, workdir } from '../../support/cliHarness.js';
import { hasLoneSurrogate, loneSurrogatesIn, rawToolCall, toolResultsOf } from '../../support/hostileInput.js';

/**
 * Issue 13, hole 10: a lone surrogate (`\ud800`, half of a UTF-16 pair) in a reply, a tool result
 * or a model's own text went verbatim into the next request, which the API refuses with a 400, and
 * the parent failed on text it did not write; `clip` at a small cap cut a pair in half. The real
 * CLI against the loopback server, whose parsed request bodies are the oracle: no lone surrogate,
 * as a code unit or as a JSON escape, in any of them.
 */

describe('no request carries a lone surrogate', () => {
  it('a path holding one is refused by name, and neither the call echoed back nor its result carries it', async () => {
    const cwd = workdir();
    // What the file system would have been handed instead: U+FFFD, a file the model did not name.
    writeFileSync(join(cwd, 'notes\uFFFD.md'), 'not the file you asked for');
    const server = await serve({ root: [{ kind: 'stream', events: rawToolCall('read_file', '{"path": "notes\\ud800.md"}') }, stream({ text: 'understood' })] });
    const run = await exarch(['run', '--no-store', 'go'], { server, cwd });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('understood\n');
    expect(server.requests).toHaveLength(2);
    expect(loneSurrogatesIn(server.requests)).toEqual([]);
    const [result] = toolResultsOf(server.requests[1]);
    expect(result).toMatchObject({ isError: true, content: expect.stringMatching(/lone surrogate/) });
    expect(result?.content).not.toContain('not the file you asked for');
    // The call is still in the history, its input as well formed as the API needs it.
    expect(server.requests[1]?.body.messages[1]?.content).toEqual([expect.objectContaining({ type: 'tool_use', input: { path: 'notes\uFFFD.md' } })]);
  });

  it('a sub-agent’s text, tool call and reply holding them reach the server and the parent as U+FFFD; the parent finishes', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'kid', task: 'x' })] }), stream({ text: 'Waiting.' }), echoInbox],
      kid: [
        // JSON escapes of lone surrogates, as a model can emit them: in text, in a tool input, in a reply.
        stream({ text: 'thinking \ud800 aloud', toolCalls: [call('list_dir', { path: '.\udc00' })] }),
        stream({ toolCalls: [call('reply', { result: 'half \ud800 of a pair \udc00' })] }),
      ],
    });
    const run = await exarch(['run', '--no-store', 'go'], { server });
    expect(run.code).toBe(0);
    expect(loneSurrogatesIn(server.requests)).toEqual([]);
    expect(run.stdout).toBe("Heard:\n[agent 'kid' replied]\nhalf \uFFFD of a pair \uFFFD\n");
    // The kid's second request echoes its own text and call back, mended.
    const echoed = JSON.stringify(server.requests.filter((r) => r.agent === 'kid')[1]?.body.messages[1]);
    expect(echoed).toContain('thinking \uFFFD aloud');
    expect(echoed).toContain('.\uFFFD');
  });

  it('a tool call whose id and name hold them is answered, and both go back mended', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [{ id: 'toolu_\ud800x', name: 'read_file\udc00', input: { path: 'a.md' } }] }), stream({ text: 'understood' })],
    });
    const run = await exarch(['run', '--no-store', 'go'], { server });
    expect(run.code).toBe(0);
    expect(run.stdout).toBe('understood\n');
    expect(loneSurrogatesIn(server.requests)).toEqual([]);
    expect(server.requests[1]?.body.messages[1]?.content).toEqual([
      expect.objectContaining({ type: 'tool_use', id: 'toolu_\uFFFDx', name: 'read_file\uFFFD' }),
    ]);
    expect(toolResultsOf(server.requests[1])).toEqual([expect.objectContaining({ id: 'toolu_\uFFFDx', isError: true })]);
  });

  it('a reply cap smaller than the elision marker never hands the parent half of a pair', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'kid', task: 'x' })] }), stream({ text: 'Waiting.' }), echoInbox],
      kid: [stream({ toolCalls: [call('reply', { result: '😀'.repeat(10) })] })],
    });
    const run = await exarch(['run', '--no-store', '--reply-cap', '5', 'go'], { server });
    expect(run.code).toBe(0);
    expect(loneSurrogatesIn(server.requests)).toEqual([]);
    expect(hasLoneSurrogate(run.stdout)).toBe(false);
    expect(run.stdout).toBe("Heard:\n[agent 'kid' replied]\n😀😀\n");
  });
});
