import { createActor } from 'xstate';
import { sessionMachine, waitForSettled, finalAssistantText } from 'exarch';
import { scriptedProvider } from 'exarch/testing';

const provider = scriptedProvider({
  agents: {
    root: [
      {
        text: 'Two readers, in parallel.',
        calls: [
          { name: 'agent', input: { name: 'a', task: 'Read a.md' } },
          { name: 'agent', input: { name: 'b', task: 'Read b.md' } },
        ],
      },
      { text: 'Waiting for both.', delayMs: 10 },
      { text: 'a says hello, b says world.' },
    ],
    a: [{ calls: [{ name: 'reply', input: { result: 'hello' } }] }],
    b: [{ calls: [{ name: 'reply', input: { result: 'world' } }] }],
  },
});

// A root session is an ordinary actor: no task yet, so it waits in readyForUser.
const root = createActor(sessionMachine, { input: { provider } });
const states: string[] = [];
root.subscribe((snapshot) => {
  if (states.at(-1) !== snapshot.value) states.push(String(snapshot.value));
});
root.start();
root.send({ type: 'user.message', text: 'What do a.md and b.md say?' });

const settled = await waitForSettled(root);
console.log(finalAssistantText(settled.context.messages)); // a says hello, b says world.
console.log(states.join(' → ')); // readyForUser → streaming → dispatchingBatch → streaming → readyForUser → streaming → readyForUser
root.stop();
export { settled, states };
