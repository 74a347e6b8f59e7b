import { MAX_TIMER_MS } from './maxTimer.js';

/** A pending deadline; cancel it when the work it guards finishes first. */
export interface Deadline {
  cancel(): void;
}

/** A deadline in the heap; it is its own handle (no closure per deadline). */
class Entry implements Deadline {
  /** Position in the heap; -1 once fired or cancelled. */
  index: number;

  constructor(
    private readonly queue: DeadlineQueue,
    readonly at: number,
    readonly fire: () => void,
    index: number,
  ) {
    this.index = index;
  }

  cancel(): void {
    this.queue.remove(this);
  }
}

/**
 * Every time limit of the process (tool calls, the stall watchdog of model requests) on one Node
 * timer, over a min-heap of deadlines.
 *
 * A timer per step was a measurable share of a short step: Node drops its list of timers of a
 * given duration whenever that list empties, so arming and clearing one 120-second timer per
 * request re-created the list and rescheduled libuv's timer every time. Here a deadline is a heap
 * insert and a cancel a heap removal; the one timer is re-armed only when the earliest deadline
 * moves earlier, and is unref'd while no deadline is pending, so it never keeps the process alive
 * by itself (a pending deadline does, as a timer would).
 */
export class DeadlineQueue {
  private readonly heap: Entry[] = [];
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  /** Calls `fire` once `delayMs` have passed, unless cancelled first. */
  add(delayMs: number, fire: () => void): Deadline {
    const entry = new Entry(this, performance.now() + Math.max(0, delayMs), fire, this.heap.length);
    this.heap.push(entry);
    this.siftUp(entry.index);
    if (entry.at < this.timerAt) this.arm(entry.at);
    else if (this.heap.length === 1) this.timer?.ref();
    return entry;
  }

  /** Deadlines pending (for tests). */
  get size(): number {
    return this.heap.length;
  }

  /** Takes a deadline out of the heap (`Deadline.cancel`); nothing if it fired or was cancelled. */
  remove(entry: Entry): void {
    const i = entry.index;
    if (i < 0) return;
    entry.index = -1;
    const last = this.heap.pop() as Entry;
    if (last !== entry) {
      this.heap[i] = last;
      last.index = i;
      this.siftDown(i);
      this.siftUp(last.index);
    }
    // The timer stays armed for its (now stale) time: when it fires it re-arms for what is due.
    if (this.heap.length === 0) this.timer?.unref();
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timerAt = at;
    // At most what a timer holds: a later deadline is waited for in steps (the timer re-arms for what is left).
    this.timer = setTimeout(this.onTimer, Math.min(MAX_TIMER_MS, Math.max(1, Math.ceil(at - performance.now()))));
  }

  private readonly onTimer = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = performance.now();
    for (let top = this.heap[0]; top !== undefined && top.at <= now; top = this.heap[0]) {
      this.remove(top);
      top.fire();
    }
    const next = this.heap[0];
    if (next) this.arm(next.at);
  };

  private siftUp(i: number): void {
    const heap = this.heap;
    const entry = heap[i] as Entry;
    while (i > 0) {
      const parentIndex = (i - 1) >> 1;
      const parent = heap[parentIndex] as Entry;
      if (parent.at <= entry.at) break;
      heap[i] = parent;
      parent.index = i;
      i = parentIndex;
    }
    heap[i] = entry;
    entry.index = i;
  }

  private siftDown(i: number): void {
    const heap = this.heap;
    const entry = heap[i] as Entry;
    const n = heap.length;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= n) break;
      const right = left + 1;
      const child = right < n && (heap[right] as Entry).at < (heap[left] as Entry).at ? right : left;
      const smaller = heap[child] as Entry;
      if (smaller.at >= entry.at) break;
      heap[i] = smaller;
      smaller.index = i;
      i = child;
    }
    heap[i] = entry;
    entry.index = i;
  }
}

/** The process's deadlines. */
export const deadlines = new DeadlineQueue();
