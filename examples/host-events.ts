import { createSessionActor, events, observe, waitForSettled } from 'exarch';
import { scriptedProvider } from 'exarch/testing';

const provider = scriptedProvider({
  agents: {
    root: [
      {
        text: 'Asking a researcher.',
        calls: [
          { name: 'agent', input: { name: 'researcher', task: 'Why do logins fail?' } },
          { name: 'wait_for_agents', input: {} },
        ],
      },
      { text: 'The session cookie is not renewed.' },
    ],
    researcher: [
      {
        calls: [
          { name: 'agent', input: { name: 'reader', task: 'Read auth.log' } },
          { name: 'wait_for_agents', input: {} },
        ],
      },
      { calls: [{ name: 'reply', input: { result: 'cookie not renewed' } }] },
    ],
    reader: [{ calls: [{ name: 'reply', input: { result: 'auth.log: 401 after 30 min' } }] }],
  },
});

const actor = createSessionActor({ provider, task: 'Why do logins fail?' });

// The listener form: called synchronously, in order; returns what unsubscribes.
let requests = 0;
const unsubscribe = observe(actor, (event) => {
  if (event.type === 'model.response') requests++;
});

// The async iterable: ends by itself when the root ends. Attach both before start() to see everything.
const lines: string[] = [];
const narrated = (async () => {
  for await (const event of events(actor)) {
    const who = event.path.join(' › ');
    switch (event.type) {
      case 'agent.started':
        lines.push(`${who}: started (${event.task})`);
        break;
      case 'agent.state':
        lines.push(`${who}: ${event.state}`);
        break;
      case 'tool.call':
        lines.push(`${who}: calls ${event.name}`);
        break;
      case 'delivery':
        lines.push(`${who}: ← ${event.name} ${event.outcome}: ${event.text}`);
        break;
      case 'agent.ended':
        lines.push(`${who}: ended ${event.status}`);
        break;
      default:
        break;
    }
  }
})();

actor.start();
await waitForSettled(actor);
actor.stop();
await narrated;
unsubscribe();
console.log(lines.filter((line) => line.startsWith('root › researcher › reader')).join('\n'));
console.log(`${requests} model requests`); // 5 model requests
export { lines, requests };
