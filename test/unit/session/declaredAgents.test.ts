import { afterEach, describe, expect, it } from 'vitest';
import { createActor, toPromise } from 'xstate';
import { z } from 'zod';
import {
  AnthropicProvider,
  createSessionActor,
  defineTool,
  hostedSubAgent,
  MemoryLogSink,
  observe,
  runAgent,
  sessionMachine,
  waitForSettled,
  type ModelRequest,
  type RunEvent,
  type ToolResultBlock,
} from '../../../src/index.js';
import { resumeRun, startRun, type DurableRun } from '../../../src/run/durableRun.js';
import { MemoryRunStore } from '../../../src/store/memoryStore.js';
import { scriptedProvider, type Script, type ScriptedStep } from '../../../src/testing/index.js';
import {
  responseEvents,
  scriptedHandler,
  startAnthropicServer,
  type AnthropicTestServer,
  type MessagesTool,
  type ServerPlan,
} from '../../support/anthropicServer.js';
import { interruptingEffect } from '../../support/interruptingEffect.js';

/** Issue 16, points 2 and 3: declared agents (`agents`) and typed replies (`reply`, `output`). */

const spawn = (name: string, task: string, type?: string) => ({ name: 'agent', input: { name, task, ...(type === undefined ? {} : { type }) } });

/** A script that also keeps every request the agent made, whole (model, tool schemas and all). */
function recorded(steps: readonly ScriptedStep[]): { script: Script; requests: ModelRequest[] } {
  const requests: ModelRequest[] = [];
  return {
    requests,
    script: (request, index) => {
      // The history is live (appended to after the request): keep it as it was sent.
      requests.push({ ...request, messages: [...request.messages] });
      return steps[index] ?? { text: `no step ${index + 1} scripted` };
    },
  };
}

/** The tool results of a request's last message (what the model is answered with). */
function resultsIn(request: ModelRequest | undefined): ToolResultBlock[] {
  const last = request?.messages.at(-1);
  return last?.role === 'user' ? last.content.filter((b): b is ToolResultBlock => b.type === 'tool_result') : [];
}

function lastUserText(request: ModelRequest | undefined): string {
  const last = request?.messages.at(-1);
  return last?.role === 'user' ? last.content.map((b) => (b.type === 'text' ? b.text : '')).join('') : '';
}

const wordCount = defineTool({
  name: 'word_count',
  description: 'Count words',
  input: z.object({ text: z.string() }),
  run: ({ text }) => text.split(/\s+/).filter(Boolean).length,
});
const shout = defineTool({ name: 'shout', description: 'Upper-case a text', input: z.object({ text: z.string() }), run: ({ text }) => text.toUpperCase() });

const Findings = z.object({ topic: z.string(), sources: z.array(z.string()).min(1), confidence: z.number().min(0).max(1) });

describe('declared agents', () => {
  it('an unknown type is an is_error result that names the valid types; the root carries on', async () => {
    const root = recorded([{ calls: [spawn('x', 'look', 'astronomer')] }, { text: 'ok, no such agent' }]);
    const provider = scriptedProvider({ agents: { root: root.script } });
    const result = await runAgent('go', { provider, agents: { researcher: { description: 'finds sources' }, writer: { description: 'writes prose' } } });
    expect(result.state).toBe('readyForUser');
    const [answer] = resultsIn(root.requests[1]);
    expect(answer?.is_error).toBe(true);
    expect(answer?.content).toBe(`invalid input for tool 'agent': type: unknown agent type "astronomer"; the declared types are 'researcher', 'writer'`);
    expect(provider.requests.map((r) => r.agentId)).toEqual(['root', 'root']);
  });

  it("a typed sub-agent runs with its profile's tools, prompt, model and step cap; the run's tools bound it", async () => {
    const root = recorded([{ calls: [spawn('r', 'count the words', 'researcher')] }, { text: 'waiting' }, { text: 'done' }]);
    const researcher = recorded([
      // `shout` is the run's tool but not this profile's: refused by the allow-check, like an unknown tool.
      {
        calls: [
          { name: 'shout', input: { text: 'hi' } },
          { name: 'word_count', input: { text: 'a b c' } },
        ],
      },
      { calls: [{ name: 'word_count', input: { text: 'again' } }] },
      { calls: [{ name: 'reply', input: { result: 'never reached' } }] },
    ]);
    const provider = scriptedProvider({ agents: { root: root.script, r: researcher.script } });
    const result = await runAgent('go', {
      provider,
      tools: [wordCount, shout],
      agents: { researcher: { description: 'counts words', tools: ['word_count'], model: 'small-model', maxSteps: 2, system: 'You research.' } },
    });
    expect(result.state).toBe('readyForUser');
    const [first] = researcher.requests;
    expect(first?.model).toBe('small-model');
    expect(first?.system).toBe('You research.');
    expect(first?.tools.map((t) => t.name)).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply', 'word_count']);
    expect(resultsIn(researcher.requests[1])).toEqual([
      { type: 'tool_result', tool_use_id: expect.any(String), content: "unknown tool 'shout': this agent was not offered it", is_error: true },
      { type: 'tool_result', tool_use_id: expect.any(String), content: '3' },
    ]);
    // maxSteps 2 for the profile (the run's is 50): the third request is never made.
    expect(researcher.requests).toHaveLength(2);
    expect(lastUserText(root.requests[2])).toBe("[agent 'r' hit the step cap]");
    // The root runs with the run's own: no model, both tools, the default prompt.
    expect(root.requests[0]?.model).toBeUndefined();
    expect(root.requests[0]?.tools.map((t) => t.name)).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'word_count', 'shout']);
  });

  it('an untyped sub-agent of a restricted profile keeps its restriction, and has no reply schema or model of the profile', async () => {
    const root = recorded([{ calls: [spawn('r', 'delegate', 'researcher')] }, { text: 'waiting' }, { text: 'done' }]);
    const researcher = recorded([
      { calls: [spawn('helper', 'help')] },
      { text: 'waiting' },
      { calls: [{ name: 'reply', input: { topic: 't', sources: ['s'], confidence: 1 } }] },
    ]);
    const helper = recorded([{ calls: [{ name: 'reply', input: { result: 'helped' } }] }]);
    const provider = scriptedProvider({ agents: { root: root.script, r: researcher.script, helper: helper.script } });
    await runAgent('go', {
      provider,
      tools: [wordCount, shout],
      agents: { researcher: { description: 'd', tools: ['word_count'], model: 'm', reply: Findings } },
    });
    const [request] = helper.requests;
    expect(request?.tools.map((t) => t.name)).toEqual(['reply', 'word_count']);
    expect(request?.model).toBeUndefined();
    expect(request?.tools.find((t) => t.name === 'reply')?.input_schema).toHaveProperty('properties.result');
  });

  it('a profile cannot grant a tool the run does not offer: one line at start, naming profile and tool', async () => {
    const provider = scriptedProvider({ agents: {} });
    await expect(runAgent('go', { provider, tools: [wordCount], agents: { coder: { description: 'd', tools: ['write_file'] } } })).rejects.toThrow(
      "exarch: agents.coder.tools lists 'write_file', which is not one of the run's tools (word_count)",
    );
    await expect(runAgent('go', { provider, tools: [wordCount], agents: { coder: { description: 'd', tools: [shout] } } })).rejects.toThrow(
      /agents\.coder\.tools lists 'shout'/,
    );
    await expect(runAgent('go', { provider, agents: { coder: { description: '' } } })).rejects.toThrow(
      'exarch: agents.coder.description must be a non-empty string',
    );
    await expect(runAgent('go', { provider, agents: { coder: { description: 'd', maxSteps: 0 } } })).rejects.toThrow(
      'exarch: option agents.coder.maxSteps must be an integer ≥ 1, got 0',
    );
    await expect(runAgent('go', { provider, agents: { coder: { description: 'd', reply: z.string() } } })).rejects.toThrow(
      /^exarch: the reply schema of agents\.coder cannot be a tool input/,
    );
  });

  it('without declarations the agent and reply tools are exactly as before (no type, no model)', async () => {
    const root = recorded([{ calls: [spawn('c', 'task', 'researcher')] }, { text: 'waiting' }, { text: 'done' }]);
    const child = recorded([{ calls: [{ name: 'reply', input: { result: 'ok' } }] }]);
    await runAgent('go', { provider: scriptedProvider({ agents: { root: root.script, c: child.script } }) });
    // `type` is not part of the schema and is ignored, as any unknown field was.
    expect(root.requests[0]?.tools[0]).toEqual({
      name: 'agent',
      description: expect.stringMatching(/^Start a sub-agent that works on `task` asynchronously\..*call wait_for_agents in the same response\.$/),
      input_schema: {
        type: 'object',
        properties: {
          name: { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$', description: "The sub-agent's name, unique among your running sub-agents." },
          task: { type: 'string', minLength: 1, description: 'Everything the sub-agent needs to know: it sees nothing else of your conversation.' },
          // Issue 17: the budget a parent may give (docs/protocol.md §2).
          budget: {
            type: 'object',
            additionalProperties: false,
            description: expect.stringMatching(/^Optional: the most this sub-agent and every agent it starts may spend together\./),
            properties: {
              tokens: { type: 'integer', exclusiveMinimum: 0, maximum: Number.MAX_SAFE_INTEGER, description: expect.any(String) },
              cost: { type: 'number', exclusiveMinimum: 0, description: expect.any(String) },
            },
          },
        },
        required: ['name', 'task'],
      },
    });
    expect(child.requests[0]?.tools.find((t) => t.name === 'reply')?.input_schema).toEqual({
      type: 'object',
      properties: {
        result: { description: 'Your complete result: a markdown report as a string, or a JSON object/array. Only this reaches the agent that started you.' },
      },
    });
    expect(Object.keys(child.requests[0] ?? {})).not.toContain('model');
    expect(lastUserText(root.requests[2])).toBe("[agent 'c' replied]\nok");
  });
});

describe('typed replies', () => {
  it('an invalid reply is refused naming the fields, costs a step, and the corrected one is the typed value; the parent reads the rendered text', async () => {
    const logs = new MemoryLogSink();
    const root = recorded([{ calls: [spawn('r', 'research exarch', 'researcher')] }, { text: 'waiting' }, { text: 'done' }]);
    const researcher = recorded([
      { calls: [{ name: 'reply', input: { topic: 'exarch', sources: [], confidence: 'high' } }] },
      { calls: [{ name: 'reply', input: { topic: 'exarch', sources: ['README.md'], confidence: 0.9 } }] },
    ]);
    const provider = scriptedProvider({ agents: { root: root.script, r: researcher.script } });
    const result = await runAgent('go', { provider, logs, agents: { researcher: { description: 'finds sources', reply: Findings } } });
    expect(result.state).toBe('readyForUser');
    const [refusal] = resultsIn(researcher.requests[1]);
    expect(refusal).toMatchObject({ is_error: true });
    expect(refusal?.content).toMatch(/^invalid input for tool 'reply': sources: .*; confidence: /);
    expect(researcher.requests).toHaveLength(2);
    expect(logs.records('root/r').filter((r) => r.type === 'usage')).toHaveLength(2);
    // The parent model sees the value rendered (pretty-printed JSON); the host gets it parsed.
    expect(lastUserText(root.requests[2])).toBe(`[agent 'r' replied]\n{\n  "topic": "exarch",\n  "sources": [\n    "README.md"\n  ],\n  "confidence": 0.9\n}`);
    const delivered = logs.records('root').find((r) => r.type === 'inbox');
    expect(delivered).toMatchObject({ result: { outcome: 'replied', value: { topic: 'exarch', sources: ['README.md'], confidence: 0.9 } } });
  });

  it('the delivery run event carries the typed value beside the rendered text', async () => {
    const provider = scriptedProvider({
      agents: {
        root: [{ calls: [spawn('r', 'research', 'researcher'), { name: 'wait_for_agents', input: {} }] }, { text: 'done' }],
        r: [{ calls: [{ name: 'reply', input: { topic: 'exarch', sources: ['README.md'], confidence: 0.9 } }] }],
      },
    });
    const actor = createSessionActor({ provider, task: 'go', agents: { researcher: { description: 'finds sources', reply: Findings } } });
    const deliveries: RunEvent[] = [];
    observe(actor, (event) => {
      if (event.type === 'delivery') deliveries.push(event);
    });
    actor.start();
    await waitForSettled(actor);
    expect(deliveries).toHaveLength(1);
    expect(deliveries[0]).toMatchObject({ child: 'root/r', outcome: 'replied', value: { topic: 'exarch', sources: ['README.md'], confidence: 0.9 } });
    expect(deliveries[0]).toHaveProperty('text', expect.stringContaining('"topic": "exarch"'));
    actor.stop();
  });

  it('the reply tool the model is shown has the schema as its input', async () => {
    const root = recorded([{ calls: [spawn('r', 'research', 'researcher')] }, { text: 'waiting' }, { text: 'done' }]);
    const researcher = recorded([{ calls: [{ name: 'reply', input: { topic: 't', sources: ['s'], confidence: 0 } }] }]);
    await runAgent('go', {
      provider: scriptedProvider({ agents: { root: root.script, r: researcher.script } }),
      agents: { researcher: { description: 'finds sources', reply: Findings } },
    });
    expect(researcher.requests[0]?.tools.find((t) => t.name === 'reply')?.input_schema).toEqual({
      type: 'object',
      properties: {
        topic: { type: 'string' },
        sources: { type: 'array', items: { type: 'string' }, minItems: 1 },
        confidence: { type: 'number', minimum: 0, maximum: 1 },
      },
      required: ['topic', 'sources', 'confidence'],
    });
  });

  it("a host machine's hosted sub-agent with output gets AgentResult.value", async () => {
    const provider = scriptedProvider({ agents: { triage: [{ calls: [{ name: 'reply', input: { topic: 'cookie', sources: ['#42'], confidence: 0.5 } }] }] } });
    const actor = createActor(sessionMachine, { input: { provider, task: 'triage', agent: hostedSubAgent('triage'), output: Findings } }).start();
    const output = await toPromise(actor);
    expect(output).toMatchObject({ outcome: 'replied', value: { topic: 'cookie', sources: ['#42'], confidence: 0.5 } });
  });

  it('runAgent with output: the root is offered reply with the schema, is corrected, and returns the typed value', async () => {
    const root = recorded([
      { text: 'Here it is.', calls: [{ name: 'reply', input: { topic: 42 } }] },
      { calls: [{ name: 'reply', input: { topic: 'xstate', sources: ['docs'], confidence: 1 } }] },
    ]);
    const result = await runAgent('summarise', { provider: scriptedProvider({ agents: { root: root.script } }), output: Findings });
    expect(result.state).toBe('replied');
    expect(result.value).toEqual({ topic: 'xstate', sources: ['docs'], confidence: 1 });
    const typed: z.infer<typeof Findings> | undefined = result.value;
    expect(typed?.sources[0]).toBe('docs');
    expect(root.requests[0]?.tools.map((t) => t.name)).toEqual(['agent', 'cancel_agent', 'wait_for_agents', 'reply']);
    expect(resultsIn(root.requests[1])[0]?.content).toMatch(/^invalid input for tool 'reply': topic: .*; sources: .*; confidence: /);
  });

  it('a root with output that ends its turn without replying is reminded once, then ends empty with no value', async () => {
    const root = recorded([{ text: 'All done.' }, { text: 'Still done.' }]);
    const result = await runAgent('summarise', { provider: scriptedProvider({ agents: { root: root.script } }), output: Findings });
    expect(result.state).toBe('empty');
    expect(result).not.toHaveProperty('value');
    expect(lastUserText(root.requests[1])).toMatch(/without calling the `reply` tool/);
  });
});

describe('what reaches the Anthropic API', () => {
  const servers: AnthropicTestServer[] = [];
  afterEach(async () => {
    await Promise.all(servers.splice(0).map((s) => s.close()));
  });
  const stream = (spec: Parameters<typeof responseEvents>[0]): ServerPlan => ({ kind: 'stream', events: responseEvents(spec) });

  it('the request body carries the profile model, the agent tool with the type enum and the reply schema', async () => {
    const server = await startAnthropicServer(
      scriptedHandler({
        root: [stream({ toolCalls: [spawn('scout', 'look around', 'researcher')] }), stream({ text: 'waiting' }), stream({ text: 'done' })],
        scout: [stream({ toolCalls: [{ name: 'reply', input: { topic: 't', sources: ['s'], confidence: 0.1 } }] })],
      }),
    );
    servers.push(server);
    const provider = new AnthropicProvider({ apiKey: 'test', baseURL: server.url, model: 'claude-default', sdkMaxRetries: 0 });
    const result = await runAgent('go', {
      provider,
      agents: { researcher: { description: 'Finds sources for a topic.', model: 'claude-small', reply: Findings }, writer: { description: 'Writes prose.' } },
    });
    expect(result.state).toBe('readyForUser');
    const [rootBody, scoutBody] = [server.requests.find((r) => r.agent === 'root')?.body, server.requests.find((r) => r.agent === 'scout')?.body];
    expect(rootBody?.model).toBe('claude-default');
    expect(scoutBody?.model).toBe('claude-small');
    const tool = (tools: readonly MessagesTool[] | undefined, name: string) => tools?.find((t) => t.name === name);
    const agentTool = tool(rootBody?.tools, 'agent');
    expect(agentTool?.input_schema).toMatchObject({
      properties: {
        type: {
          type: 'string',
          enum: ['researcher', 'writer'],
          description: expect.stringContaining("'researcher': Finds sources for a topic; 'writer': Writes prose."),
        },
      },
      required: ['name', 'task'],
    });
    expect(agentTool?.description).toContain('researcher — Finds sources for a topic; writer — Writes prose.');
    expect(tool(rootBody?.tools, 'reply')).toBeUndefined();
    expect(tool(scoutBody?.tools, 'reply')?.input_schema).toEqual({
      type: 'object',
      properties: {
        topic: { type: 'string' },
        sources: { type: 'array', items: { type: 'string' }, minItems: 1 },
        confidence: { type: 'number', minimum: 0, maximum: 1 },
      },
      required: ['topic', 'sources', 'confidence'],
    });
  });
});

describe('durable runs with declared agents', () => {
  it('a typed sub-agent interrupted mid-batch resumes with its profile, and its typed value reaches the root; other agents are refused', async () => {
    const store = new MemoryRunStore();
    let run: DurableRun | undefined;
    const { tool: effect } = interruptingEffect({ at: 1, run: () => run, ms: 20, idempotent: true });
    // Each step is chosen by the history, so the resumed process (a new provider) answers the same.
    const byHistory =
      (steps: readonly ScriptedStep[], seen: ModelRequest[]): Script =>
      (request) => {
        seen.push({ ...request, messages: [...request.messages] });
        return steps[request.messages.filter((m) => m.role === 'assistant').length] ?? { text: 'no step' };
      };
    const scripts = (seen: ModelRequest[]) => ({
      root: byHistory([{ calls: [spawn('r', 'research', 'researcher')] }, { text: 'waiting' }, { text: 'done' }], []),
      r: byHistory(
        [{ calls: [{ name: 'effect', input: {} }] }, { calls: [{ name: 'reply', input: { topic: 'resumed', sources: ['journal'], confidence: 1 } }] }],
        seen,
      ),
    });
    const agents = { researcher: { description: 'finds sources', tools: ['effect'], model: 'research-model', reply: Findings } };
    const before: ModelRequest[] = [];
    run = await startRun('task', { provider: scriptedProvider({ agents: scripts(before) }), tools: [effect, shout], agents }, { store });
    expect((await run.result).status).toBe('interrupted');
    expect(store.getRun(run.id)?.options).toMatchObject({ tools: ['effect', 'shout'], agentTypes: ['researcher'] });

    await expect(resumeRun(run.id, { provider: scriptedProvider({ agents: scripts([]) }), tools: [effect, shout] }, { store })).rejects.toMatchObject({
      kind: 'agents-differ',
      message: `run ${run.id} was started with the agent types [researcher], not []: resume it with the same agents`,
    });

    const after: ModelRequest[] = [];
    const resumed = await resumeRun(run.id, { provider: scriptedProvider({ agents: scripts(after) }), tools: [effect, shout], agents }, { store });
    if ('finished' in resumed) throw new Error('the interrupted run was not resumed');
    expect((await resumed.result).status).toBe('done');
    expect(after.map((r) => [r.model, r.tools.map((t) => t.name).join(',')])).toEqual([['research-model', 'agent,cancel_agent,wait_for_agents,reply,effect']]);
    const delivered = store.journal(run.id).find((row) => row.session === 'root' && row.record.type === 'inbox');
    expect(delivered?.record).toMatchObject({ result: { name: 'r', outcome: 'replied', value: { topic: 'resumed', sources: ['journal'], confidence: 1 } } });
  });
});
