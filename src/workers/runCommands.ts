import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { DurableRun } from '../run/durableRun.js';
import type { PostgresRunStore } from '../store/postgresStore.js';

/** How often a worker asks the store for steering lines sent to a run it runs. */
const COMMAND_POLL_MS = 250;

/**
 * Takes the steering lines sent to a run while this worker runs it, acts on each once, and
 * stores what it said. Polled, not notified: a quarter of a second is soon enough for a person,
 * and one small query per run that often is little next to the run's own writes. A store that
 * cannot be reached is asked again at the next poll; a line whose answer was lost is answered
 * again with what was said, not acted on twice. When the run stops here, the lines taken and not
 * acted on are let go, for the worker that takes the run up next.
 */
export function steerFromStore(
  store: PostgresRunStore,
  runId: string,
  run: DurableRun,
  command: (line: string, run: DurableRun) => readonly string[],
): { stop(): Promise<void> } {
  const taker = `${hostname()}:${process.pid}:${randomUUID()}`;
  const said = new Map<number, string>();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let polling: Promise<void> = Promise.resolve();
  const act = (line: string): string => {
    try {
      return command(line, run).join('\n');
    } catch (error) {
      return `exarch: the worker could not act on the line: ${error instanceof Error ? error.message : String(error)}`;
    }
  };
  const poll = async (): Promise<void> => {
    try {
      for (const { seq, line } of await store.takeCommands(runId, taker)) {
        if (stopped) break;
        const answer = said.get(seq) ?? act(line);
        said.set(seq, answer);
        await store.answerCommand(seq, answer);
      }
    } catch {
      // Asked again at the next poll.
    }
    if (!stopped) timer = setTimeout(() => (polling = poll()), COMMAND_POLL_MS);
  };
  polling = poll();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await polling;
      await store.releaseCommands(runId, taker, [...said.keys()]).catch(() => undefined);
    },
  };
}
