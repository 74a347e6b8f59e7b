import type { RunListing, RunSummary } from '../store/runStore.js';
import { estimateCost } from '../engine/pricing.js';
import { usableTarget } from './runChecks.js';
import { EXIT } from './runIo.js';
import { openExistingStore, storeName, type StoreTarget } from './storeTarget.js';
import { formatCount } from './formatCount.js';

export interface RunsIo {
  readonly stdout: NodeJS.WritableStream;
  readonly stderr: NodeJS.WritableStream;
  readonly cwd: string;
}

const TASK_CHARS = 60;

/** `exarch runs`: one line per recorded run, newest first, on stdout. */
export async function listRunsCommand(target: StoreTarget, io: RunsIo): Promise<number> {
  usableTarget(target);
  const store = await openExistingStore(io.cwd, target);
  if (!store) {
    io.stderr.write(`exarch: no runs recorded in ${storeName(io.cwd, target)}\n`);
    return EXIT.ok;
  }
  try {
    const runs = await store.listRuns();
    if (runs.length === 0) {
      io.stderr.write(`exarch: no runs recorded in ${store.file}\n`);
      return EXIT.ok;
    }
    io.stdout.write(formatRuns(runs));
    // Why each unreadable run is so: on stderr, as every problem is; the table above lists it as `unreadable`.
    for (const run of runs)
      if (run.status === 'unreadable')
        io.stderr.write(`exarch: run ${run.id} cannot be read back from ${store.file} (${run.problem}): it cannot be resumed or viewed\n`);
    return EXIT.ok;
  } finally {
    await store.close();
  }
}

/** The table `exarch runs` prints: fixed columns, the task's first line clipped last; what an unreadable run does not say is `-`. */
function formatRuns(runs: readonly RunListing[]): string {
  const rows = runs.map((run) =>
    run.status === 'unreadable'
      ? [run.id, run.startedAt === undefined ? '-' : startedAt(run.startedAt), run.status, '-', '-', '-', firstLine(run.task ?? '')]
      : [run.id, startedAt(run.startedAt), run.status, String(run.agents), String(run.requests), cost(run), firstLine(run.task)],
  );
  const header = ['ID', 'STARTED', 'STATUS', 'AGENTS', 'REQUESTS', 'COST', 'TASK'];
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)));
  const line = (cells: readonly string[]): string =>
    cells
      .map((cell, column) =>
        column === cells.length - 1 ? cell : column >= 3 && column <= 5 ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd();
  return `${[header, ...rows].map(line).join('\n')}\n`;
}

function startedAt(ms: number): string {
  // Local time to the minute: when a person started it, as they would say it.
  const date = new Date(ms);
  if (Number.isNaN(date.getTime())) return '-';
  const pad = (n: number): string => String(n).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

function cost(run: RunSummary): string {
  const model = typeof run.options.model === 'string' ? run.options.model : undefined;
  const dollars = model === undefined ? undefined : estimateCost(model, run.usage);
  if (dollars === undefined) return `${formatCount(run.usage.inputTokens + run.usage.outputTokens)} tok`;
  return `$${dollars.toFixed(dollars < 1 ? 3 : 2)}`;
}

function firstLine(task: string): string {
  const line = (task.split('\n', 1)[0] ?? '').trim();
  return line.length > TASK_CHARS ? `${line.slice(0, TASK_CHARS - 1)}…` : line;
}
