import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineTool } from '../../../src/index.js';
import { runTraced, toolResults } from '../../support/helpers.js';

/** CONTRACT §2: tools, validation, the allow-check, faults, concurrency and ordering. */

describe('defineTool', () => {
  it('turns the zod schema into the JSON Schema the model is shown', () => {
    const tool = defineTool({
      name: 'search',
      description: 'Search files',
      input: z.object({ pattern: z.string().describe('a regular expression'), limit: z.number().int().optional() }),
      run: () => [],
    });
    expect(tool.spec).toEqual({
      name: 'search',
      description: 'Search files',
      input_schema: {
        type: 'object',
        properties: {
          pattern: { type: 'string', description: 'a regular expression' },
          limit: { type: 'integer', minimum: expect.any(Number), maximum: expect.any(Number) },
        },
        required: ['pattern'],
      },
    });
  });

  it('refuses a tool name the API would refuse', () => {
    expect(() => defineTool({ name: 'read file', description: '', input: z.object({}), run: () => 1 })).toThrow(
      /tool name "read file" must be 1–64 characters/,
    );
  });

  it('accepts a name of 1 to 64 letters, digits, _ and -, and refuses any other with one line naming it', () => {
    const named = (name: string) => () => defineTool({ name, description: '', input: z.object({}), run: () => 1 });
    for (const name of ['a', 'Z', '7', '_', '-', `Az09_-${'x'.repeat(58)}`]) expect(named(name), `'${name}' is a valid name`).not.toThrow();
    expect(named(''), 'an empty name').toThrow('tool name "" must be 1–64 characters of A-Za-z0-9_-');
    expect(named('x'.repeat(65)), 'a 65-character name').toThrow(`tool name "${'x'.repeat(65)}" must be 1–64 characters of A-Za-z0-9_-`);
    expect(named('read.file'), 'a dot').toThrow('tool name "read.file" must be 1–64 characters of A-Za-z0-9_-');
    expect(named('é'), 'a letter outside A-Z').toThrow('tool name "é" must be 1–64 characters of A-Za-z0-9_-');
  });

  it('refuses an input schema that is not an object, naming the tool', () => {
    expect(() => defineTool({ name: 'count', description: '', input: z.string(), run: () => 1 })).toThrow(
      "tool 'count': the input schema must be a zod object",
    );
  });

  it('refuses a schema of a zod older than 4.2 (no toJSONSchema of its own: exarch does not load zod itself), naming the tool and the version', () => {
    // A zod 4.0/4.1 object schema parses, but has no toJSONSchema method; the main entry does not import zod to make one.
    const schema = z.object({ a: z.string() });
    const older = new Proxy(schema, { get: (target, key) => (key === 'toJSONSchema' ? undefined : Reflect.get(target, key)) });
    expect(() => defineTool({ name: 'old', description: 'd', input: older, run: () => 1 })).toThrow(
      new TypeError("tool 'old': its input schema has no toJSONSchema(): exarch needs zod 4.2 or later (see its peer dependency)"),
    );
  });

  it('shows the model the input side of the schema: a field with a default is not required', () => {
    const tool = defineTool({ name: 'list', description: '', input: z.object({ dir: z.string(), depth: z.number().default(1) }), run: () => 1 });
    expect(tool.spec.input_schema).toEqual({
      type: 'object',
      properties: { dir: { type: 'string' }, depth: { type: 'number', default: 1 } },
      required: ['dir'],
    });
  });

  it('an invalid input names the offending field by its path, or (input) for the input as a whole', () => {
    const tool = defineTool({ name: 'open', description: '', input: z.object({ at: z.object({ line: z.number() }) }), run: () => 1 });
    expect(tool.prepare({ at: { line: 'x' } })).toEqual({
      ok: false,
      error: "invalid input for tool 'open': at.line: Invalid input: expected number, received string",
    });
    expect(tool.prepare('x')).toEqual({ ok: false, error: "invalid input for tool 'open': (input): Invalid input: expected object, received string" });
  });

  it('refuses tools named like a protocol tool, and two tools of one name', async () => {
    const reply = defineTool({ name: 'reply', description: '', input: z.object({}), run: () => 1 });
    const echo = defineTool({ name: 'echo', description: '', input: z.object({}), run: () => 1 });
    // Refused when the session is created, before anything runs.
    await expect(runTraced({ root: [{ text: 'x' }] }, { task: 't', tools: [reply] })).rejects.toThrow(
      "exarch: tool name 'reply' is reserved for the agent protocol",
    );
    await expect(runTraced({ root: [{ text: 'x' }] }, { task: 't', tools: [echo, echo] })).rejects.toThrow("exarch: two tools are named 'echo'");
  });
});

describe('dispatch', () => {
  it('an invalid input gets an error result that names each offending field, and the session carries on', async () => {
    const ran: unknown[] = [];
    const tool = defineTool({ name: 'write', description: '', input: z.object({ path: z.string(), mode: z.enum(['a', 'w']) }), run: (i) => void ran.push(i) });
    const { snapshot, trail } = await runTraced({ root: [{ calls: [{ name: 'write', input: { path: 3 } }] }, { text: 'ok' }] }, { task: 't', tools: [tool] });
    expect(ran).toEqual([]);
    const result = toolResults(snapshot.context.messages)[0];
    expect(result?.is_error).toBe(true);
    expect(result?.content).toMatch(/^invalid input for tool 'write': path: .*expected string.*; mode: /);
    expect(trail.get('root')).toEqual(['starting', 'streaming', 'dispatchingBatch', 'streaming', 'readyForUser']);
  });

  it("a tool added to the host's array after a session is offered to the next session", async () => {
    const tools = [defineTool({ name: 'one', description: '', input: z.object({}), run: () => 'one' })];
    const first = await runTraced({ root: [{ text: 'ok' }] }, { task: 't', tools });
    expect(first.provider.requestsOf('root')[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'one']);
    tools.push(defineTool({ name: 'two', description: '', input: z.object({}), run: () => 'two ran' }));
    const second = await runTraced({ root: [{ calls: [{ name: 'two', input: {} }] }, { text: 'ok' }] }, { task: 't', tools });
    expect(second.provider.requestsOf('root')[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'one', 'two']);
    expect(toolResults(second.snapshot.context.messages)[0]).toMatchObject({ content: 'two ran' });
  });

  it('a tool the host replaced in its array by another of the same name: the next session runs the new one', async () => {
    const tools = [
      defineTool({ name: 'kept', description: '', input: z.object({}), run: () => 'kept' }),
      defineTool({ name: 'version', description: '', input: z.object({}), run: () => 'old' }),
    ];
    const script = { root: [{ calls: [{ name: 'version', input: {} }] }, { text: 'ok' }] };
    const first = await runTraced(script, { task: 't', tools });
    expect(toolResults(first.snapshot.context.messages)[0]).toMatchObject({ content: 'old' });
    tools[1] = defineTool({ name: 'version', description: '', input: z.object({}), run: () => 'new' });
    const second = await runTraced(script, { task: 't', tools });
    expect(toolResults(second.snapshot.context.messages)[0], 'the replaced tool must not run').toMatchObject({ content: 'new' });
  });

  it("a tool removed from the host's array is no longer offered to the next session", async () => {
    const tools = [
      defineTool({ name: 'one', description: '', input: z.object({}), run: () => 'one' }),
      defineTool({ name: 'two', description: '', input: z.object({}), run: () => 'two' }),
    ];
    await runTraced({ root: [{ text: 'ok' }] }, { task: 't', tools });
    tools.pop();
    const second = await runTraced({ root: [{ calls: [{ name: 'two', input: {} }] }, { text: 'ok' }] }, { task: 't', tools });
    expect(second.provider.requestsOf('root')[0]?.tools).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'one']);
    expect(toolResults(second.snapshot.context.messages)[0]).toMatchObject({ is_error: true, content: "unknown tool 'two': this agent was not offered it" });
  });

  it('sibling sub-agents share one toolbox, built once for the run', async () => {
    const tools = [defineTool({ name: 'echo', description: '', input: z.object({}), run: () => 'echo' })];
    const { last } = await runTraced(
      {
        root: (_request, index) =>
          index === 0
            ? {
                calls: [
                  { name: 'agent', input: { name: 'a', task: 't' } },
                  { name: 'agent', input: { name: 'b', task: 't' } },
                  { name: 'wait_for_agents', input: {} },
                ],
              }
            : { text: 'done' },
        '*': [{ calls: [{ name: 'reply', input: { result: 'ok' } }] }],
      },
      { task: 't', tools },
    );
    const [a, b] = [last.get('root/a'), last.get('root/b')].map((snapshot) => snapshot?.context.fixed.toolbox);
    expect(a, 'sub-agent a should have run').toBeDefined();
    expect(a === b, 'the second sibling should reuse the first one’s toolbox').toBe(true);
  });

  it('the next run with the same tool array reuses the toolbox of the last, for its root and its sub-agents', async () => {
    const tools = [defineTool({ name: 'echo', description: '', input: z.object({}), run: () => 'echo' })];
    const script = {
      root: [
        {
          calls: [
            { name: 'agent', input: { name: 'a', task: 't' } },
            { name: 'wait_for_agents', input: {} },
          ],
        },
        { text: 'done' },
      ],
      a: [{ calls: [{ name: 'reply', input: { result: 'ok' } }] }],
    };
    const toolboxes = (run: Awaited<ReturnType<typeof runTraced>>) => ['root', 'root/a'].map((id) => run.last.get(id)?.context.fixed.toolbox);
    const first = toolboxes(await runTraced(script, { task: 't', tools }));
    const second = toolboxes(await runTraced(script, { task: 't', tools }));
    expect(
      first.every((toolbox) => toolbox !== undefined),
      'both sessions should have run',
    ).toBe(true);
    expect(second[0] === first[0], "the root's toolbox should be reused").toBe(true);
    expect(second[1] === first[1], "the sub-agent's toolbox should be reused").toBe(true);
  });

  it('a call whose input nests too deep is not executed, and its answer says why', async () => {
    let ran = false;
    const tool = defineTool({ name: 'echo', description: '', input: z.object({}).passthrough(), run: () => (ran = true) });
    let deep: Record<string, unknown> = {};
    for (let i = 0; i < 70; i++) deep = { d: deep };
    const { snapshot } = await runTraced({ root: [{ calls: [{ name: 'echo', input: deep }] }, { text: 'ok' }] }, { task: 't', tools: [tool] });
    expect(ran, 'the tool must not run').toBe(false);
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({
      is_error: true,
      content: "tool call 'echo' was not executed: its input is nested more than 64 levels deep. Send it again with a valid input.",
    });
  });

  it('a call to a tool that was never offered is refused by the allow-check', async () => {
    const { snapshot } = await runTraced({ root: [{ calls: [{ name: 'rm_rf', input: {} }] }, { text: 'ok' }] }, { task: 't' });
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({ is_error: true, content: "unknown tool 'rm_rf': this agent was not offered it" });
  });

  it('a tool that throws gets an error result with the message', async () => {
    const tool = defineTool({
      name: 'boom',
      description: '',
      input: z.object({}),
      run: () => {
        throw new Error('disk on fire');
      },
    });
    const { snapshot } = await runTraced({ root: [{ calls: [{ name: 'boom', input: {} }] }, { text: 'ok' }] }, { task: 't', tools: [tool] });
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({ is_error: true, content: "tool 'boom' failed: disk on fire" });
  });

  it('a tool that times out gets an error result, and its signal is aborted', async () => {
    let aborted = false;
    const tool = defineTool({
      name: 'hang',
      description: '',
      input: z.object({}),
      timeoutMs: 20,
      run: (_i, { signal }) => new Promise(() => signal.addEventListener('abort', () => (aborted = true))),
    });
    const { snapshot } = await runTraced({ root: [{ calls: [{ name: 'hang', input: {} }] }, { text: 'ok' }] }, { task: 't', tools: [tool] });
    expect(toolResults(snapshot.context.messages)[0]).toMatchObject({ is_error: true, content: "tool 'hang' timed out after 20 ms" });
    expect(aborted).toBe(true);
  });

  it('the session-wide tool timeout applies to tools without their own', async () => {
    const tool = defineTool({ name: 'hang', description: '', input: z.object({}), run: () => new Promise(() => undefined) });
    const { snapshot } = await runTraced({ root: [{ calls: [{ name: 'hang', input: {} }] }, { text: 'ok' }] }, { task: 't', tools: [tool], toolTimeoutMs: 15 });
    expect(toolResults(snapshot.context.messages)[0]?.content).toBe("tool 'hang' timed out after 15 ms");
  });

  it('all calls of a batch run concurrently and results are committed in model order, one per id', async () => {
    const started: string[] = [];
    let running = 0;
    let maxRunning = 0;
    const tool = defineTool({
      name: 'wait',
      description: '',
      input: z.object({ tag: z.string(), ms: z.number() }),
      run: async ({ tag, ms }) => {
        started.push(tag);
        maxRunning = Math.max(maxRunning, ++running);
        await new Promise((r) => setTimeout(r, ms));
        running--;
        return tag;
      },
    });
    const { snapshot } = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'wait', input: { tag: 'slow', ms: 30 } },
              { name: 'wait', input: { tag: 'mid', ms: 15 } },
              { name: 'wait', input: { tag: 'fast', ms: 1 } },
            ],
          },
          { text: 'ok' },
        ],
      },
      { task: 't', tools: [tool] },
    );
    expect(maxRunning).toBe(3);
    const results = toolResults(snapshot.context.messages);
    expect(results.map((r) => r.content)).toEqual(['slow', 'mid', 'fast']);
    const ids = (snapshot.context.messages[1]?.content ?? []).flatMap((b) => (b.type === 'tool_use' ? [b.id] : []));
    expect(results.map((r) => r.tool_use_id)).toEqual(ids);
  });

  it('tool output is rendered by the shared renderer and clipped', async () => {
    const tool = defineTool({
      name: 'stat',
      description: '',
      input: z.object({ big: z.boolean() }),
      run: ({ big }) => (big ? 'z'.repeat(500) : { size: 3, files: ['a'] }),
    });
    const { snapshot } = await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'stat', input: { big: false } },
              { name: 'stat', input: { big: true } },
            ],
          },
          { text: 'ok' },
        ],
      },
      { task: 't', tools: [tool], toolOutputCap: 200 },
    );
    const [small, big] = toolResults(snapshot.context.messages);
    expect(small?.content).toBe('{\n  "size": 3,\n  "files": [\n    "a"\n  ]\n}');
    expect(big?.content.length).toBeLessThanOrEqual(200);
    expect(big?.content).toMatch(/characters elided by exarch/);
  });

  it('a tool sees which agent called it', async () => {
    const seen: string[] = [];
    const tool = defineTool({
      name: 'who',
      description: '',
      input: z.object({}),
      run: (_i, { agent, toolUseId }) => void seen.push(`${agent.id} ${toolUseId.slice(0, 5)}`),
    });
    await runTraced(
      {
        root: [
          {
            calls: [
              { name: 'agent', input: { name: 'c', task: 't' } },
              { name: 'who', input: {} },
            ],
          },
          { text: 'wait' },
          { text: 'done' },
        ],
        c: [{ calls: [{ name: 'who', input: {} }] }, { calls: [{ name: 'reply', input: { result: 'x' } }] }],
      },
      { task: 't', tools: [tool] },
    );
    expect(seen.sort()).toEqual(['root toolu', 'root/c toolu']);
  });
});
