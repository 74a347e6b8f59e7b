import type { LiveInspector } from '../watch/inspect/liveInspector.js';
import type { Values } from './flags.js';
import { UsageError } from './usageError.js';

/** `--inspect`: the live inspector, loaded only when asked for. Its one-line instructions go to stderr. */
export async function liveInspector(values: Values): Promise<LiveInspector | undefined> {
  if (values['inspect-port'] !== undefined && !values.inspect) throw new UsageError('--inspect-port needs --inspect');
  if (!values.inspect) return undefined;
  const raw = values['inspect-port'];
  const port = raw === undefined ? undefined : Number(raw);
  if (port !== undefined && (!/^\d+$/.test(raw ?? '') || port < 1 || port > 65535))
    throw new UsageError(`--inspect-port must be a port number, got '${raw ?? ''}'`);
  const { startLiveInspector } = await import('../watch/inspect/liveInspector.js');
  const live = await startLiveInspector(port === undefined ? {} : { port });
  process.stderr.write(`exarch: ${live.instructions}\n`);
  return live;
}
