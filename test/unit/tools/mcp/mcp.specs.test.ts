import { describe, expect, it } from 'vitest';
import { connectMcpServers, McpSpecError, parseMcpFlag, type McpServerSpec } from '../../../../src/index.js';

/**
 * How a user names MCP servers: `--mcp` values (split like a POSIX shell's words, nothing
 * expanded) and `mcp` entries, each refused with one line before any server starts, and what a
 * server is called in messages before it has told its name.
 */

/** The one-line refusal of `specs`, or a failure if they were taken. */
async function refusal(specs: unknown[]): Promise<string> {
  const error = await connectMcpServers(specs as McpServerSpec[]).then(
    async (toolset) => {
      await toolset.close();
      throw new Error('the specs were taken');
    },
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(McpSpecError);
  expect(error).toMatchObject({ kind: 'mcp-spec' });
  return (error as Error).message;
}

describe('--mcp values', () => {
  it('takes an http(s) URL in any case as a streamable HTTP endpoint', () => {
    expect(parseMcpFlag('HTTPS://Example.com/mcp')).toEqual({ url: 'HTTPS://Example.com/mcp' });
    expect(parseMcpFlag('Http://127.0.0.1:9/x')).toEqual({ url: 'Http://127.0.0.1:9/x' });
    // Not at the start: a command line whose first word looks like a URL's tail.
    expect(parseMcpFlag('xhttp://a')).toEqual({ command: 'xhttp://a', args: [] });
  });

  it('splits at runs of any whitespace, and an empty value is refused with one line', () => {
    expect(parseMcpFlag(' \tnode\t\tserver.js \n --flag ')).toEqual({ command: 'node', args: ['server.js', '--flag'] });
    expect(() => parseMcpFlag(' \t ')).toThrow(new McpSpecError('--mcp needs a command or an http(s):// URL, got an empty value'));
  });

  it('keeps backslashes inside single quotes, and inside double quotes before anything but " \\ $ `', () => {
    expect(parseMcpFlag(String.raw`prog 'a\b' "c\d" "e\"f" "g\\h" "\$i" "\`j"`)).toEqual({
      command: 'prog',
      args: [String.raw`a\b`, String.raw`c\d`, 'e"f', String.raw`g\h`, '$i', '`j'],
    });
  });

  it('an unquoted backslash takes the next character as it is; one at the very end stays', () => {
    expect(parseMcpFlag('prog a\\ b \\\'c\\" d\\\\ e\\')).toEqual({ command: 'prog', args: ['a b', `'c"`, 'd\\', 'e\\'] });
  });

  it('joins quoted and unquoted parts of one word, and an unclosed single quote is refused', () => {
    expect(parseMcpFlag(`prog pre"mid dle"'post' x`)).toEqual({ command: 'prog', args: ['premid dlepost', 'x'] });
    expect(() => parseMcpFlag(`prog 'open`)).toThrow(new McpSpecError(`--mcp value has an unclosed ' quote: prog 'open`));
  });
});

describe('mcp entries refused before anything starts', () => {
  it('an entry that is not an object, or names neither a command nor a url', async () => {
    expect(await refusal([null])).toBe('an mcp server must be { command, args } or { url }, got null');
    expect(await refusal(['node server.js'])).toBe('an mcp server must be { command, args } or { url }, got node server.js');
    expect(await refusal([{ args: ['x'] }])).toBe('an mcp server needs a non-empty `command` (stdio) or a `url` (streamable HTTP)');
    expect(await refusal([{ command: 42 }])).toBe('an mcp server needs a non-empty `command` (stdio) or a `url` (streamable HTTP)');
    expect(await refusal([{ url: 42 }])).toBe('an mcp server needs a non-empty `command` (stdio) or a `url` (streamable HTTP)');
  });

  it('a url that does not parse, or is not http(s)', async () => {
    expect(await refusal([{ url: 'not a url' }])).toBe('mcp server url "not a url" is not a URL');
    expect(await refusal([{ url: 'file:///srv/mcp' }])).toBe('mcp server url "file:///srv/mcp" must be http:// or https://');
  });

  it('a timeoutMs that is not a whole number of at least 1 ms', async () => {
    for (const timeoutMs of [0, -5, 1.5, Number.NaN, 2 ** 53])
      expect(await refusal([{ command: 'node', timeoutMs }])).toBe(`mcp server timeoutMs must be an integer ≥ 1, got ${String(timeoutMs)}`);
    expect(await refusal([{ url: 'http://127.0.0.1:9/', timeoutMs: '5' }])).toBe('mcp server timeoutMs must be an integer ≥ 1, got 5');
  });
});

describe('what a server is called before it has told its name', () => {
  it('a command by the last part of its path, either slash', async () => {
    await expect(connectMcpServers([{ command: '/no/such/dir/exarch-mcp-a' }])).rejects.toThrow(
      /^MCP server 'exarch-mcp-a' could not start: spawn \/no\/such\/dir\/exarch-mcp-a ENOENT$/,
    );
    await expect(connectMcpServers([{ command: String.raw`C:\no\exarch-mcp-b.exe` }])).rejects.toThrow(/^MCP server 'exarch-mcp-b\.exe' could not start: /);
  });

  it('an endpoint by its host and port, or by the name it was given', async () => {
    await expect(connectMcpServers([{ url: 'http://127.0.0.1:9/mcp' }], { startTimeoutMs: 5_000 })).rejects.toThrow(
      /^MCP server '127\.0\.0\.1:9' could not start: /,
    );
    await expect(connectMcpServers([{ url: 'http://127.0.0.1:9/mcp', name: 'remote' }], { startTimeoutMs: 5_000 })).rejects.toThrow(
      /^MCP server 'remote' could not start: /,
    );
  });
});
