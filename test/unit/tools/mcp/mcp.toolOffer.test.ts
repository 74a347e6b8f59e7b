import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { connectMcpServers, type McpServerSpec, type McpToolset } from '../../../../src/index.js';

/**
 * What a model is offered from MCP servers: the tool names (within the provider's
 * `^[A-Za-z0-9_-]{1,64}$`, distinct, the same on every run), the descriptions and the input
 * schemas, against a hand-written stdio MCP server (test/fixtures/mcp/scripted.mjs) that lists
 * whatever a scenario says, the way a careless or hostile server might.
 */

const SCRIPTED = fileURLToPath(new URL('../../../fixtures/mcp/scripted.mjs', import.meta.url));
const scripted = (scenario: object, extra: Partial<McpServerSpec> = {}): McpServerSpec => ({
  command: process.execPath,
  args: [SCRIPTED, JSON.stringify(scenario)],
  ...extra,
});
const tool = (name: string, more: object = {}) => ({ name, description: `does ${name}`, inputSchema: { type: 'object' }, ...more });

/** Connects, hands the toolset to `check`, and closes it whatever happens. */
async function offered(specs: McpServerSpec[], check: (toolset: McpToolset) => void, takenNames: string[] = []): Promise<void> {
  const toolset = await connectMcpServers(specs, { takenNames });
  try {
    check(toolset);
  } finally {
    await toolset.close();
  }
}

/** `n` nested objects: `{ a: { a: … {} } }`. */
const chain = (n: number): object => (n <= 1 ? {} : { a: chain(n - 1) });

describe('server names in tool names', () => {
  it('cleans the name a server reports, trims its underscores, cuts it at 24 characters and tells apart servers that clean up alike', async () => {
    await offered(
      [
        scripted({ name: 'My Server!!', tools: [tool('t')] }),
        scripted({ name: 'My /. Server', tools: [tool('t')] }),
        scripted({ name: '__edges__', tools: [tool('t')] }),
        scripted({ name: 'x'.repeat(30), tools: [tool('t')] }),
        scripted({ name: 'x'.repeat(40), tools: [tool('t')] }),
        scripted({ name: '!!!', tools: [tool('t')] }),
        scripted({ name: '', tools: [tool('t')] }),
        scripted({ name: 'ignored', tools: [tool('t')] }, { name: 'chosen' }),
      ],
      (toolset) => {
        expect(toolset.servers.map((s) => s.name)).toEqual([
          'My_Server',
          'My_Server_2',
          'edges',
          'xxxxxxxxxxxxxxxxxxxxxxxx',
          'xxxxxxxxxxxxxxxxxxxxxx_2',
          'server',
          'server_2',
          'chosen',
        ]);
        expect(toolset.tools.map((t) => t.name)).toEqual([
          'mcp__My_Server__t',
          'mcp__My_Server_2__t',
          'mcp__edges__t',
          'mcp__xxxxxxxxxxxxxxxxxxxxxxxx__t',
          'mcp__xxxxxxxxxxxxxxxxxxxxxx_2__t',
          'mcp__server__t',
          'mcp__server_2__t',
          'mcp__chosen__t',
        ]);
      },
    );
  });

  it('numbers servers of the same name on past 9, keeping each name within 24 characters', async () => {
    const specs = Array.from({ length: 11 }, () => scripted({ name: 'y'.repeat(24), tools: [] }));
    await offered(specs, (toolset) => {
      expect(toolset.servers.map((s) => s.name)).toEqual([
        'yyyyyyyyyyyyyyyyyyyyyyyy',
        ...[2, 3, 4, 5, 6, 7, 8, 9].map((n) => `yyyyyyyyyyyyyyyyyyyyyy_${n}`),
        'yyyyyyyyyyyyyyyyyyyyy_10',
        'yyyyyyyyyyyyyyyyyyyyy_11',
      ]);
      expect(toolset.tools).toEqual([]);
    });
  });
});

describe('tool names', () => {
  it('keeps a clean name that fits in 64 characters as it is, and cuts a longer one to 64 with a stable hash', async () => {
    // mcp__s__ is 8 characters: a tool name of 56 fits exactly, one of 57 does not.
    const fits = 'f'.repeat(56);
    const over = 'o'.repeat(57);
    await offered([scripted({ name: 's', tools: [tool(fits), tool(over), tool('dots.and/slashes here'), tool('')] })], (toolset) => {
      expect(toolset.servers[0]?.tools).toEqual([
        `mcp__s__${fits}`,
        `mcp__s__${'o'.repeat(47)}_5d5a8c18`,
        'mcp__s__dots_and_slashes_here',
        'mcp__s___28a3d6d5',
      ]);
    });
  });

  it('a name a host tool holds goes to the next hash window, and past every window to a number', async () => {
    const digest = '6d89a4da9dc146592da7650285c5c63e60af600f785932dd63553b7da241d1a8';
    const windows = Array.from({ length: 57 }, (_, i) => `mcp__s__echo_${digest.slice(i, i + 8)}`);
    await offered(
      [scripted({ name: 's', tools: [tool('echo')] })],
      (toolset) => {
        expect(toolset.servers[0]?.tools).toEqual(['mcp__s__echo_d89a4da9']);
      },
      ['mcp__s__echo', windows[0] ?? ''],
    );
    await offered(
      [scripted({ name: 's', tools: [tool('echo'), tool('echo')] })],
      (toolset) => {
        expect(toolset.servers[0]?.tools).toEqual(['mcp__s__echo_2', 'mcp__s__echo_3']);
      },
      ['mcp__s__echo', ...windows],
    );
  });

  it('a name too long for 64 characters whose every hash window is held is cut to 64 with a number', async () => {
    const digest = '5d5a8c1817467f29aa4fa473d8a91970248253bf779532873942fe1f8036f0a4';
    const head = `mcp__s__${'o'.repeat(47)}`;
    const windows = Array.from({ length: 57 }, (_, i) => `${head}_${digest.slice(i, i + 8)}`);
    await offered(
      [scripted({ name: 's', tools: [tool('o'.repeat(57))] })],
      (toolset) => {
        expect(toolset.servers[0]?.tools).toEqual([`mcp__s__${'o'.repeat(54)}_2`]);
      },
      windows,
    );
  });
});

describe('descriptions and schemas', () => {
  it('describes a tool by its description, else its title, else its name, and says which server it comes from', async () => {
    await offered(
      [
        scripted({
          name: 'docs',
          tools: [
            tool('described', { description: 'Reads a page.', title: 'Reader' }),
            tool('blank', { description: '  \n ', title: 'Blank title' }),
            { name: 'titled', title: 'Titled tool', inputSchema: { type: 'object' } },
            { name: 'bare', inputSchema: { type: 'object' } },
          ],
        }),
      ],
      (toolset) => {
        expect(toolset.tools.map((t) => t.spec.description)).toEqual([
          "Reads a page.\n\n(Tool 'described' of the MCP server 'docs'.)",
          "Blank title\n\n(Tool 'blank' of the MCP server 'docs'.)",
          "Titled tool\n\n(Tool 'titled' of the MCP server 'docs'.)",
          "bare\n\n(Tool 'bare' of the MCP server 'docs'.)",
        ]);
      },
    );
  });

  it('cuts a description past 2,000 characters in the middle, keeping where the tool comes from', async () => {
    await offered([scripted({ name: 'docs', tools: [tool('long', { description: 'D'.repeat(5_000) })] })], (toolset) => {
      const description = toolset.tools[0]?.spec.description ?? '';
      expect(description).toHaveLength(2_000);
      expect(description).toMatch(/^D+\n\n\[… 3\d{3} characters elided by exarch …\]\n\nD+\n\n\(Tool 'long' of the MCP server 'docs'\.\)$/);
    });
  });

  it('advertises the server’s schema without $schema, up to 32 levels and 32,000 characters, and any object past them, with a warning', async () => {
    const at32 = { type: 'object', properties: chain(31) };
    const at33 = { type: 'object', properties: chain(32) };
    // {"type":"object","description":"…"} is 34 characters around the description.
    const longest = { type: 'object', description: 'L'.repeat(32_000 - 34) };
    const longer = { type: 'object', description: 'L'.repeat(32_000 - 33) };
    await offered(
      [
        scripted({
          name: 'schemas',
          tools: [
            tool('plain', { inputSchema: { $schema: 'https://json-schema.org/draft/2020-12/schema', type: 'object', properties: { q: { type: 'string' } } } }),
            tool('at32', { inputSchema: at32 }),
            tool('at33', { inputSchema: at33 }),
            tool('longest', { inputSchema: longest }),
            tool('longer', { inputSchema: longer }),
          ],
        }),
      ],
      (toolset) => {
        const any = { type: 'object', additionalProperties: true };
        expect(toolset.tools.map((t) => t.spec.input_schema)).toEqual([{ type: 'object', properties: { q: { type: 'string' } } }, at32, any, longest, any]);
        expect(toolset.warnings).toEqual([
          'MCP tool mcp__schemas__at33: its input schema nests deeper than 32 levels; it is offered as taking any object',
          'MCP tool mcp__schemas__longer: its input schema is longer than 32000 characters; it is offered as taking any object',
        ]);
      },
    );
  });

  it('offers every tool as neither read-only nor idempotent, with the server’s own per-call timeout', async () => {
    await offered(
      [scripted({ name: 'slow', tools: [tool('t', { annotations: { readOnlyHint: true, idempotentHint: true } })] }, { timeoutMs: 1 })],
      (toolset) => {
        expect(toolset.tools.map((t) => ({ timeoutMs: t.timeoutMs, readOnly: t.readOnly, idempotent: t.idempotent }))).toEqual([
          { timeoutMs: 1, readOnly: false, idempotent: false },
        ]);
      },
    );
  });
});

describe('how many tools a server may offer', () => {
  it('reads a tool list page by page, keeps the first 128 tools and warns of the rest', async () => {
    const many = Array.from({ length: 130 }, (_, i) => tool(`t${i}`));
    await offered([scripted({ name: 'many', tools: many, pageSize: 50 }), scripted({ name: 'exact', tools: many.slice(0, 128), pageSize: 64 })], (toolset) => {
      const [big, exact] = toolset.servers;
      expect(big?.tools).toHaveLength(128);
      expect(big?.tools.at(0)).toBe('mcp__many__t0');
      expect(big?.tools.at(-1)).toBe('mcp__many__t127');
      expect(exact?.tools).toHaveLength(128);
      expect(toolset.warnings).toEqual(["MCP server 'many' offers 130 tools; only the first 128 are offered to agents"]);
    });
  });

  it('stops reading a tool list that never ends after 20 pages', async () => {
    const tools = Array.from({ length: 30 }, (_, i) => tool(`t${i}`));
    await offered([scripted({ name: 'endless', tools, pageSize: 1, endless: true })], (toolset) => {
      expect(toolset.servers[0]?.tools).toEqual(Array.from({ length: 20 }, (_, i) => `mcp__endless__t${i}`));
      expect(toolset.warnings).toEqual([]);
    });
  });
});
