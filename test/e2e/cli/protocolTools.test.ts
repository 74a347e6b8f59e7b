import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import type { ToolSpec } from '../../../src/engine/types.js';
import { defineTool } from '../../../src/index.js';
import { delegating, runTraced, toolResults } from '../../support/helpers.js';
import { call, exarch, serve, stream, workdir } from '../../support/cliHarness.js';

/**
 * The protocol tools exactly as the model reads them on the wire (CONTRACT §2): names, descriptions
 * and input schemas of `agent`, `cancel_agent`, `wait_for_agents` and `reply`, for a root and for a
 * sub-agent. The expected definitions are a reviewed fixture, not made by the code under test: a
 * changed word in what the model is told, or a loosened schema, shows up here as a diff to review.
 * The same definitions are checked in process too, where a mutation run (which has no dist/) sees them.
 */

interface WireTool {
  readonly name: string;
  readonly description?: string;
  readonly input_schema?: { readonly properties?: Record<string, unknown> } & Record<string, unknown>;
}

const expected = JSON.parse(readFileSync(new URL('../../fixtures/protocol-tools.json', import.meta.url), 'utf8')) as { root: WireTool[]; sub: WireTool[] };
const PROTOCOL = new Set(['agent', 'cancel_agent', 'wait_for_agents', 'reply']);

describe('the protocol tools on the wire', () => {
  it('a root is offered agent, cancel_agent and wait_for_agents; a sub-agent also reply: each exactly as reviewed', async () => {
    const server = await serve({
      root: [stream({ toolCalls: [call('agent', { name: 'w', task: 'Say ok.' }), call('wait_for_agents', {})] }), stream({ text: 'done' })],
      w: [stream({ toolCalls: [call('reply', { result: 'ok' })] })],
    });
    const run = await exarch(['run', '--no-store', 'Delegate'], { server, cwd: workdir() });
    expect(run.code, run.stderr).toBe(0);
    const offered = (agent: string): WireTool[] =>
      ((server.requests.find((r) => r.agent === agent)?.body.tools ?? []) as unknown as readonly WireTool[])
        .filter((tool) => PROTOCOL.has(tool.name))
        // The provider marks the last tool for prompt caching: not part of the definition.
        .map(({ name, description, input_schema }) => ({ name, description, input_schema }));
    expect(offered('root')).toEqual(expected.root);
    expect(offered('w')).toEqual(expected.sub);
  });
});

describe('the protocol tools a session hands its provider', () => {
  it('in process, a root and a sub-agent are offered the same reviewed definitions as on the wire', async () => {
    const offered = new Map<string, readonly ToolSpec[]>();
    const { snapshot } = await runTraced(
      {
        root: (request, index) => {
          offered.set('root', request.tools);
          return index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'w', task: 'Say ok.' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: 'done' };
        },
        w: (request) => {
          offered.set('w', request.tools);
          return { calls: [{ name: 'reply', input: { result: 'ok' } }] };
        },
      },
      { task: 'Delegate' },
    );
    expect(offered.size, 'both the root and its sub-agent should have asked the model').toBe(2);
    expect(snapshot.value, 'the root should end its turn as scripted').toBe('readyForUser');
    expect(offered.get('root')?.filter((tool) => PROTOCOL.has(tool.name))).toEqual(expected.root);
    expect(offered.get('w')?.filter((tool) => PROTOCOL.has(tool.name))).toEqual(expected.sub);
  });
});

describe('the protocol tools of declared agents and typed replies', () => {
  /** The tools the root is offered in its first request. */
  async function rootTools(options: Parameters<typeof runTraced>[1], script?: Parameters<typeof runTraced>[0]['root']): Promise<readonly ToolSpec[]> {
    let offered: readonly ToolSpec[] = [];
    await runTraced(
      {
        root: (request, index) => {
          if (index === 0) offered = request.tools;
          return typeof script === 'function' ? script(request, index) : { text: 'ok' };
        },
      },
      options,
    );
    return offered;
  }

  it('declared agent types are listed in the agent tool, in its description and as a described `type` enum', async () => {
    const tools = await rootTools({ task: 'go', agents: { researcher: { description: 'Finds sources.' }, writer: { description: 'Writes prose.' } } });
    const [reviewed] = expected.root;
    expect(reviewed?.name).toBe('agent');
    expect(tools.find((tool) => tool.name === 'agent')).toEqual({
      name: 'agent',
      description: `${reviewed?.description} Declared agent types (pass one as \`type\`): researcher — Finds sources; writer — Writes prose.`,
      input_schema: {
        ...reviewed?.input_schema,
        properties: {
          ...reviewed?.input_schema?.properties,
          type: {
            type: 'string',
            enum: ['researcher', 'writer'],
            description:
              "The kind of sub-agent to start, with its own tools, model and instructions: 'researcher': Finds sources; 'writer': Writes prose. Leave it out for a general sub-agent.",
          },
        },
      },
    });
  });

  it('an output schema without declared agents: the spawn tools stay as reviewed, and reply takes the schema as its input', async () => {
    const tools = await rootTools({ task: 'go', output: z.object({ answer: z.string() }) }, () => ({ calls: [{ name: 'reply', input: { answer: 'yes' } }] }));
    expect(tools.filter((tool) => PROTOCOL.has(tool.name))).toEqual([
      ...expected.root,
      {
        name: 'reply',
        description:
          "Finish and hand your result to the agent that started you, as the fields of this tool's input: they are the only thing it receives, and a reply that does not match the schema is refused with the fields to correct. Calling reply ends your session once the other calls of this response have run.",
        input_schema: { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] },
      },
    ]);
  });

  it('a reply schema that cannot be a tool input is refused at start with one line naming its owner and why', async () => {
    const started = (output: z.ZodType) => runTraced({ root: [{ text: 'never asked' }] }, { task: 'go', output });
    await expect(started(z.string())).rejects.toThrow(
      new TypeError('exarch: the reply schema of the `output` option cannot be a tool input: the input schema must be a zod object'),
    );
    await expect(started(z.string())).rejects.toBeInstanceOf(TypeError);
    await expect(started(z.object({ n: z.bigint() }))).rejects.toThrow(
      'exarch: the reply schema of the `output` option cannot be a tool input: BigInt cannot be represented in JSON Schema',
    );
  });
});

describe('the protocol tools refused or given bad input', () => {
  it('bad input to cancel_agent or wait_for_agents is one is_error line naming the tool and the field', async () => {
    const { snapshot } = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'cancel_agent', input: { name: 'no such name!' } },
              { name: 'wait_for_agents', input: { until: 'some' } },
            ],
          },
          { text: 'ok' },
        ],
      },
      { task: 'go' },
    );
    expect(toolResults(snapshot.context.messages).map((r) => [r.is_error, r.content])).toEqual([
      [true, "invalid input for tool 'cancel_agent': name: must be 1–64 characters of A-Za-z0-9_-"],
      [true, 'invalid input for tool \'wait_for_agents\': until: Invalid option: expected one of "all"|"any"'],
    ]);
  });

  it("a reply whose input is not an object (a host's provider may send one) is one is_error line, and the sub-agent goes on", async () => {
    const notAnObject = 'done' as unknown as Record<string, unknown>;
    const { last } = await runTraced(
      {
        root: delegating('c', 't'),
        c: [{ calls: [{ name: 'reply', input: notAnObject }] }, { calls: [{ name: 'reply', input: { result: 'ok' } }] }],
      },
      { task: 'go' },
    );
    expect(toolResults(last.get('root/c')?.context.messages ?? [])[0]).toEqual({
      type: 'tool_result',
      tool_use_id: expect.any(String),
      is_error: true,
      content: "invalid input for tool 'reply': (input): Invalid input: expected object, received string",
    });
  });

  it('a session at the depth limit calling cancel_agent or wait_for_agents is told they are not available to it', async () => {
    const { last } = await runTraced(
      {
        root: delegating('c', 't'),
        c: [
          {
            calls: [
              { name: 'cancel_agent', input: { name: 'x' } },
              { name: 'wait_for_agents', input: {} },
            ],
          },
          { calls: [{ name: 'reply', input: { result: 'ok' } }] },
        ],
      },
      { task: 'go', maxDepth: 1 },
    );
    expect(toolResults(last.get('root/c')?.context.messages ?? []).map((r) => [r.is_error, r.content])).toEqual([
      [true, "tool 'cancel_agent' is not available to this agent"],
      [true, "tool 'wait_for_agents' is not available to this agent"],
      [undefined, 'Reply recorded. Your session ends once the other calls of this response have run.'],
    ]);
  });

  it('a host tool named like any protocol tool is refused when the session is created', async () => {
    for (const name of ['agent', 'cancel_agent', 'wait_for_agents', 'reply']) {
      const tool = defineTool({ name, description: '', input: z.object({}), run: () => 1 });
      await expect(runTraced({ root: [{ text: 'x' }] }, { task: 't', tools: [tool] }), name).rejects.toThrow(
        `exarch: tool name '${name}' is reserved for the agent protocol`,
      );
    }
  });
});
