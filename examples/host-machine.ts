import { assign, createActor, setup, toPromise } from 'xstate';
import { hostedSubAgent, sessionMachine, type AgentResult } from 'exarch';
import { scriptedProvider } from 'exarch/testing';

// Any Provider works here; the scripted one makes the example run offline.
const provider = scriptedProvider({
  agents: {
    researcher: [{ text: 'Reading the ticket.', calls: [{ name: 'reply', input: { result: { ticket: 42, cause: 'session cookie not renewed' } } }] }],
  },
});

// The host's own machine invokes an exarch session as one of its actors.
const triage = setup({
  types: { context: {} as { report: AgentResult | null } },
  actors: { researcher: sessionMachine },
}).createMachine({
  context: { report: null },
  initial: 'researching',
  states: {
    researching: {
      invoke: {
        src: 'researcher',
        input: { provider, task: 'Find the cause of ticket #42.', agent: hostedSubAgent('researcher') },
        onDone: { target: 'triaged', actions: assign({ report: ({ event }) => event.output }) },
      },
    },
    triaged: { type: 'final' },
  },
});

const host = createActor(triage).start();
await toPromise(host);
console.log(host.getSnapshot().context.report?.text);
// {
//   "ticket": 42,
//   "cause": "session cookie not renewed"
// }
export const report = host.getSnapshot().context.report;
