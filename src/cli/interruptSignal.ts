import { EXIT } from './runIo.js';

/** What ends a run from outside: Ctrl-C, a supervisor's (or `kill`'s) SIGTERM, a closed terminal's SIGHUP. */
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;

/**
 * The first of those signals cancels the tree and lets it answer its calls and write its logs,
 * leaving a durable run interrupted and resumable; a second one, of any kind, quits at once.
 */
export function interruptSignal(): AbortSignal {
  const interrupt = new AbortController();
  const first = (): void => {
    for (const signal of STOP_SIGNALS) process.off(signal, first);
    interrupt.abort();
    for (const signal of STOP_SIGNALS) process.once(signal, () => process.exit(EXIT.interrupted));
  };
  for (const signal of STOP_SIGNALS) process.once(signal, first);
  return interrupt.signal;
}
