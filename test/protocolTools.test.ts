import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { ToolSpec } from '../src/engine/types.js';
import { runTraced } from './helpers.js';
import { call, exarch, serve, stream, workdir } from './support/cliHarness.js';

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
  readonly input_schema?: unknown;
}

const expected = JSON.parse(readFileSync(new URL('./fixtures/protocol-tools.json', import.meta.url), 'utf8')) as { root: WireTool[]; sub: WireTool[] };
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
