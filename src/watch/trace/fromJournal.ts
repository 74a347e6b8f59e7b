import type { TraceRecord } from './format.js';
import { renderViewerHtml } from '../viewer/html.js';
import { writeViewerPage, type WrittenViewer } from '../viewer/write.js';
import { RunError } from '../../run/durableRun.js';
import type { JournalRecord } from '../../engine/log/journalRecord.js';
import type { JournalRow, RunStore } from '../../store/runStore.js';
import { JournalConverter, ROOT_ID } from './journalConverter.js';

/**
 * A durable run's journal as a turn-flow trace (src/watch/trace/format.ts), so `exarch view` can show a
 * run from its store as it shows a trace recorded live by `TraceRecorder`.
 *
 * The journal holds what the sessions recorded, not their state values: the state timeline is
 * derived from the records, by the transitions of machines/session.ts that write them.
 *
 * - `session`: the agent starts (`agent.start`), in `starting` when it was given a task (it rests
 *   there until its first turn) and in `readyForUser` without one (it leaves `starting` in its
 *   first macrostep, so observers never see it there).
 * - a user `message` of text only: a turn starts (`startTurn`), then `streaming` (request 1).
 * - `usage`: a response was committed (`response`). With tool calls: `dispatchingBatch`. Refused:
 *   `failed`. A record of the same macrostep that follows it names the target when one does:
 *   `nudge` (`nudged`), `outcome` capped / empty (`finishedWithoutReply`) / failed after a
 *   truncation. Otherwise `pause_turn` asks again (`streaming`, one more request) and anything else
 *   ends the turn (`readyForUser`).
 * - a user `message` of tool results while a batch is open: the batch was committed. On its drain
 *   (every result was recorded by a `tool` record first) the next record names the target as
 *   above (`outcome` replied/empty → `replied`, capped, failed after a truncation; `nudge`),
 *   else `streaming`. Results that were never recorded were filled in by a cancellation or a stop
 *   (`closeOpenCalls`): the `outcome` that follows decides.
 * - `nudge`: `nudged`; the tick that follows starts the next request one event-loop turn later,
 *   written at the same time (`streaming`), unless the session ended first.
 * - `outcome`: the final state (`replied`, `finishedWithoutReply`, `capped`, `failed`,
 *   `cancelled`) and `agent.end` (`done`). `empty` is `replied` when it follows a committed batch
 *   (a `reply` whose payload rendered empty) and `finishedWithoutReply` when it follows a response.
 *   An outcome the session recorder wrote for an actor stopped from outside (`session actor
 *   stopped`) or crashed (`session crashed: …`) is no state: `agent.end` `stopped` / `error`.
 * - `stopped`: the actor was stopped at rest: `readyForUser`, `agent.end` `stopped`.
 * - `resumed`: a new process took the session up in the state it names (a resumed `streaming` is
 *   a new request).
 *
 * Records an interrupt cancelled and a later resume undid (as `restoreRun` skips them) become
 * `event` records (`cancel`, `stop`) rather than ends; the run-level markers become `event`
 * records (`interrupt`, `resume`) on the root.
 *
 * Where it differs from a live trace of the same run (test/e2e/watch/journalTrace.test.ts checks the rest):
 * - times: `t` is whole milliseconds of the journal's `ts`, from the first row; a derived state
 *   change is written at the time of the record that implies it (`nudged` → `streaming` at the
 *   nudge's, as the tick comes within the event-loop turn).
 * - a message merged into within one macrostep (tool results, then a reminder) is written once per
 *   append, not once per snapshot; the last record per index is the same.
 * - no `delivery` for a child whose parent was already ending in a final state (a child cancelled
 *   by its replied or capped parent): its result never entered the parent's inbox, so the journal
 *   has no `inbox` record, while the live recorder writes the done event the parent was sent.
 * - events: `user.message` from `queued` records, `retry` (live traces have none), `cancel` and
 *   `model.error` from the outcome's reason (a crash's or model error's text is the
 *   `describeError` line the session recorded, not the raw `Error.message`).
 * - across a resume, one lane per agent: one `agent.start` and at most one end; the resumed state
 *   is written again (a new bar) where the new process took the session up. A resumed session's `starting`
 *   is never written, as it is never observed live. A stream in flight at a crash was never committed,
 *   so it has no `response`.
 * - a cancel that reaches a batch of protocol calls only between its opening and its drain (one
 *   microtask) reads as drained then cancelled in `streaming`; a cancel within a `nudged` state's
 *   tick (same millisecond) is told from one in the `streaming` that follows by the timestamps.
 */
export function traceFromJournal(rows: readonly JournalRow[], title: string): TraceRecord[] {
  const out: TraceRecord[] = [];
  const converter = new JournalTraceStream(title, (record) => out.push(record));
  converter.add(rows);
  converter.end();
  return out;
}

/** `exarch view RUN_ID`: writes the turn-flow viewer for a durable run of `store`. */
export async function writeViewerForRun(store: RunStore, runId: string, outFile: string, title?: string): Promise<WrittenViewer> {
  const run = await store.getRun(runId);
  if (!run) throw new RunError(`no run with id ${runId}`, 'unknown-run', runId);
  const records = traceFromJournal(await store.journal(runId), title ?? `exarch run ${runId}`);
  // The model the run was started with prices its costs in the page.
  const model = run.options['model'];
  const first = records[0];
  if (typeof model === 'string' && first?.kind === 'trace.start') records[0] = { ...first, model };
  const html = renderViewerHtml(records);
  writeViewerPage(outFile, html);
  return { outFile, agents: records.filter((record) => record.kind === 'agent.start').length, records: records.length, leftOut: [] };
}

/** A row not yet converted, with what deciding its meaning needs to know of the rows after it. */
interface Pending {
  readonly row: JournalRow;
  /** The next row of the same session, once it has arrived. */
  next: JournalRow | undefined;
  /** It came after an interrupt marker and before any resume marker that followed it. */
  readonly afterInterrupt: boolean;
  /** Resume markers that had arrived before it. */
  readonly resumesBefore: number;
}

/**
 * `traceFromJournal` for a journal that is still being written: rows are `push`ed as a follower
 * reads them (`exarch run --db` polling the store) and each trace record is handed to `emit` as
 * soon as the rows after it can no longer change it, so a run can be watched live from its store.
 *
 * Some records are told only by what follows them in their session (a response that ended a turn,
 * tool results, a nudge: see above), and a cancellation after an interrupt only by whether a
 * resume comes: such a row waits, and the rows of its session after it, until that arrives or
 * `end`. Other sessions' rows go on meanwhile, so records of different agents may come in another
 * order than in `traceFromJournal` (and their `t`, never decreasing, a little later); each
 * agent's records are the same, in the same order. Memory: one entry per session and the rows
 * waiting, never the journal.
 */
export class JournalTraceStream {
  private pending: Pending[] = [];
  /** The last row of each session that has arrived (to link its successor). */
  private readonly lastOf = new Map<string, Pending>();
  private afterInterrupt = false;
  private resumes = 0;
  private ended = false;
  /** What the rows mean, once they are settled. */
  private readonly converter: JournalConverter;

  constructor(title: string, emit: (record: TraceRecord) => void) {
    this.converter = new JournalConverter(title, emit);
  }

  /** Rows that follow those pushed before (in `seq` order); emits what they settle. */
  push(rows: readonly JournalRow[]): void {
    this.add(rows);
    this.drain();
  }

  /** Rows in `seq` order, taken in without converting any yet (`traceFromJournal` converts them all at `end`). */
  add(rows: readonly JournalRow[]): void {
    for (const row of rows) {
      const pending: Pending = { row, next: undefined, afterInterrupt: this.afterInterrupt, resumesBefore: this.resumes };
      const previous = this.lastOf.get(row.session);
      if (previous) previous.next = row;
      this.lastOf.set(row.session, pending);
      if (row.session === '' && row.record.type === 'interrupt') this.afterInterrupt = true;
      if (row.session === '' && row.record.type === 'resume') {
        this.afterInterrupt = false;
        this.resumes += 1;
      }
      this.pending.push(pending);
    }
  }

  /** No more rows will come: converts those still waiting and ends the trace. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.drain();
    this.converter.end();
  }

  /** Converts, in order, every row nothing to come can change; a row that must wait holds back its session's later rows. */
  private drain(): void {
    const held = new Set<string>();
    const rest: Pending[] = [];
    for (const pending of this.pending) {
      // Run-level markers are written as the root's events: they keep their place among its records.
      const lane = pending.row.session === '' ? ROOT_ID : pending.row.session;
      if (held.has(lane) || !this.settled(pending)) {
        held.add(lane);
        rest.push(pending);
        continue;
      }
      this.convert(pending);
    }
    this.pending = rest;
  }

  /** An interrupt's cancellation is undone only by a resume that follows it. */
  private undone(pending: Pending): boolean {
    return pending.afterInterrupt && this.resumes > pending.resumesBefore && undoneByInterrupt(pending.row.record);
  }

  /** Whether the rows after `pending` can no longer change what it means. */
  private settled(pending: Pending): boolean {
    if (this.ended) return true;
    const { row } = pending;
    if (row.session === '') return true;
    if (pending.afterInterrupt && this.resumes === pending.resumesBefore && undoneByInterrupt(row.record)) return false;
    return pending.next !== undefined || !this.converter.needsNext(row.session, row.record);
  }

  private convert(pending: Pending): void {
    this.converter.convert(pending.row, pending.next, this.undone(pending));
  }
}

function undoneByInterrupt(record: JournalRecord): boolean {
  if (record.type === 'outcome') return record.outcome === 'cancelled';
  if (record.type === 'inbox') return record.result.outcome === 'cancelled';
  return record.type === 'stopped';
}
