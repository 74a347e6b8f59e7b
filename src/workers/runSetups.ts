import { RunError } from '../run/durableRun.js';
import type { PostgresRunStore } from '../store/postgresStore.js';
import type { RunRow } from '../store/runStore.js';
import { withMcpTools } from '../tools/mcp/mcpOption.js';
import type { RunSessions } from './jobContext.js';
import { StoredSpans } from './storedSpans.js';
import type { WorkerOptions } from './workerOptions.js';

/** How long a run's sessions' live half (its MCP servers, say) outlives its last session here: the next is often moments away. */
const SETUP_IDLE_MS = 5_000;

/**
 * The live half of each spread run's sessions on this worker, made once (the host's builder, the
 * run's MCP servers connected) and shared by the run's sessions here; closed once none has run
 * for a while, and when the worker stops.
 */
export class RunSetups {
  private readonly made = new Map<string, { ready: Promise<RunSessions & { close(): Promise<void> }>; users: number; idle: NodeJS.Timeout | undefined }>();

  constructor(
    private readonly build: WorkerOptions['session'],
    private readonly store: PostgresRunStore,
  ) {}

  async acquire(row: RunRow): Promise<RunSessions> {
    let entry = this.made.get(row.id);
    if (!entry) {
      const ready = this.make(row);
      entry = { ready, users: 0, idle: undefined };
      this.made.set(row.id, entry);
      ready.catch(() => this.made.delete(row.id));
    }
    entry.users++;
    clearTimeout(entry.idle);
    try {
      return await entry.ready;
    } catch (error) {
      entry.users--;
      throw error;
    }
  }

  release(runId: string): void {
    const entry = this.made.get(runId);
    if (!entry || --entry.users > 0) return;
    entry.idle = setTimeout(() => {
      if (entry.users > 0) return;
      this.made.delete(runId);
      void entry.ready.then((made) => made.close()).catch(() => undefined);
    }, SETUP_IDLE_MS);
    entry.idle.unref();
  }

  async closeAll(): Promise<void> {
    const entries = [...this.made.values()];
    this.made.clear();
    await Promise.allSettled(
      entries.map(async (entry) => {
        clearTimeout(entry.idle);
        await (await entry.ready).close();
      }),
    );
  }

  private async make(row: RunRow): Promise<RunSessions & { close(): Promise<void> }> {
    const spans = new StoredSpans(this.store, row.id);
    const built = await this.build(row, { spans });
    const mcp = await withMcpTools(built.input).catch(async (error: unknown) => {
      await built.close?.();
      throw error;
    });
    const tools = (mcp.input.tools ?? []).map((tool) => tool.name).sort();
    if (tools.join('\n') !== [...row.options.tools].sort().join('\n')) {
      await mcp.close();
      await built.close?.();
      throw new RunError(`run ${row.id} was started with the tools [${row.options.tools.join(', ')}], not [${tools.join(', ')}]`, 'tools-differ', row.id);
    }
    return {
      input: mcp.input,
      ...(built.inspect ? { inspect: built.inspect } : {}),
      ...(built.events ? { events: built.events, spans } : {}),
      close: async () => {
        await mcp.close();
        await built.close?.();
      },
    };
  }
}
