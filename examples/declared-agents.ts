import { z } from 'zod';
import { defineTool, runAgent, type AgentProfiles } from 'exarch';
import { scriptedProvider } from 'exarch/testing';

// What the researcher hands back, and what the whole run returns: zod schemas, typed end to end.
const Findings = z.object({ topic: z.string(), sources: z.array(z.string()).min(1), confidence: z.number().min(0).max(1) });
const Brief = z.object({ headline: z.string(), findings: Findings });

const readNotes = defineTool({
  name: 'read_notes',
  description: 'Read the team notes on a topic',
  input: z.object({ topic: z.string() }),
  readOnly: true,
  run: ({ topic }) => `${topic}: every session is a state machine (notes/arch.md, notes/adr-7.md)`,
});

// Two declared agents: the model starts one with the `agent` tool's `type`.
const agents: AgentProfiles = {
  researcher: { description: 'Finds and rates sources on a topic', tools: ['read_notes'], model: 'claude-haiku-4-5', maxSteps: 6, reply: Findings },
  writer: { description: 'Writes a one-line headline', tools: [], system: 'You write one short headline. Reply with it as `result`.' },
};

// Any Provider works here; the scripted one makes the example run offline.
const provider = scriptedProvider({
  agents: {
    root: [
      {
        calls: [
          { name: 'agent', input: { name: 'scout', type: 'researcher', task: 'What do our notes say about exarch?' } },
          { name: 'wait_for_agents', input: {} },
        ],
      },
      {
        calls: [
          { name: 'agent', input: { name: 'pen', type: 'writer', task: 'A headline for: every session is a state machine' } },
          { name: 'wait_for_agents', input: {} },
        ],
      },
      {
        calls: [
          {
            name: 'reply',
            input: { headline: 'Every agent is a state machine', findings: { topic: 'exarch', sources: ['notes/arch.md', 'notes/adr-7.md'], confidence: 0.9 } },
          },
        ],
      },
    ],
    scout: [
      { calls: [{ name: 'read_notes', input: { topic: 'exarch' } }] },
      // Not the schema: refused with the fields to fix, and the model corrects it on its next step.
      { calls: [{ name: 'reply', input: { topic: 'exarch', sources: [], confidence: 'high' } }] },
      { calls: [{ name: 'reply', input: { topic: 'exarch', sources: ['notes/arch.md', 'notes/adr-7.md'], confidence: 0.9 } }] },
    ],
    pen: [{ calls: [{ name: 'reply', input: { result: 'Every agent is a state machine' } }] }],
  },
});

const result = await runAgent('Brief me on exarch.', { provider, tools: [readNotes], agents, output: Brief });
const brief = result.value; // typed: { headline: string; findings: { topic: string; sources: string[]; confidence: number } } | undefined
console.log(result.state, brief?.headline); // replied Every agent is a state machine
console.log(brief?.findings.sources.join(', ')); // notes/arch.md, notes/adr-7.md

const refusal = provider.requestsOf('root/scout')[2]?.lastMessage?.content[0];
console.log(refusal?.type === 'tool_result' ? refusal.content : ''); // invalid input for tool 'reply': sources: …; confidence: …
export { brief, provider, result };
