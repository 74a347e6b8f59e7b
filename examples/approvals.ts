import { z } from 'zod';
import { createSessionActor, defineTool, respond, waitForSettled, type ApprovalRequest } from 'exarch';
import { scriptedProvider } from 'exarch/testing';

const written: string[] = [];
const writeNote = defineTool({
  name: 'write_note',
  description: 'Write a note to disk',
  input: z.object({ path: z.string(), text: z.string() }),
  run: async ({ path }) => {
    written.push(path);
    return `wrote ${path}`;
  },
});

// A sub-agent writes two notes; every write_note call, at any depth, waits for a person.
const provider = scriptedProvider({
  agents: {
    root: [
      {
        calls: [
          { name: 'agent', input: { name: 'scribe', task: 'Write the notes.' } },
          { name: 'wait_for_agents', input: {} },
        ],
      },
      { text: 'Notes handled.' },
    ],
    scribe: [
      {
        calls: [
          { name: 'write_note', input: { path: 'notes.md', text: 'hi' } },
          { name: 'write_note', input: { path: '/etc/motd', text: 'hi' } },
        ],
      },
      { calls: [{ name: 'reply', input: { result: 'one written, one refused' } }] },
    ],
  },
});

// Each request arrives at the root with the agent's path, the tool, its input and the agent's task.
const asked: ApprovalRequest[] = [];
const root = createSessionActor({
  provider,
  tools: [writeNote],
  task: 'Take notes',
  approve: ['write_note'],
  onApprovalRequest: (request) => {
    asked.push(request);
    const inside = !String(request.input['path']).startsWith('/');
    respond(root, { callId: request.callId, decision: inside ? 'approve' : 'deny', reason: 'only notes inside the project' });
  },
});
root.start();
const settled = await waitForSettled(root);
console.log(asked.map((r) => `${r.agent.path.join('/')} ${r.tool} ${String(r.input['path'])}`));
// [
//   'root/scribe write_note notes.md',
//   'root/scribe write_note /etc/motd'
// ]
console.log(written); // [ 'notes.md' ]
export { asked, settled, written };
