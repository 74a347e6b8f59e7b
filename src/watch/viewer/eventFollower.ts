import type { ServerResponse } from 'node:http';
import { takeChunk, type ByteCursor, type ServedRecords } from './servedRecords.js';

const END_EVENT = Buffer.from('event: end\ndata: \n\n', 'utf8');

/**
 * One page's `/events` stream: the records from where it asked to start, as server-sent events,
 * then `end` once the run has ended and it has them all. It is written with backpressure: after a
 * write the socket did not take at once (`write` returned false) nothing more is written until
 * `drain`, so a page that stops reading holds the server to one chunk of its own, not to the rest
 * of the run (dropping it is StallWatch's).
 */
export class EventFollower {
  private readonly at: ByteCursor;
  private waiting = false;
  private done = false;

  constructor(
    private readonly records: ServedRecords,
    private readonly response: ServerResponse,
    from: number,
    /** Whether the run has ended: no record follows. */
    private readonly ended: () => boolean,
    private readonly onDone: (follower: EventFollower) => void,
  ) {
    this.at = { index: from, offset: 0 };
    response.on('close', () => this.finish());
  }

  /** Sends what the socket takes now; once the run has ended and every record is sent, its end. */
  pump(): void {
    // A client StallWatch just dropped is closed only on the next tick: nothing more is written to it.
    if (this.done || this.waiting || this.response.destroyed) return;
    const frame = (index: number): Buffer | undefined => (index < this.records.count ? this.records.frame(index) : undefined);
    for (let chunk = takeChunk(frame, this.at); chunk !== undefined; chunk = takeChunk(frame, this.at)) {
      if (!this.response.write(chunk)) {
        this.waiting = true;
        this.response.once('drain', () => {
          this.waiting = false;
          this.pump();
        });
        return;
      }
    }
    if (this.ended()) {
      this.response.end(END_EVENT);
      this.finish();
    }
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.onDone(this);
  }
}
