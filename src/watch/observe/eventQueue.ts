import type { RunEvent, TextDeltaEvent } from './events.js';

/** Drop the consumed head of the array once it is this long (and half of it): amortised O(1) per event. */
const COMPACT_AT = 1024;

/**
 * The queue behind one async iterator of run events. The machine never waits for it: `push` is
 * synchronous and never refuses. What the consumer has not taken yet waits here, in order, none
 * dropped, with one exception that keeps a slow consumer from holding a model's whole stream
 * delta by delta: a `text.delta` pushed while the last waiting event is a `text.delta` of the
 * same agent is merged into it (the texts joined, the first one's time kept). So the queue grows
 * by at most one event per stretch of streaming; everything else it holds is bounded by the run's
 * own steps.
 */
export class EventQueue implements AsyncIterableIterator<RunEvent> {
  /**
   * Waiting events are `items[head]` to `items[tail - 1]`. The ends are counted rather than read
   * from the array's length so that a drained queue is reset in place: a consumer that keeps up
   * takes each delta right after it is pushed (measured: every one, when the model yields after
   * each), and a fresh array per drain was an allocation per delta.
   */
  private items: (RunEvent | undefined)[] = [];
  private head = 0;
  private tail = 0;
  /** The last waiting item is a delta this queue made by merging (its own object, safe to extend). */
  private ownTail = false;
  private waiting: ((result: IteratorResult<RunEvent>) => void) | undefined;
  private ended = false;

  /** @param onReturn called once when the consumer stops early (`break`, `return()`), or the queue ends. */
  constructor(private readonly onReturn: () => void = () => undefined) {}

  push(event: RunEvent): void {
    if (this.ended) return;
    const waiting = this.waiting;
    if (waiting) {
      this.waiting = undefined;
      waiting({ value: event, done: false });
      return;
    }
    if (event.type === 'text.delta' && this.tail > this.head) {
      const last = this.tail - 1;
      const tail = this.items[last];
      if (tail?.type === 'text.delta' && tail.agent === event.agent) {
        if (this.ownTail) (tail as { text: string }).text += event.text;
        else {
          const merged: TextDeltaEvent = { ...tail, text: tail.text + event.text };
          this.items[last] = merged;
          this.ownTail = true;
        }
        return;
      }
    }
    this.items[this.tail++] = event;
    this.ownTail = false;
  }

  /** No more events: the consumer gets what waits, then the end. */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.onReturn();
    const waiting = this.waiting;
    this.waiting = undefined;
    waiting?.({ value: undefined, done: true });
  }

  /** Events waiting for the consumer. */
  get size(): number {
    return this.tail - this.head;
  }

  next(): Promise<IteratorResult<RunEvent>> {
    if (this.head < this.tail) {
      const value = this.items[this.head] as RunEvent;
      this.items[this.head++] = undefined;
      if (this.head === this.tail) {
        // Reset in place, unless a burst grew the array past the compaction size: then let it go
        // rather than keep its empty slots for the queue's life.
        if (this.items.length > COMPACT_AT) this.items = [];
        this.head = 0;
        this.tail = 0;
        this.ownTail = false;
      } else if (this.head >= COMPACT_AT && this.head * 2 >= this.tail) {
        this.items = this.items.slice(this.head, this.tail);
        this.tail -= this.head;
        this.head = 0;
      }
      return Promise.resolve({ value, done: false });
    }
    if (this.ended) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiting = resolve));
  }

  return(): Promise<IteratorResult<RunEvent>> {
    this.items = [];
    this.head = 0;
    this.tail = 0;
    this.end();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): this {
    return this;
  }
}
