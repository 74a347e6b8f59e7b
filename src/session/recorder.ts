import { describeError } from '../engine/model/errors.js';
import { addUsage, ZERO_USAGE } from '../engine/usage.js';
import type { Usage } from '../engine/types.js';
import type { JournalRecord } from '../engine/log/journalRecord.js';
import type { SessionJournal } from '../store/runJournal.js';
import type { LogRecord, SessionLog } from '../engine/log/sessionLog.js';

/**
 * A session's handle on its log, and on its run's journal when the run is durable. It remembers
 * whether an outcome was written, so a session stopped from outside (no final state reached)
 * still ends its log with one.
 */
export class SessionRecorder {
  private ended = false;
  private ownUsage: Usage;
  private subtreeUsage: Usage;

  /** `usage`: what a resumed session had already spent (its own, and its finished children's). */
  constructor(
    private readonly log: SessionLog,
    private readonly journal?: SessionJournal,
    usage: { own: Usage; subtree: Usage } = { own: ZERO_USAGE, subtree: ZERO_USAGE },
  ) {
    this.ownUsage = usage.own;
    this.subtreeUsage = usage.subtree;
  }

  record(record: LogRecord): void {
    if (record.type === 'outcome') this.ended = true;
    else if (record.type === 'usage') this.ownUsage = record.session;
    else if (record.type === 'lost') this.ownUsage = addUsage(this.ownUsage, record.usage);
    else if (record.type === 'inbox') this.subtreeUsage = addUsage(this.subtreeUsage, record.result.usage);
    this.log.append(record);
    this.journal?.append(record);
  }

  /** Requests of a step that ended without a response to keep (see the `lost` record). */
  lost(spent: { readonly requests: number; readonly usage: Usage }): void {
    if (this.ended) return;
    this.record({ type: 'lost', requests: spent.requests, usage: spent.usage });
  }

  /** A record only a resume needs (a settled tool call, a queued user message): journal only. */
  note(record: JournalRecord): void {
    this.journal?.append(record);
  }

  /** Whether the session's records go to a durable journal. */
  get durable(): boolean {
    return this.journal !== undefined;
  }

  flush(): void {
    this.log.flush();
  }

  /**
   * The session actor stopped: close the log. If no final state wrote an outcome, a session at
   * rest records that it stopped there; one stopped mid-work was cancelled; one that crashed failed.
   */
  stopped(how: { state: string; atRest: boolean; crash?: { error: unknown } }): void {
    const { crash } = how;
    if (!this.ended && how.atRest && !crash) {
      this.record({ type: 'stopped', state: how.state, usage: this.ownUsage, totalUsage: addUsage(this.ownUsage, this.subtreeUsage) });
    } else if (!this.ended) {
      this.record({
        type: 'outcome',
        outcome: crash ? 'failed' : 'cancelled',
        text: '',
        reason: crash ? `session crashed: ${describeError(crash.error)}` : 'session actor stopped',
        usage: this.ownUsage,
        totalUsage: addUsage(this.ownUsage, this.subtreeUsage),
      });
    }
    this.log.close();
    this.journal?.close();
  }
}
