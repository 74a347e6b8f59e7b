import { join } from 'node:path';
import { writeViewer } from '../watch/viewer/index.js';
import { runDemo } from './demo.js';
import { acceptFlags, type Values } from './flags.js';
import { liveInspector } from './inspectFlag.js';
import type { CliUi } from './liveUi.js';
import { uiPort } from './runChecks.js';
import { EXIT } from './runIo.js';
import { UsageError } from './usageError.js';
import { htmlFor } from './viewCommand.js';

/**
 * `exarch demo`: the offline demo (demo.ts), with the trace it writes, its viewer, and the live
 * inspector or turn-flow page when asked for.
 */
export async function demo(positionals: readonly string[], values: Values): Promise<number> {
  if (positionals.length > 0) throw new UsageError(`demo takes no arguments, got '${positionals.join(' ')}'`);
  acceptFlags('demo', values, ['speed', 'trace', 'inspect', 'inspect-port', 'ui', 'ui-port']);
  const trace = values.trace ?? join('.exarch', 'demo', 'trace.jsonl');
  const speed = speedOf(values.speed);
  const port = uiPort(values.ui === true, values['ui-port']);
  const live = await liveInspector(values);
  let ui: CliUi | undefined;
  try {
    if (values.ui) ui = await (await import('./liveUi.js')).CliUi.start({ title: 'exarch demo', ...(port === undefined ? {} : { port }) }, process.stderr);
    // Like `run`: the narration on stderr, the root's answer on stdout (so `exarch demo > answer.txt` keeps just the answer).
    const result = await runDemo({
      out: process.stderr,
      answer: process.stdout,
      err: process.stderr,
      color: wantsColor(process.stderr),
      speed,
      trace,
      ...(live ? { inspect: live.inspect } : {}),
      ...(ui ? { onEvent: ui.onEvent } : {}),
    });
    ui?.end();
    if (result.traceFault) {
      process.stderr.write(`exarch: ${result.traceFault.message}\n`);
      return EXIT.fatal;
    }
    const viewer = writeViewer(trace, htmlFor(trace));
    process.stderr.write(`\nTurn flow recorded: ${trace}\nOpen it in a browser: ${viewer.outFile}\n`);
    if ((live || ui) && process.stderr.isTTY) {
      // The demo ends in seconds: keep serving so a browser opened late still sees the whole run.
      if (live) process.stderr.write(`exarch: still serving the live inspector at ${live.url}; press Ctrl-C to quit\n`);
      if (ui) process.stderr.write(`exarch: still serving the turn flow at ${ui.url}; press Ctrl-C to quit\n`);
      await new Promise<void>((resolve) => process.once('SIGINT', () => resolve()));
    }
    return result.ok ? EXIT.ok : EXIT.fatal;
  } finally {
    await live?.stop();
    await ui?.close();
  }
}

/** The slowest demo: its longest wait (the 30 s watchdog) at this speed is still far within what a timer holds. */
const MIN_SPEED = 0.001;

function speedOf(raw: string | undefined): number {
  if (raw === undefined) return 1;
  const speed = Number(raw);
  if (!Number.isFinite(speed) || speed <= 0) throw new UsageError(`--speed must be a positive number, got '${raw}'`);
  // The demo's delays are divided by the speed: slower than this, its timers would overflow and fire at once.
  if (speed < MIN_SPEED) throw new UsageError(`--speed must be at least ${MIN_SPEED} (slower, the demo's waits pass what a timer holds), got '${raw}'`);
  return speed;
}

/** Colour only for a person at a terminal (CONTRACT §7: plain when NO_COLOR or CI is set). */
function wantsColor(stream: NodeJS.WriteStream): boolean {
  return stream.isTTY === true && !process.env['NO_COLOR'] && !process.env['CI'];
}
