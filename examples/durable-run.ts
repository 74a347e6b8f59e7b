import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { listRuns, resumeRun, startRun, type ModelRequest } from 'exarch';
import { openSqliteStore } from 'exarch/sqlite';
import { scriptedProvider, type ScriptedStep } from 'exarch/testing';

// A scripted model that answers by how far each conversation has got, as a real model would:
// a resumed run, in a new process, gets the same answers from the same history.
const nth = (steps: ScriptedStep[]) => (request: ModelRequest) => steps[request.messages.filter((m) => m.role === 'assistant').length] ?? { text: '' };
const model = () =>
  scriptedProvider({
    agents: {
      root: nth([
        { calls: [{ name: 'agent', input: { name: 'reader', task: 'Read a.md' } }] },
        { text: 'Waiting for the reader.' },
        { text: 'a.md says hello.' },
      ]),
      reader: nth([{ calls: [{ name: 'reply', input: { result: 'hello' } }], delayMs: 20 }]),
    },
  });

const store = openSqliteStore(join(mkdtempSync(join(tmpdir(), 'exarch-')), 'exarch.db'));

// Every session of the tree is journaled as it goes. Stop the run as Ctrl-C would, once the reader
// is at work: the tree is cancelled and the run is left `interrupted`, ready to be resumed.
const first = await startRun('What does a.md say?', { provider: model() }, { store });
first.actor.subscribe((snapshot) => {
  if (snapshot.context.children.size > 0) first.interrupt();
});
const stopped = await first.result;
// (A run whose row cannot be read back is listed as `unreadable`, with why.)
console.log((await listRuns(store)).map((run) => `${run.id} ${run.status} ${run.status === 'unreadable' ? run.problem : `${run.agents} agents`}`)); // [ '… interrupted 2 agents' ]

// Later, in this process or another: the same tools, a provider, and the run takes up where it was.
const resumed = await resumeRun(first.id, { provider: model() }, { store });
if ('finished' in resumed) throw new Error('the run had nothing left to do');
const { text, status } = await resumed.result;
console.log(status, text); // done a.md says hello.
store.close();
export { stopped, status, text };
